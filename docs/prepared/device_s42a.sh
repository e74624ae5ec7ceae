#!/usr/bin/env bash
# Session 42 (~5 min; carry .deps .ab; setup `scripts/ab_base.sh main`): fwd_o at K = V = 256 with
# h streamed through k's rows in four 64-row pieces, two in flight (103 KB a block, two blocks per
# SM) against main's whole h (170 KB, one block per SM: 4x8k/d256's o phase 2.03 ms, ~55% of the
# memory's rate). The k-steps keep their order: the K = 256 lines should be bitwise main's.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=420}"
source docs/prepared/ab_lib.sh
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -2
SIDES=(base new)
for side in "${SIDES[@]}"; do
  timeout 60 "$(bin_of $side)" --only 256 >/tmp/c256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/c256_$side.log)"
done
diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL)' /tmp/c256_new.log) >/dev/null &&
  echo "new K = 256 lines: bitwise base's" ||
  { echo "new K = 256 lines differ:"; diff /tmp/c256_base.log /tmp/c256_new.log | head -8 | cut -c1-160; }
grep -E '^FAIL' /tmp/c256_new.log | head -4 | cut -c1-160
B=build-device/tests
for t in test_forward test_head_sizes; do
  timeout 90 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*' >/tmp/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' /tmp/$t.log | tr '\n' ' ' | cut -c1-120)"
  grep -E '^\[  FAILED  \] CUDA' /tmp/$t.log | head -4 | cut -c1-140
done
for round in 1 2; do
  for c in 4x8k/d256 1x32k/d256 8x1k/d256 64x256/d256 tp4-1x32k/d256; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 100 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -10
new=$(bin_of new)
for tool in racecheck memcheck synccheck; do
  [[ $(left) -gt 30 ]] || break
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 $new --only "fast bf16 256,fast fp16 256" >/tmp/san.log 2>&1
  echo "$tool 256 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
done
rm -f $OUT/build.log
echo "[$SECONDS s] done"
