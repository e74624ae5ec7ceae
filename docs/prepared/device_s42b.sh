#!/usr/bin/env bash
# Session 42, call 4 (~8 min; carry .deps .whl .peers): pytest (cuda) on the landed tree (fwd_o's
# streamed h at K = 256), and the K = 256 / 64 coverage rows and two D = 128 rows against fla 0.6
# and FlashQLA in one run (bench_gpu.py's JSON as h200.json, whichever card: its device field).
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
GDN_PYTEST_TIMEOUT=200 bash scripts/device.sh build,pybuild,pytest >"$OUT/device_build.txt" 2>&1
grep -E 'build:|pip|pytest' "$OUT/device_build.txt" | tail -3 | tee -a "$S"
GDN_BENCH_ARGS="--no-decode --no-serving --cases 4x8k_K256,4x8k_K64,4x8k,1x32k" \
  GDN_BENCH_BUDGET=200 GDN_BENCH_TIMEOUT=$((570 - SECONDS)) bash scripts/device.sh bench >"$OUT/device_bench.txt" 2>&1
grep -E '^\{' "$OUT/bench.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['name'], 'gdn', r.get('gdn_ms'), 'fla', r.get('fla_ms'), 'qla', r.get('flashqla_ms'),
        'err', r.get('gdn_err'), r.get('fla_err'), r.get('fla_note', ''))
" | tee -a "$S"
rm -f "$OUT/build.log"  # (at most 8 files come back)
echo "[$SECONDS s] done" | tee -a "$S"
