#!/usr/bin/env bash
# Session 32, call 2 (prepared in session 31, ~9 min): the serial fused chain (s32_serial, on
# s32_norm_in_o): one warpgroup per block computes each chunk's chain and then its o, on one ring
# stage (~108 KB: two blocks per SM); the heuristics take it for short sequences in several waves
# (256x64, 64x256 among the SPEC's cases). On main:
#   M=$(git rev-parse --short HEAD); git checkout -b s32b
#   git am -3 -q docs/prepared/s32_norm_in_o.patch; V1=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s32_serial.patch
#   scripts/ab_base.sh $M $V1
# then with carry .ab .deps: `bash docs/prepared/device_s32b.sh <commit>`. (If call 1 landed
# s32_norm_in_o, main is V1: `scripts/ab_base.sh $M` and SIDES=(base new) below.) Sides:
#  base: main; v1: + s32_norm_in_o; new: + s32_serial.
#  Predicted (docs/perf.md "Next steps", the desk estimate): 256x64 0.88 -> ~0.69 ms (its one-chunk
#  items: ~9.5 us a block, two blocks per SM, 16384 blocks; the states' 1.07 GB alone are ~0.26 ms
#  at 4.2 TB/s), 64x256 0.495 -> ~0.41; 8x1k, 4x8k, 1x32k unchanged against v1 (their path is
#  v1's). Correctness: the quick set's "serial" cases (every fused case again in the serial form,
#  listed last) and the default cases the heuristics now send there ("140 seqs", "g=0
#  one-chunk": the latter held to 2.4e-3); the first 125 lines otherwise main's (the fused
#  ones bitwise).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 new)
[[ -f .ab/v1.tar ]] || SIDES=(base new)
ab_smoke 8x1k 256x64 64x256
AB_PHASES=1 ab_time 260 256x64 64x256 8x1k 4x8k 1x32k
ab_table
grep -E '^\S+ (256x64|64x256) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+( +o [0-9.]+)?' | paste - - | tee -a $OUT/summary.txt
# The serial form forced where the heuristics keep the two warpgroups (new only), and 256x64's
# two-warpgroup form (/fused) beside it.
if has_side new; then
  for c in 8x1k/serial mixed/serial 4x8k/serial 256x64/fused 64x256/fused 8x1k 4x8k mixed; do
    [[ $SECONDS -lt 330 ]] || break
    echo "new $(timeout 30 $(bin_of new) --bench --no-check --case $c 2>&1 | grep -E '^bench ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
fi
ab_quick new 120
has_side new && grep -E '^(ok|FAIL) .*serial' $OUT/quick_new.log | head -60 >> $OUT/summary.txt
ab_sanitize new synccheck "pool fused serial,split 2 parts fused serial,140 seqs" 480
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused serial,g=0 one-chunk" 520
ab_sanitize new memcheck "fused serial,140 seqs,odd stride" 575
