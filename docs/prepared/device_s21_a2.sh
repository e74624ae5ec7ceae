#!/usr/bin/env bash
# Session 21, device call 3: the precise threshold e^-2 (s21_precise_a2.patch, committed) against e^-32 (carry .ab .deps;
# scripts/ab_base.sh <before>): times with phases, gdn's errors from the Python bench on the same cases, ncu durations.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="model-1x32k g0-1x32k 1x32k" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -4 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | head -6 | cut -c1-100
B=build-device/tools/cuda_check/gdn_cuda_check
timeout 60 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 120 python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/pybuild.log 2>&1; echo "[$SECONDS s] pip rc=$?"
timeout $((400 - SECONDS)) python3 bench/bench_gpu.py --cases model-1x32k,g0-1x32k,1x32k --no-decode --no-serving --no-fla --no-flashqla --json $OUT/a2.json > $OUT/bench.log 2>&1
echo "[$SECONDS s] bench rc=$?"; grep -E 'x32k' $OUT/bench.log | cut -c1-200
for c in model-1x32k 1x32k; do
  [[ $SECONDS -gt 440 ]] && break
  timeout 40 ncu --clock-control none -k regex:'chunk_' -c 6 --section SpeedOfLight $B --bench --no-check --case $c 2>&1 |
    grep -E '^\s+[a-z_ ]*(void|unnamed)|    Duration' | sed 's/(FastBufs.*) (/ (/; s/Context.*//' | head -16 | tee -a $OUT/ncu.txt
done
