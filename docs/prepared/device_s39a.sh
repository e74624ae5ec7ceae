#!/usr/bin/env bash
# Session 39 (prepared in session 38; ~4 min; carry .deps .ab): the exact stages' fwd_h and fwd_o
# with each piece's global loads issued a piece ahead into registers (s39_stages_prefetch.patch:
# load_share / store_share, __launch_bounds__(256, 2): 128 registers, no spills). Setup:
# `scripts/ab_base.sh main && git apply docs/prepared/s39_stages_prefetch.patch` (base = main,
# new = this tree). A/B by the check tool's K = V = 256 rows (NAME/d256, the exact stages), the
# CUDA suites that run the stages and racecheck on new, then new's kernels one by one
# (bench/gdn_kernels.py, us per call). Predicted (H100, session 38: fwd_h 15.1 ms, fwd_o 9.9, load,
# barrier and compute in turn at ~32% of the FMA peak): fwd_h ~10, fwd_o ~7, 4x8k/d256 31 -> ~23.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
GDN_AB_CASES="4x8k/d256 8x1k/d256 1x32k/d256" bash scripts/device.sh build,pybuild,ab > $OUT/device_ab.txt 2>&1
tail -6 $OUT/device_ab.txt
B=build-device/tests
for t in test_stages test_head_sizes test_forward; do
  timeout 70 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:CrossBackend*' > $OUT/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/$t.log | tr '\n' ' ')"
done
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_stages --gdn_gpu_suite --gtest_filter='CUDA*' > $OUT/race.log 2>&1
echo "racecheck stages rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log | tail -1)"
timeout 60 python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]|kernels" | head -8
timeout 30 python3 bench/gdn_kernels.py --reps 3 --dtype fp32 --lens 8192 2>&1 | tail -1
rm -f $OUT/build.log
echo "[$SECONDS s] done"
