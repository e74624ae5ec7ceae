#!/usr/bin/env bash
# Session 38, call 1 (prepared in session 37; ~9 min; carry .deps .whl .peers): pytest on the GPU at
# the landed tree (session 37 ran it before the D = 64 k-step change), then the coverage row session
# 37 could not reach: 4x8k_K256 against fla (the exact stages at K = 256; fla's Triton autotune
# takes minutes there, hence the long budget), and the K = 64 rows at the landed commit.
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
S="$OUT/summary.txt"
GDN_PYTEST_TIMEOUT=300 bash scripts/device.sh build,pybuild,pytest > "$OUT/device_pytest.txt" 2>&1
grep -E 'build:|pip|pytest' "$OUT/device_pytest.txt" | tail -3 | tee -a "$S"
GDN_BENCH_ARGS="--no-decode --no-serving --no-flashqla --cases 4x8k_K256,4x8k_K64,1x32k_K64" \
  GDN_BENCH_BUDGET=200 GDN_BENCH_TIMEOUT=$((590 - SECONDS)) bash scripts/device.sh bench > "$OUT/device_bench.txt" 2>&1
grep -E '^\{' "$OUT/bench.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print(r['name'], 'gdn', r.get('gdn_ms'), 'fla', r.get('fla_ms'), 'err', r.get('gdn_err'),
        r.get('fla_err'), r.get('fla_note', ''))
" | tee -a "$S"
rm -f "$OUT/build.log"  # (at most 8 files come back)
echo "[$SECONDS s] done" | tee -a "$S"
