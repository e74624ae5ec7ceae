#!/usr/bin/env bash
# Session 27, an optional call (prepared in session 26, ~7 min): two timing experiments that decide whether a P
# shared by a head's two slice blocks (docs/perf.md, "Next steps 0": the slice pair's P over DSMEM) is worth building.
# Here first, on main (after or instead of device_s27.sh's call; the s27 patches as it applies them):
#   git checkout -b s27b
#   git am -3 -q docs/prepared/s27_a_upper_skip.patch docs/prepared/s27_rq_chain.patch; V2=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_st2.patch;                                          ST2=$(git rev-parse --short HEAD)
#   git checkout -q -b s27c $V2
#   git am -3 -q docs/prepared/s27_rq_shadow.patch;                                      NEW=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_solp.patch;                                         SOLP=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_nop.patch
#   scripts/ab_base.sh $V2 $ST2 $NEW $SOLP
# then with carry .ab .deps: `bash docs/prepared/device_s27b.sh <commit>`. Sides:
#  base (v2 of device_s27.sh: q's norms before B1), v1 = st2: the same on a 2-stage ring (165 KiB instead of 221:
#  the room a shared P's buffers need; a real variant, checked: its quick lines must equal base's), v2 = new of
#  device_s27.sh (q's norms in the -U^T shadow), v3 = solP: v2 with the o warpgroup's P gating and hi / lo split on
#  even chunks only (odd chunks reuse the last P: o WRONG, timing only), the ALU half a shared P saves; this tree =
#  noP: the same on chunk 0 only, the most any P optimization (a shared P, a P warpgroup of a 128-column design) can
#  save in the o warpgroup. Read: solP against v2 is the most a shared P can gain (before its exchange's cost); st2
#  against base is what its smem costs. Build the shared P only if solP - st2's loss is worth it (> ~5%).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-200
SIDES=(base v1 v2 v3 new)
declare -A BIN=([base]=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check [v1]=/tmp/ab-v1/build/tools/cuda_check/gdn_cuda_check
  [v2]=/tmp/ab-v2/build/tools/cuda_check/gdn_cuda_check [v3]=/tmp/ab-v3/build/tools/cuda_check/gdn_cuda_check
  [new]=build-device/tools/cuda_check/gdn_cuda_check)
OK=()
for side in "${SIDES[@]}"; do
  good=1
  for c in 8x1k 1x32k; do
    timeout 20 ${BIN[$side]} --bench --no-check --case $c > /tmp/smoke_$side.log 2>&1 || { good=0; break; }
  done
  if [[ $good == 1 ]]; then OK+=($side); else echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 /tmp/smoke_$side.log; fi
done
echo "[$SECONDS s] smoke passed: ${OK[*]}"
for round in 1 2; do
  for c in 1x32k 4x8k 8x1k 64x256 tp4-1x32k; do for side in "${OK[@]}"; do
    [[ $SECONDS -gt 430 ]] && break 3
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
print(f"{'case':13s}" + "".join(f" {s:>8s}" for s in sides) + "  st2/base  solP/v2   noP/v2")
for c in cases:
    ms = {s: sum(t[(c, s)]) / len(t[(c, s)]) for s in sides if t[(c, s)]}
    r = lambda a, b: f"{ms[a] / ms[b]:9.3f}" if a in ms and b in ms else f"{'-':>9s}"
    print(f"{c:13s}" + "".join(f" {ms.get(s, 0):8.3f}" for s in sides) + " " + r('v1', 'base') + r('v3', 'v2') + r('new', 'v2'))
PY
if [[ " ${OK[*]} " == *" base "* && " ${OK[*]} " == *" v1 "* ]]; then
  timeout 90 ${BIN[base]} --quick --only fast,ckpt,prefill > /tmp/q_base.log 2>&1
  timeout 90 ${BIN[v1]} --quick --only fast,ckpt,prefill > /tmp/q_v1.log 2>&1
  echo "[$SECONDS s] quick st2: $(grep -c '^FAIL' /tmp/q_v1.log) FAIL, $(diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' /tmp/q_v1.log) | grep -c '^[<>]') of $(grep -cE '^(ok|FAIL)' /tmp/q_base.log) lines differ from base's (0 expected)" | tee -a $OUT/summary.txt
  left=$((580 - SECONDS))
  [[ $left -gt 20 ]] && timeout $left compute-sanitizer --tool synccheck --error-exitcode 9 ${BIN[v1]} --quick --only fused > /tmp/san.log 2>&1
  echo "[$SECONDS s] st2 synccheck rc=$? $(grep -E 'ERROR SUMMARY' /tmp/san.log | tail -1)" | tee -a $OUT/summary.txt
fi
