#!/usr/bin/env bash
# Session 37, call 1 (prepared in session 36, ~4 min; carry .deps): where part 0 of a two-part split
# should end when the history before the middle matters (g = 0, a model's slowly decaying heads).
# heuristics.h's choose_split cuts one sequence's chunks at a = 0.71 n (r_f ~2.2 us per chunk for
# the fused chain, r_s ~1.3 for the summary pass, sessions 18-19), and part 1 starts after the
# summary pass over part 0; where the history is negligible (the bench's gates) the device cuts at
# the middle instead (even_first_chunks) and this choice does not matter. Session 36: model-1x32k's
# h 0.858 ms against 1x32k's 0.510 (363 chunks against 256, and the lo passes). The check tool's
# NAME/cutNN rows take part 0 at NN% (one binary, no rebuild per cut); NAME/split2 (equal parts,
# no device cut) gives r_s + r_f per chunk: h(split2) = (n / 2)(r_s + r_f), h(default) = 0.71 n r_f
# when balanced. What to look for: the cut with the least total on model-1x32k and g0-1x32k (the
# optimum a = n r_f / (2 r_f - r_s)); if it is not 71 and both cases agree, change choose_split's
# 71 (a one-line change; 1x32k and the other bench-gate rows must stay level: they take the even
# cut), then the suites as usual.
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
bash scripts/device.sh build > /dev/null 2>&1
BIN=build-device/tools/cuda_check/gdn_cuda_check
echo "[$SECONDS s] built" | tee -a "$OUT/summary.txt"
for round in 1 2; do
  prof=
  [[ $round == 1 ]] && prof=--profile
  for c in model-1x32k g0-1x32k; do
    for v in "" /split2 /cut55 /cut60 /cut65 /cut71 /cut77 /cut83; do
      [[ $SECONDS -gt 400 ]] && break 3
      echo "$c$v $(timeout 30 $BIN --bench --no-check $prof --case "$c$v" 2>&1 | grep -E '^bench|phases' | tr '\n' ' ')" >> "$OUT/cut.log"
    done
  done
  for c in 1x32k 1x32k/split2 1x32k/cut60 1x4k 1x4k/split2; do
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
