#!/usr/bin/env bash
# Session 42's first call (prepared in session 41; ~5 min; carry .deps .ab; setup
# `scripts/ab_base.sh main main+docs/prepared/s41_k256_two_h_stagings.patch`): K = V = 256's two
# halves of time on an H100 (session 41: 4x8k/d256 4.12 ms = prep 0.22 + h 1.82 + o 2.06).
#   v1  = main + s41_k256_two_h_stagings.patch: the storing chain's h staging doubled (h_c in
#         staging c % 2), so that the bulk copy of h_c has until B1 of chunk c + 1 to be read, and
#         thread 0 no longer waits for it before B2 (a chunk took 3.56 us with 128 blocks writing
#         40 KB each, 2.32 with 32): the h phase;
#   new = v1 + s41_fwd_o_256_quarters.patch (applied here): fwd_o by V quarters with h over k's
#         rows, 106 KB a block, two blocks per SM (main: 170 KB, one, loads then products): the o
#         phase.
# Neither changes a sum or its order: the K = 256 check lines of v1 and new should be bitwise
# base's. Every D = 128 / 64 kernel's SASS is unchanged by both (cubin .text).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=420}"
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s41_k256_two_h_stagings.patch src/cuda/chunk/chain_layout.cuh chain_h_stagings || exit 1
apply_prepared_patch docs/prepared/s41_fwd_o_256_quarters.patch src/cuda/chunk/fwd_o.cu kHOverK || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -3
SIDES=(base v1 new)
for side in "${SIDES[@]}"; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --only 256 >/tmp/c256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/c256_$side.log)"
done
for side in v1 new; do
  diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL)' /tmp/c256_$side.log) >/dev/null &&
    echo "$side K = 256 lines: bitwise base's" ||
    { echo "$side K = 256 lines differ:"; diff /tmp/c256_base.log /tmp/c256_$side.log | head -8 | cut -c1-160; }
done
for round in 1 2; do
  for c in 4x8k/d256 1x32k/d256 8x1k/d256 64x256/d256 tp4-1x32k/d256; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 120 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table v1/new
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -15
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
if [[ $(left) -gt 25 ]]; then
  timeout 25 compute-sanitizer --tool synccheck --error-exitcode 9 $new --only "fast bf16 256 g=0" >/tmp/sync.log 2>&1
  echo "synccheck 256 rc=$? $(grep 'ERROR SUMMARY' /tmp/sync.log | tail -1)"
fi
rm -f $OUT/build.log
echo "[$SECONDS s] done"
