#!/usr/bin/env bash
# session 20 device call 3 (prepared in session 19): the adaptive precision patch (docs/prepared/s20_precision.patch,
# after l1's two patches landed; `git apply` it, commit, `scripts/ab_base.sh <the commit before>`; carry .ab .deps).
# Quick check (its new case "fast bf16 128 g=0 long" must pass at tol 2.4e-3), A/B (bench gates: expect ~1.0;
# g0-1x32k: the precise path's cost), the g=0 rows, sanitizers on the fused chain, ctest.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k g0-1x32k 4x8k 8x1k tp4-1x32k" scripts/device.sh build,test,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
grep -E 'Failed|tests passed' $OUT/ctest.log 2>/dev/null | tail -6
tail -7 $OUT/ab.log
B=build-device/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
grep -E 'g=0|gates x' $OUT/quick.log | head -16
for spec in "memcheck:g=0 long,fast bf16 128" "racecheck:g=0 long" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((540 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" >> $OUT/extra.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/extra.log | tail -1)"
done
