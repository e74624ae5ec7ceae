#!/usr/bin/env bash
# Session 37, call 2 (~8 min; carry .deps .whl): K = V = 64 on the fused wgmma chain. Builds, the
# quick set (every correctness case, the new D = 64 split / serial / g = 0 ones), the D = 64 and a
# few D = 128 timings (check tool, profiled), racecheck / synccheck / memcheck of the D = 64 cases,
# ctest -L gpu, then fla's K = 64 rows in bench_gpu.py (FlashQLA fails there: --no-flashqla).
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
bash scripts/device.sh build,pybuild > "$OUT/device_build.txt" 2>&1
echo "[$SECONDS s] $(grep -E 'build:|pip' "$OUT/device_build.txt" | tr '\n' ' ')" | tee -a "$S"
BIN=build-device/tools/cuda_check/gdn_cuda_check
timeout 170 $BIN --quick > "$OUT/quick.log" 2>&1
echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' "$OUT/quick.log") $(grep -cE '^FAIL' "$OUT/quick.log") FAIL" | tee -a "$S"
grep -E '^FAIL' "$OUT/quick.log" | head -8 | tee -a "$S"
grep -E ' 64 ' "$OUT/quick.log" | head -30 >> "$S"
for c in 1x32k/d64 4x8k/d64 8x1k/d64 1x4k/d64 64x256/d64 256x64/d64 mixed/d64 tp4-1x32k/d64 1x32k 4x8k; do
  echo "$c $(timeout 30 $BIN --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench|phases' | tr '\n' ' ')" | tee -a "$OUT/d64.log"
done
echo "[$SECONDS s] timings done" | tee -a "$S"
cat "$OUT/d64.log" >> "$S"
for tool in racecheck synccheck memcheck; do
  timeout 80 compute-sanitizer --tool $tool --error-exitcode 9 $BIN --quick --only "fast bf16 64 split,fast fp16 64" \
    > "$OUT/san_$tool.log" 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/san_$tool.log" | tail -1)" | tee -a "$S"
done
cat "$OUT"/san_*.log > "$OUT/sanitize.log" && rm -f "$OUT"/san_*.log
bash scripts/device.sh test > "$OUT/device_test.txt" 2>&1
echo "[$SECONDS s] $(grep -E 'ctest' "$OUT/device_test.txt" | tail -1)" | tee -a "$S"
GDN_BENCH_ARGS="--no-decode --no-serving --no-flashqla --cases 4x8k_K64,1x32k_K64,8x1k_K64,256x64_K64" \
  GDN_BENCH_BUDGET=120 GDN_BENCH_TIMEOUT=$((585 - SECONDS)) bash scripts/device.sh bench > "$OUT/device_bench.txt" 2>&1
grep -E '^\{' "$OUT/bench.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['name'], 'gdn', round(r['gdn_ms'], 3), 'fla', r.get('fla_ms') and round(r['fla_ms'], 3),
        'err', r.get('gdn_err'), r.get('fla_err'), r.get('fla_note', ''))
" | tee -a "$S"
echo "[$SECONDS s] done" | tee -a "$S"
