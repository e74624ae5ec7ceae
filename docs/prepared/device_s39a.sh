#!/usr/bin/env bash
# Session 39 (prepared in session 38; ~4 min; carry .deps): the exact stages' fwd_h and fwd_o
# with each piece's global loads issued a piece ahead into registers (s39_stages_prefetch.patch:
# load_share / store_share, __launch_bounds__(256, 2): 128 registers, no spills). Setup: run on
# main with the patch applied (`git apply docs/prepared/s39_stages_prefetch.patch`). Tests the
# patched tree (the CUDA suites that run the stages, racecheck), times K = V = 256 (4x8k, bf16)
# and fp32 (1x8k, K = 256) kernel by kernel, then reverts the patch, rebuilds the Python package
# and times main the same way on the same machine. Predicted fwd_h 15.1 -> ~10 ms, fwd_o 9.9 ->
# ~7 (H100, session 38: load, barrier, compute in turn at ~32% of the FMA peak).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
bash scripts/device.sh build,pybuild > $OUT/build.txt 2>&1; grep -E "build:|pip" $OUT/build.txt | tail -2
B=build-device/tests
for t in test_stages test_head_sizes test_forward; do
  timeout 70 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:CrossBackend*' > $OUT/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/$t.log | tr '\n' ' ')"
done
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_stages --gdn_gpu_suite --gtest_filter='CUDA*' > $OUT/race.log 2>&1
echo "racecheck stages rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log | tail -1)"
echo "== new"; timeout 60 python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]" | head -7
timeout 30 python3 bench/gdn_kernels.py --reps 3 --dtype fp32 --lens 8192 2>&1 | tail -1
git apply -R docs/prepared/s39_stages_prefetch.patch
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 300 python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/pip_base.txt 2>&1; echo "base pip rc=$?"
echo "== main"; timeout 60 python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]" | head -7
timeout 30 python3 bench/gdn_kernels.py --reps 3 --dtype fp32 --lens 8192 2>&1 | tail -1
rm -f $OUT/build.log
echo "[$SECONDS s] done"
