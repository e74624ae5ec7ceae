#!/usr/bin/env bash
# Session 23, device call 1 (prepared in session 22): four questions in one call (~9 min). Here first, on main:
#   M=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s23_revert_queued.patch && git commit -qam "chain: revert 196de31 (the queued lo passes)"
#   R=$(git rev-parse --short HEAD)    # (the patch: git revert 196de31 with c8c44c5's fp16 h_lo address kept)
#   git apply docs/prepared/s23_wgmma_tiles_after_revert.patch && git commit -qam "wgmma: one descriptor per operand tile"
#   T=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s23_split_short.patch && git commit -qam "heuristics: two parts from halves of 16 chunks"
#   scripts/ab_base.sh $M $R $T
# then run with carry .ab .deps .whl as `bash docs/prepared/device_s23.sh <commit>`. Columns: base = main, v1 = the
# revert, v2 = + the tile descriptors, new = + the short split.
#  1. Does the queued lo passes' commit (196de31) cost 4x8k its +1.5%? base/v1 on 4x8k (> 1: the revert is slower);
#     g0 / model show what the queued passes bought (1-2%). Keep the revert if it wins 4x8k back (if not, the tile
#     descriptors on main are s23_wgmma_tiles.patch).
#  2. The wgmma descriptors built once per operand tile (v1 -> v2): the same descriptors, ~230 fewer instructions in
#     the bf16 fused kernel (7319 -> 7093 static; 5 uniform instructions per wgmma become 1-2), most in the chain
#     warpgroup's per-chunk path, the critical one: predicted 1-3% off the h phase; the quick check must not move.
#  3. One prompt of 2-4k tokens at HV = 32 split in two (fused o) instead of one part with fwd_o beside it: v2 -> new on
#     1x3k, g0-1x3k (predicted ~0.045 ms faster each; the fused o's g = 0 err 2.18e-3 instead of fwd_o's ~2.6e-3).
#  4. Why did session 22's three-column run put gdn 3-5% above the check tool (1x32k 0.858 / 0.827, 4x8k 0.849 / 0.815,
#     1x128k 3.417 / 3.237; 1x4k, 8x1k, the TP cases equal)? The Python bench (gdn column only, with its errors) and
#     the check tool time 1x32k, 4x8k, 1x3k, g0-1x3k back to back at the new tree, if time is left.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="4x8k 1x32k g0-1x32k model-1x32k 1x3k g0-1x3k" scripts/device.sh build,ab,quick > /dev/null 2>&1  # (summary.txt: build, A/B and quick check notes)
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -7 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -48
B=build-device/tools/cuda_check/gdn_cuda_check
# The tile descriptors keep every bit: v1 and v2's quick checks of the chain kernels, diffed.
for v in v1 v2; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick --only "fused,split,g=0" > /tmp/q_$v.log 2>&1; done
echo "[$SECONDS s] quick v1/v2 (tiles): $(diff <(grep -E '^(ok|FAIL)' /tmp/q_v1.log) <(grep -E '^(ok|FAIL)' /tmp/q_v2.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' /tmp/q_v2.log)"
# Session 22's fp16 fused kernel without the h_lo staging (c8c44c5: SASS checked, not yet run): its cases and memcheck;
# the 3000-token "g=0 long" cases now split.
grep -E "fp16 128.*fused|g=0 long" $OUT/quick.log | cut -c1-100
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B --quick --only "fp16 128,g=0 long" > $OUT/memcheck.log 2>&1; echo "[$SECONDS s] memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck.log)"
[[ $SECONDS -gt 430 ]] && exit 0
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 150 python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/pybuild.log 2>&1; echo "[$SECONDS s] pip rc=$?"
timeout $((570 - SECONDS)) python3 bench/bench_gpu.py --no-decode --no-serving --no-fla --no-flashqla --cases 1x32k,4x8k,1x3k,g0-1x3k \
  --json $OUT/py.json 2>&1 | grep -E "^(1x|4x|g0)" | cut -c1-150 | sed "s/^/python /"
for c in 1x32k 4x8k 1x3k g0-1x3k; do timeout 30 $B --bench --no-check --case $c 2>&1 | grep -E '^bench' | sed "s/^/check  /"; done
