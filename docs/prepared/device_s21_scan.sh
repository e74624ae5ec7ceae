#!/usr/bin/env bash
# Session 21, device call 1 (prepared in session 20): the scan in slices of 8 / 16 / 32 columns
# (docs/prepared/s21_scan_cols.patch). Here first: `git apply docs/prepared/s21_scan_cols.patch`, commit on main,
# `scripts/ab_base.sh <main before>`; run with carry .ab .deps as `bash docs/prepared/device_s21_scan.sh <commit>`.
# A/B on the split TP cases; the quick check of base and new diffed (the same fma order and case list: expect 0
# differing lines); sanitizers on the split cases; the forward, checkpoint and heuristics suites; ncu durations.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="tp8-1x32k tp4-1x32k tp4-1x128k" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -4 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | head -6
B=build-device/tools/cuda_check/gdn_cuda_check
BB=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
timeout 100 $BB --quick > /tmp/quick_base.log 2>&1
diff <(grep -E '^(ok|FAIL)' /tmp/quick_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) > $OUT/extra.log; echo "[$SECONDS s] quick diff base/new: $(grep -c '^[<>]' $OUT/extra.log) lines (expect 0)"; head -6 $OUT/extra.log
for tool in memcheck racecheck synccheck; do
  left=$((300 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "split" >> $OUT/extra.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/extra.log | tail -1)"
done
left=$((430 - SECONDS)); [[ $left -gt 20 ]] && (cd build-device && timeout $left ctest -L 'gpu|cpu' -R 'forward_gpu|checkpoints_gpu|heuristics' --output-on-failure > $OUT/ctest.log 2>&1; echo "[$SECONDS s] ctest rc=$?"; grep -E 'tests passed|Failed|Passed|\*\*\*' $OUT/ctest.log | tail -8)
for c in tp8-1x32k tp4-1x32k; do
  [[ $SECONDS -gt 540 ]] && break
  timeout 40 ncu --clock-control none -k regex:'kkt_solve|fwd_h|split_scan' -c 4 --section SpeedOfLight $B --bench --no-check --case $c 2>&1 |
    grep -E '^\s+[a-z_ ]*(void|unnamed)|    Duration' | sed 's/(FastBufs.*) (/ (/; s/Context.*//' | tee -a $OUT/ncu.txt
done
