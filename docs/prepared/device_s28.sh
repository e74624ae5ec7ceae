#!/usr/bin/env bash
# The chain's chunk body in two copies (prepared in session 26, ~5 min): s28_precise_body.patch on main as it is, or
# s28_precise_body_on_resets.patch once s27_precise_resets.patch has landed (the first applies on main, on
# s27_a_upper_skip and on s27_rq_chain; the second on s27_precise_resets with or without those two; neither on
# s27_rq_shadow, whose q norms sit inside the body: move its q_norms(c + 1, ...) call into chain_chunk_body.inc,
# after the -U^T commit, and regenerate). Here first:
#   M=$(git rev-parse --short HEAD); git checkout -b s28
#   git am -3 -q docs/prepared/s28_precise_body.patch        (or s28_precise_body_on_resets.patch)
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s28.sh <commit>`.
# What it changes: the loop body from B1 to the chunk's end moves into chain_chunk_body.inc, included twice (a lambda
# made ptxas serialize every wgmma, C7511; textual copies do not: docs/perf.md, session 26). A weakly decaying chunk
# runs the copy with `constexpr bool precise = true`: W's lo pass in the v_new group and vs's in the update's, two
# wgmma waits fewer (each ~100-200 cycles of a ~5000-cycle precise chunk); an ordinary chunk runs the copy without
# their code or registers (the adaptive precision cost 1.6% of the ordinary chunks in session 20). Registers (bf16):
# fused 236 -> 232, store 238 -> 219, summary 225 -> 207 (on the resets patch: fused 247 -> 234). Predicted:
# g0-1x32k and model-1x32k (their slowest heads precise on every chunk) -3 to -6%, 1x32k / 4x8k 0 to -1.5%. The
# same accumulation order (each lo pass after its hi passes in the same accumulators): quick lines bitwise equal
# (on the resets patch, chunks that needed only W's lo part now take vs's too: those lines may move, all ok).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-200
declare -A BIN=([base]=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check [new]=build-device/tools/cuda_check/gdn_cuda_check)
OK=()
for side in base new; do
  good=1
  for c in 8x1k g0-1x32k 256x64; do
    timeout 20 ${BIN[$side]} --bench --no-check --case $c > /tmp/smoke_$side.log 2>&1 || { good=0; break; }
  done
  if [[ $good == 1 ]]; then OK+=($side); else echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 /tmp/smoke_$side.log; fi
done
echo "[$SECONDS s] smoke passed: ${OK[*]}"
for round in 1 2; do
  for c in g0-1x32k model-1x32k 1x32k 4x8k 8x1k 256x64; do for side in "${OK[@]}"; do
    [[ $SECONDS -gt 360 ]] && break 3
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
echo "[$SECONDS s] quick: base $(grep -c '^FAIL' /tmp/q_base.log) FAIL, new $(grep -c '^FAIL' /tmp/q_new.log) FAIL, $(diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' /tmp/q_new.log) | grep -c '^[<>]') lines differ (0 expected without the resets patch)" | tee -a $OUT/summary.txt
diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' /tmp/q_new.log) | head -20 | tee -a $OUT/summary.txt
{ echo "== base"; cat /tmp/q_base.log; echo "== new"; cat /tmp/q_new.log; } > $OUT/quick_all.log 2>/dev/null
left=$((580 - SECONDS))
if [[ $left -gt 20 && " ${OK[*]} " == *" new "* ]]; then
  timeout $left compute-sanitizer --tool synccheck --error-exitcode 9 ${BIN[new]} --quick --only "g=0" > /tmp/san.log 2>&1
  echo "[$SECONDS s] new synccheck (g=0 cases) rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san.log | tail -1)" | tee -a $OUT/summary.txt
fi
