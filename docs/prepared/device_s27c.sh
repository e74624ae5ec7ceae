#!/usr/bin/env bash
# Session 27, the accuracy call (prepared in session 26, ~5 min): the extra precision on the chunks that resets leave
# without it (s27_precise_resets.patch). Here first, on main (before or after the s27 perf patches land):
#   M=$(git rev-parse --short HEAD); git checkout -b s27p
#   git am -3 -q docs/prepared/s27_precise_resets.patch
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s27c.sh <commit>`.
# The quick check's "fast bf16 128 g=0" (g = 0 with the extremes: a reset g = -1e4 every 89 tokens, beta 0 / 2) was
# 2.69e-3 against issue 11's 2.4e-3: the chunks with a reset decay by exp(G_last) = 0 and took no extra precision,
# though the state the tokens after the reset build lasts as at g = 0, and the rows before it read the whole state.
# The patch (chain_precise.cuh): vs and h_lo where exp(G_last) > e^-32 or the last quarter's exp(G_last - G_{3n/4})
# > e^-4; W and q h_lo also where the chunk before was such a chunk and exp(G_0) > e^-32. The model
# (tools/precision/emulate_roundings.py --gates zero+resets --adaptive 32 --rule tail --set W=hilo,vs=hilo,h_o=hilo):
# 2.73e-3 -> 2.21e-3, x0.1+resets 2.61e-3 -> 2.36e-3; the bench's gates take no more chunks (their last 16 tokens
# decay by ~e^-13). The case is now held to 2.4e-3 (and its fused copy). Registers: fused bf16 236 -> 247 (no spills;
# 255 on the three s27 perf patches with the shadow placement, 248 with the chain placement). Timing: the bench's
# cases should not move (no more precise chunks), unless the registers cost: read 1x32k, 4x8k, model-1x32k.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-200
declare -A BIN=([base]=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check [new]=build-device/tools/cuda_check/gdn_cuda_check)
OK=()
for side in base new; do
  good=1
  for c in 8x1k 1x32k g0-1x32k; do
    timeout 20 ${BIN[$side]} --bench --no-check --case $c > /tmp/smoke_$side.log 2>&1 || { good=0; break; }
  done
  if [[ $good == 1 ]]; then OK+=($side); else echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 /tmp/smoke_$side.log; fi
done
echo "[$SECONDS s] smoke passed: ${OK[*]}"
for round in 1 2; do
  for c in 1x32k 4x8k model-1x32k g0-1x32k 8x1k; do for side in "${OK[@]}"; do
    [[ $SECONDS -gt 330 ]] && break 3
    echo "$side $c $(timeout 30 ${BIN[$side]} --bench --no-check --case $c 2>&1 | grep -E '^bench ' | tr '\n' ' ')" >> $OUT/ab.log
  done; done
done
python3 - $OUT/ab.log <<'PY' | tee -a $OUT/summary.txt
import re, sys, collections
t = collections.defaultdict(list); sides = []; cases = []
for line in open(sys.argv[1]):
    w = line.split()
    m = re.search(r"bench \S+\s+T=\d+\s+([\d.]+) ms", line)
    if len(w) > 1 and m:
        t[(w[1], w[0])].append(float(m.group(1)))
        if w[0] not in sides: sides.append(w[0])
        if w[1] not in cases: cases.append(w[1])
print(f"{'case':13s}" + "".join(f" {s:>8s}" for s in sides) + "  base/new")
for c in cases:
    ms = {s: sum(t[(c, s)]) / len(t[(c, s)]) for s in sides if t[(c, s)]}
    print(f"{c:13s}" + "".join(f" {ms.get(s, 0):8.3f}" for s in sides) +
          (f" {ms['base'] / ms['new']:9.3f}" if 'base' in ms and 'new' in ms else ""))
PY
for side in base new; do [[ " ${OK[*]} " == *" $side "* ]] && timeout 100 ${BIN[$side]} --quick > /tmp/q_$side.log 2>&1; done
python3 - /tmp/q_base.log /tmp/q_new.log <<'PY' | tee -a $OUT/summary.txt
import re, sys
def read(f):
    d = {}
    try:
        for line in open(f):
            m = re.match(r"(ok|FAIL)\s+(.*?)\s+T=.*?err_o=([\d.e+-]+)", line)
            if m: d[m.group(2)] = (m.group(1), float(m.group(3)))
    except OSError:
        pass
    return d
b, n = read(sys.argv[1]), read(sys.argv[2])
print(f"quick: base {sum(v[0] == 'FAIL' for v in b.values())} FAIL, new {sum(v[0] == 'FAIL' for v in n.values())} FAIL; lines whose err_o moved:")
for k in n:
    if k in b and b[k][1] != n[k][1]:
        print(f"  {k:40s} {b[k][0]} {b[k][1]:.3e} -> {n[k][0]} {n[k][1]:.3e}")
PY
{ echo "== base"; cat /tmp/q_base.log; echo "== new"; cat /tmp/q_new.log; } > $OUT/quick_all.log 2>/dev/null
left=$((580 - SECONDS))
if [[ $left -gt 20 && " ${OK[*]} " == *" new "* ]]; then
  timeout $left compute-sanitizer --tool synccheck --error-exitcode 9 ${BIN[new]} --quick --only "g=0" > /tmp/san.log 2>&1
  echo "[$SECONDS s] new synccheck (g=0 cases) rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san.log | tail -1)" | tee -a $OUT/summary.txt
fi
