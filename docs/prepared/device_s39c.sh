#!/usr/bin/env bash
# Session 40, call 2 (prepared in session 38; pytest runs in device.sh's pytest step; ~5 min;
# carry .deps .whl .peers): the cost of a 16 KB DSMEM exchange in a cluster pair
# (gdn_cuda_check --dsmem: the K = 256 design's question), and the coverage rows against fla 0.6
# and FlashQLA (4x8k_K256 and the K = 64 rows: the H200's first K = 256 numbers for h200.json;
# merge with scripts/merge_bench.py).
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
bash scripts/device.sh build,pybuild > "$OUT/device_build.txt" 2>&1
grep -E 'build:|pip' "$OUT/device_build.txt" | tail -2 | tee -a "$S"
timeout 60 build-device/tools/cuda_check/gdn_cuda_check --dsmem 2>&1 | tee -a "$S"
GDN_BENCH_ARGS="--no-decode --no-serving --cases 4x8k_K256,4x8k_K64,1x32k_K64,8x1k_K64" \
  GDN_BENCH_BUDGET=200 GDN_BENCH_TIMEOUT=$((590 - SECONDS)) bash scripts/device.sh bench > "$OUT/device_bench.txt" 2>&1
grep -E '^\{' "$OUT/bench.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['name'], 'gdn', r.get('gdn_ms'), 'fla', r.get('fla_ms'), 'qla', r.get('flashqla_ms'),
        'err', r.get('gdn_err'), r.get('fla_err'), r.get('fla_note', ''))
" | tee -a "$S"
rm -f "$OUT/build.log"  # (at most 8 files come back)
echo "[$SECONDS s] done" | tee -a "$S"
