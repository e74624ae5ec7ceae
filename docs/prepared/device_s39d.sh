#!/usr/bin/env bash
# Session 39, call 2 (~7 min; carry .deps .ab): the prepared rewrites of the exact stages in one
# call. Setup here: `scripts/ab_base.sh main <main + s39_stages_prefetch.patch> <main +
# s39_stages_tf32.patch>` (base = main, v1 = prefetch, v2 = tf32 three passes); this script applies
# s39_stages_tf32_1pass.patch (tf32, one pass where the inputs are 16-bit) to the device's copy
# (new). A/B on the check tool's NAME/d256 rows; the K = 256 correctness lines of v1, v2 and new
# (their errors against the fp64 oracle side by side); the stage suites, racecheck and the kernels
# one by one on new.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
P=docs/prepared/s39_stages_tf32_1pass.patch
(git apply "$P" 2>/dev/null || patch -p1 <"$P" >/dev/null) && echo "tf32 1-pass patch applied" || echo "tf32 1-pass patch FAILED"
GDN_AB_CASES="4x8k/d256 8x1k/d256 1x32k/d256" bash scripts/device.sh build,pybuild,ab >$OUT/device_ab.txt 2>&1
tail -8 $OUT/device_ab.txt
for side in v1 v2 new; do
  bin=build-device/tools/cuda_check/gdn_cuda_check
  [[ $side != new ]] && bin=/tmp/ab-$side/build/tools/cuda_check/gdn_cuda_check
  timeout 90 $bin --only 256 >$OUT/check256_$side.log 2>&1
  echo "check 256 $side rc=$?"; grep -E '256' $OUT/check256_$side.log | head -14; tail -1 $OUT/check256_$side.log
  [[ $side != new ]] && rm -f $OUT/check256_$side.log
done
B=build-device/tests
for t in test_stages test_head_sizes test_forward; do
  timeout 70 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:CrossBackend*' >$OUT/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/$t.log | tr '\n' ' ')"
done
rm -f $OUT/test_*.log
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_stages --gdn_gpu_suite --gtest_filter='CUDA*' >$OUT/race.log 2>&1
echo "racecheck stages rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log | tail -1)"
timeout 60 python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]|kernels" | head -8
timeout 30 python3 bench/gdn_kernels.py --reps 3 --dtype fp32 --lens 8192 2>&1 | tail -1
rm -f $OUT/build.log
echo "[$SECONDS s] done"
