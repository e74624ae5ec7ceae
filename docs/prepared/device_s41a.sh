#!/usr/bin/env bash
# Session 42's first call (prepared in session 41; ~4-5 min; carry .deps .ab; setup
# `scripts/ab_base.sh main`): fwd_o at K = V = 256 by V quarters with h over k's rows
# (s41_fwd_o_256_quarters.patch, new) against main (base): 106 KB a block, two blocks per SM, where
# main's 170 KB block (one per SM) loads and multiplies in turn (H100, session 41: fwd_o 2.06 ms of
# 4x8k/d256's 4.12). The sums are main's in main's order: the K = 256 check lines should be bitwise
# base's. The D = 128 kernels' SASS is unchanged (cubin .text).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=420}"
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s41_fwd_o_256_quarters.patch src/cuda/chunk/fwd_o.cu kHOverK || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -3
for side in base new; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --only 256 >/tmp/c256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/c256_$side.log)"
done
diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL)' /tmp/c256_new.log) >/dev/null &&
  echo "K = 256 lines: bitwise base's" || { echo "K = 256 lines differ:"; diff /tmp/c256_base.log /tmp/c256_new.log | head -12 | cut -c1-160; }
for round in 1 2; do
  for c in 4x8k/d256 1x32k/d256 8x1k/d256 64x256/d256 tp4-1x32k/d256; do
    for side in base new; do
      [[ $(left) -gt 120 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
B=build-device/tests
timeout 60 $B/test_forward --gdn_gpu_suite --gtest_filter='CUDA*' >/tmp/tf.log 2>&1
echo "test_forward rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/tf.log | tr '\n' ' ')"
new=$(bin_of new)
if [[ $(left) -gt 45 ]]; then
  timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 $new --only "fast bf16 256,fast fp16 256" >/tmp/race.log 2>&1
  echo "racecheck 256 rc=$? $(grep 'RACECHECK SUMMARY' /tmp/race.log | tail -1)"
fi
if [[ $(left) -gt 35 ]]; then
  timeout 35 compute-sanitizer --tool memcheck --error-exitcode 9 $new --only "fast bf16 256,fast fp16 256" >/tmp/mem.log 2>&1
  echo "memcheck 256 rc=$? $(grep 'ERROR SUMMARY' /tmp/mem.log | tail -1)"
fi
grep phases $OUT/ab.log | sed -E 's/.*(phases.*)/\1/' | head -10
rm -f $OUT/build.log
echo "[$SECONDS s] done"
