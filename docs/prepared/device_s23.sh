#!/usr/bin/env bash
# Session 23, device call 1 (prepared in session 22): two questions in one call.
#  1. Does the queued lo passes' commit (196de31) cost 4x8k its +1.5%? Here first, on main:
#       base=$(git rev-parse --short HEAD); git revert --no-edit 196de31; scripts/ab_base.sh $base
#     then run with carry .ab .deps .whl as `bash docs/prepared/device_s23.sh <commit>`. The A/B's "new" is the revert:
#     base/new < 1 on 4x8k means the revert is faster (keep it); g0 / model show what the queued passes bought (1-2%).
#  2. Why did session 22's three-column run put gdn 3-5% above the check tool (1x32k 0.858 / 0.827, 4x8k 0.849 / 0.815,
#     1x128k 3.417 / 3.237; 1x4k, 8x1k, the TP cases equal)? The Python bench (gdn column only) and the check tool
#     time 1x32k, 4x8k and 1x128k back to back, twice, at the revert's tree.
#  3. g0-1x3k (unsplit, o by fwd_o: err_o ~2.6e-3 at g = 0) against g0-1x3k/fused (o in the chain), both sides of the A/B.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="4x8k 1x32k g0-1x32k model-1x32k 8x1k g0-1x3k g0-1x3k/fused" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -6 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100
B=build-device/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head -5
# Session 22's fp16 fused kernel without the h_lo staging (c8c44c5: SASS checked, not yet run): its cases and memcheck.
grep -E "fp16 128.*fused" $OUT/quick.log | cut -c1-100
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $B --quick --only "fp16 128" > $OUT/memcheck_fp16.log 2>&1; echo "[$SECONDS s] memcheck fp16 rc=$? $(grep 'ERROR SUMMARY' $OUT/memcheck_fp16.log)"
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/pybuild.log 2>&1; echo "[$SECONDS s] pip rc=$?"
for round in 1 2; do
  timeout 150 python3 bench/bench_gpu.py --no-decode --no-serving --no-fla --no-flashqla --no-ref --cases 1x32k,4x8k,1x128k \
    --json /tmp/b$round.json 2>&1 | grep -E "^(1x|4x)" | cut -c1-60 | sed "s/^/python r$round /"
  for c in 1x32k 4x8k 1x128k; do timeout 60 $B --bench --no-check --case $c 2>&1 | grep -E '^bench' | sed "s/^/check  r$round /"; done
done
