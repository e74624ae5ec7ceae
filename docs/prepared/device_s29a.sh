#!/usr/bin/env bash
# Session 29, call 1 (prepared in session 28, ~8 min): q's norms by a third, norm warpgroup of the
# fused chain (s29_norm_wg.patch). Here first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s29a
#   git am -3 -q docs/prepared/s29_norm_wg.patch
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s29a.sh <commit>`. Sides:
#  base: main.
#  new:  kkt_solve no longer reads q for its inverse norms; the fused chain runs 384 threads, its
#        third warpgroup (setmaxnreg 32; chain 248, o 232) forms them from each ring stage once its
#        TMA copies land and hands them to the o warpgroup on per-stage mbarriers (normed[s]).
#        Session 28 measured the other placements: prep -16% (0.229 -> 0.192 ms on 1x32k) but the
#        chain +28% when the chain warpgroup formed them. Here neither critical warpgroup does: the o
#        warpgroup's only new work is one mbarrier wait per chunk, the norms ready ~2 chunks ahead.
#        Predicted: prep -16%, h within +-1% (if the third warpgroup's ~150 instructions a chunk
#        take no issue slots that matter: session 24 measured ~1600 of ~3900 per scheduler),
#        1x32k / 4x8k -4 to -5%. The unfused path (256x64) is untouched. Bitwise the same sums.
# A barrier or phase mistake hangs: each side is smoke-run first (20 s per case).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 8x1k 1x32k mixed 64x256
AB_PHASES=1 ab_time 330 1x32k 4x8k 8x1k 64x256 mixed tp4-1x32k model-1x32k
ab_table
grep -E '^\S+ (1x32k|4x8k|mixed) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log  # main's quick lines (the fused kernels since b5fefbb)
lines() { grep -E '^(ok|FAIL)' $1; }
timeout 90 $(bin_of new) --quick > /tmp/q_new.log 2>&1
n=$(lines $REF | wc -l)
echo "[$SECONDS s] quick new: $(grep -c '^FAIL ' /tmp/q_new.log) FAIL, of $(basename $REF)'s $n lines $(diff <(lines $REF) <(lines /tmp/q_new.log | head -$n) | grep -c '^[<>]') differ (0 expected)" | tee -a $OUT/summary.txt
cp /tmp/q_new.log $OUT/quick_new.log
# The sanitizers on the three warpgroups: the fused chain, the split, checkpoints, partial chunks
# (the norms skip rows past len while the chain warpgroup zeroes them).
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused" 500
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,140 seqs fused" 540
ab_sanitize new memcheck "fused,split,140 seqs,odd stride" 560
# Then (call 2, with .deps) `scripts/device.sh build,pybuild,test,pytest` on what lands: the GPU
# suites run the fused chain without l2norm too (the norm warpgroup idles, the o warpgroup skips
# its wait), which the quick set does not.
