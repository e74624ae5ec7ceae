#!/usr/bin/env bash
# Session 21, device call 1 (prepared in session 20): both prepared patches in one call. Here first, on main:
#   git apply docs/prepared/s21_scan_cols.patch && git commit -qam "..." &&
#   git apply docs/prepared/s21_kkt_two_heads.patch && git commit -qam "..." &&
#   scripts/ab_base.sh <main before both>
# then run with carry .ab .deps as `bash docs/prepared/device_s21.sh <commit>`. Phases separate them: prep = kkt_solve
# (two value heads per block), h = the split's summary + scan + chain (the scan's column slices). Both keep every
# output bit (same products in the same order; the case list unchanged): the quick check of base and new must match
# line for line. If prep is slower, revert the kkt commit alone (the scan is independent of it).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="tp8-1x32k tp4-1x32k tp4-1x128k 1x32k 4x8k 8x1k 256x64" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | head -14 | cut -c1-100
B=build-device/tools/cuda_check/gdn_cuda_check
BB=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
timeout 100 $BB --quick > /tmp/quick_base.log 2>&1
diff <(grep -E '^(ok|FAIL)' /tmp/quick_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) > $OUT/extra.log; echo "[$SECONDS s] quick diff base/new: $(grep -c '^[<>]' $OUT/extra.log) lines (expect 0)"; head -6 $OUT/extra.log
for spec in "memcheck:split,fast bf16 128" "racecheck:split,fast bf16 128 kmajor" "synccheck:split,fast bf16 128 kmajor"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((380 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" >> $OUT/extra.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/extra.log | tail -1)"
done
left=$((500 - SECONDS)); [[ $left -gt 20 ]] && (cd build-device && timeout $left ctest -R 'forward_gpu|checkpoints_gpu|stages_gpu|heuristics' --output-on-failure > $OUT/ctest.log 2>&1; echo "[$SECONDS s] ctest rc=$?"; grep -E 'tests passed|Failed|Passed|\*\*\*' $OUT/ctest.log | tail -8)
for c in tp8-1x32k 1x32k; do
  [[ $SECONDS -gt 560 ]] && break
  timeout 30 ncu --clock-control none -k regex:'kkt_solve|split_scan' -c 2 --section SpeedOfLight --section Occupancy $B --bench --no-check --case $c 2>&1 |
    grep -E '^\s+[a-z_ ]*(void|unnamed)|    Duration|Achieved Occupancy' | sed 's/(FastBufs.*) (/ (/; s/Context.*//' | tee -a $OUT/ncu.txt
done
