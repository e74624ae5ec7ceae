#!/usr/bin/env bash
# Session 42's first call (prepared in session 41; ~6 min; carry .deps .ab; setup
# `scripts/ab_base.sh main main+docs/prepared/s41_k256_two_h_stagings.patch
#  main+docs/prepared/s41_fwd_o_256_quarters.patch`): K = V = 256's time on an H100 (session 41:
# 4x8k/d256 4.12 ms = prep 0.22 + h 1.82 + o 2.06), three prepared patches against main (base):
#   v1  = main + s41_k256_two_h_stagings.patch: the chain's h staging doubled, so that thread 0 no
#         longer waits before B2 for the bulk copy of h_c to be read (the h phase);
#   v2  = main + s41_fwd_o_256_quarters.patch: fwd_o by V quarters with h over k's rows, two
#         blocks per SM (the o phase);
#   new = main + s41_k256_oq.patch (applied here; it includes v2's fwd_o): the chain forms q h_c
#         itself (both K halves' partials summed through shared memory) and stores it, 16 KB fp32
#         a chunk and slice, instead of h_c (32 KB); fwd_o (by quarters) starts o from it and forms
#         only P v_new. h's 2.1 GB written and read on 4x8k go; q's one stage rides on the ring.
# v1 and v2 keep every sum and its order (their K = 256 lines should be bitwise base's); new sums
# q h over K in the chain's order (its lines: the same accuracy, not the same bits). Every D = 64 /
# 128 kernel's SASS is unchanged by all three (cubin .text).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=480}"
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s41_k256_oq.patch src/cuda/chunk/chain_layout.cuh q_one || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -3
SIDES=(base v1 v2 new)
for side in "${SIDES[@]}"; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --only 256 >/tmp/c256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/c256_$side.log)"
done
for side in v1 v2; do
  diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL)' /tmp/c256_$side.log) >/dev/null &&
    echo "$side K = 256 lines: bitwise base's" ||
    { echo "$side K = 256 lines differ:"; diff /tmp/c256_base.log /tmp/c256_$side.log | head -8 | cut -c1-160; }
done
paste -d'\n' <(grep -E '^(ok|FAIL) +(fast|exact)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL) +(fast|exact)' /tmp/c256_new.log) | cut -c1-150
for round in 1 2; do
  for c in 4x8k/d256 1x32k/d256 8x1k/d256 64x256/d256 tp4-1x32k/d256; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 130 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table v2/new
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -20
B=build-device/tests
for t in test_forward test_head_sizes; do
  timeout 60 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*' >/tmp/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/$t.log | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure' /tmp/$t.log | head -4
done
new=$(bin_of new)
for tool in racecheck memcheck synccheck; do
  [[ $(left) -gt 30 ]] || break
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $new --only "fast bf16 256,fast fp16 256" >/tmp/san.log 2>&1
  echo "$tool 256 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done
rm -f $OUT/build.log
echo "[$SECONDS s] done"
