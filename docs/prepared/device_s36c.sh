#!/usr/bin/env bash
# Session 36, call 2 (~9 min; carry .ab .deps): fp16 operands for bf16 inputs, the conversions'
# latency cut. Call 1 (device_s36a.sh) measured the patch: model-1x32k -7.1%, g0-1x32k -7.0%,
# 256x64 -4.1%, 64x256 level, but the bench's gates on kFusedO +5.5% (1x32k h 0.510 -> 0.552 ms):
# the chain waited for normed[s], i.e. for the norm warpgroup's conversion of q and k (16 dependent
# 16-byte load/store pairs a thread) and q's norms. Here the norm warpgroup converts k first and
# arrives at converted[s], which the chain waits for alone; the chain's own conversions (summary,
# storing, serial) load two rows' pieces before storing. Setup: scripts/ab_base.sh main 4cac4d7.
#  base: main;  v1: the patch as call 1 ran it (4cac4d7);  new: this tree.
# Also the K = V = 64 rows (new's /d64 against its own /d64bf16ops: fwd_prep, fwd_h_mma and fwd_o
# converting their fragments), the quick set, racecheck and synccheck on the fused cases.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 new)
ab_smoke 1x32k 8x1k 64x256 model-1x32k tp8-1x4k
AB_PHASES=1 ab_time 390 1x32k model-1x32k 4x8k 8x1k 64x256 256x64 tp4-1x32k mixed 64x256/fp16
ab_table
for c in 1x32k/d64 1x32k/d64bf16ops 8x1k/d64 8x1k/d64bf16ops 64x256/d64 64x256/d64bf16ops; do
  has_side new && timeout 30 "$(bin_of new)" --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench |phases' \
    | tr '\n' ' ' | sed 's/$/\n/' | tee -a "$OUT/summary.txt"
done
AB_QUICK_REF=bench/results/h200_s36_call1_quick_new.log ab_quick new 100
ab_sanitize new racecheck "fused" 555
ab_sanitize new synccheck "fused" 590
