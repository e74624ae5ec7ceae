#!/usr/bin/env bash
# Session 37, call 1 (~8 min; carry .deps .whl .peers): the split's cut on slowly decaying gates
# (device_s37a.sh's sweep, one profiled round and one plain round), then the SPEC's coverage rows
# (H = HV = 32; K = V = 64; K = V = 256) against fla and FlashQLA, never measured before.
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
bash scripts/device.sh build,pybuild > "$OUT/device_build.txt" 2>&1
BIN=build-device/tools/cuda_check/gdn_cuda_check
echo "[$SECONDS s] built: $(grep -E 'build:|pip' "$OUT/device_build.txt" | tr '\n' ' ')" | tee -a "$OUT/summary.txt"
for round in 1 2; do
  prof=
  [[ $round == 1 ]] && prof=--profile
  for c in model-1x32k g0-1x32k; do
    for v in "" /split2 /cut55 /cut60 /cut65 /cut71 /cut77 /cut83; do
      [[ $SECONDS -gt 330 ]] && break 3
      echo "$c$v $(timeout 30 $BIN --bench --no-check $prof --case "$c$v" 2>&1 | grep -E '^bench|phases' | tr '\n' ' ')" >> "$OUT/cut.log"
    done
  done
  for c in 1x32k 1x32k/split2 1x4k 1x4k/split2 4x8k/d64 1x32k/d64 8x1k/d64; do
    echo "$c $(timeout 30 $BIN --bench --no-check $prof --case "$c" 2>&1 | grep -E '^bench|phases' | tr '\n' ' ')" >> "$OUT/cut.log"
  done
done
python3 - "$OUT/cut.log" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys, collections
t = collections.defaultdict(list); h = {}
for line in open(sys.argv[1]):
    name = line.split()[0]
    m = re.search(r"T=\d+\s+([\d.]+) ms", line)
    if m: t[name].append(float(m.group(1)))
    m = re.search(r" h ([\d.]+)", line)
    if m: h[name] = float(m.group(1))
for name, v in t.items():
    print(f"{name:22s} {sum(v) / len(v):7.3f} ms  h {h.get(name, float('nan')):.3f}")
PY
echo "[$SECONDS s] cut sweep done" | tee -a "$OUT/summary.txt"
GDN_BENCH_ARGS="--no-decode --no-serving --cases 4x8k_K64,4x8k_noGVA,4x8k_K256" GDN_BENCH_BUDGET=150 \
  GDN_BENCH_TIMEOUT=$((560 - SECONDS)) bash scripts/device.sh bench > "$OUT/device_bench.txt" 2>&1
grep -E '^\{' "$OUT/bench.log" | python3 -c "
import json, sys
for l in sys.stdin:
    r = json.loads(l); print({k: r.get(k) for k in r if any(s in k for s in ('name', 'ms', 'err', 'ratio', 'note'))})
" | tee -a "$OUT/summary.txt"
echo "[$SECONDS s] done" | tee -a "$OUT/summary.txt"
