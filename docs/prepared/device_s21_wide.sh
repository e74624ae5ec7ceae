#!/usr/bin/env bash
# Session 21, device call 5: P's gates about each warp's first row on wide-span chunks (carry .ab .deps; base = the commit before).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="model-1x32k 1x32k 256x64" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -4 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | head -6 | cut -c1-100
B=build-device/tools/cuda_check/gdn_cuda_check
timeout 60 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL|x2|x10' $OUT/quick.log | head -12 | cut -c1-150
timeout 40 compute-sanitizer --tool memcheck --error-exitcode 9 $B --quick --only "gates x" > $OUT/extra.log 2>&1; echo "[$SECONDS s] memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/extra.log | tail -1)"
left=$((300 - SECONDS)); [[ $left -gt 20 ]] && (cd build-device && timeout $left ctest -R 'forward_gpu' --output-on-failure > $OUT/ctest.log 2>&1; echo "[$SECONDS s] ctest rc=$?"; grep -E 'tests passed|Failed|Passed|\*\*\*' $OUT/ctest.log | tail -4)
