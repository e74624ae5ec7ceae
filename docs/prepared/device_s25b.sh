#!/usr/bin/env bash
# Session 25, device call 2 (prepared in session 24): the fused chain's synchronization changes, on what call 1
# (device_s25.sh) landed, in three steps. Here first, on main after call 1 (commit call 1's quick.log as
# bench/results/h200_s25_call1_quick.log: it is this call's reference; else base's quick runs here too):
#   M=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_b1_split.patch;        A=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_o_scale_folded.patch;  B=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_producer.patch
#   scripts/ab_base.sh $M $A $B
# then run with carry .ab .deps as `bash docs/prepared/device_s25b.sh <commit>` (~9 min). Sides: base = call 1's
# result, v1 = + the B1 split, v2 = + o's scale folded into q's row factors, new = + the producer warpgroup.
#  v1: B1 the chain warpgroup's own barrier (the o warpgroup only waits on it), a third mbarrier F (the o warpgroup's
#      "done with chunk c - 1") guarding the v staging; the chain waited 15.5% of its samples at B1. Same arithmetic.
#  v2: o's scale in rq_i: 32 FMUL per thread and chunk fewer in the o warpgroup. Rounding moves: errors compared.
#  new: a producer warpgroup (384 threads, setmaxnreg 232 / 232 / 40) fills the ring (full / empty mbarriers per
#      stage, cp.async.mbarrier.arrive.noinc); the chain warpgroup loses its prefetch stretch (285 instructions per
#      chunk, 28% of its samples). Same arithmetic as v2.
# A barrier mistake hangs: every side is smoke-run first (3 cases, 20 s each) and only the sides that pass are timed.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1  # builds this tree and .ab's revisions (no timing)
cat $OUT/summary.txt 2>/dev/null | cut -c1-200
declare -A BIN=([base]=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check [v1]=/tmp/ab-v1/build/tools/cuda_check/gdn_cuda_check
  [v2]=/tmp/ab-v2/build/tools/cuda_check/gdn_cuda_check [new]=build-device/tools/cuda_check/gdn_cuda_check)
OK=()
for side in base v1 v2 new; do
  good=1
  for c in 1x3k 8x1k 1x32k; do
    timeout 20 ${BIN[$side]} --bench --no-check --case $c > /tmp/smoke_$side.log 2>&1 || { good=0; break; }
  done
  if [[ $good == 1 ]]; then OK+=($side); else echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 /tmp/smoke_$side.log; fi
done
echo "[$SECONDS s] smoke passed: ${OK[*]}"
for round in 1 2; do for c in 1x32k 4x8k 8x1k tp4-1x32k g0-1x32k; do for side in "${OK[@]}"; do
  echo "$side $c $(timeout 30 ${BIN[$side]} --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >> $OUT/ab.log
done; done; done
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
print(f"{'case':10s}" + "".join(f" {s:>8s}" for s in sides) + "".join(f" {'base/' + s:>9s}" for s in sides[1:]))
for c in cases:
    ms = {s: sum(t[(c, s)]) / len(t[(c, s)]) for s in sides if t[(c, s)]}
    print(f"{c:10s}" + "".join(f" {ms.get(s, 0):8.3f}" for s in sides) +
          "".join(f" {ms['base'] / ms[s]:9.3f}" if 'base' in ms and s in ms else f" {'-':>9s}" for s in sides[1:]))
PY
REF=bench/results/h200_s25_call1_quick.log
[[ -f $REF ]] || { timeout 60 ${BIN[base]} --quick > /tmp/q_base.log 2>&1; REF=/tmp/q_base.log; }
for side in "${OK[@]}"; do
  [[ $side == base ]] && continue
  timeout 60 ${BIN[$side]} --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL' /tmp/q_$side.log) FAIL, $(diff <(grep -E '^(ok|FAIL)' $REF) <(grep -E '^(ok|FAIL)' /tmp/q_$side.log) | grep -c '^[<>]') lines differ from base (v1: 0 expected), largest bf16 err_o $(grep -E '^ok +fast bf16' /tmp/q_$side.log | grep -oE 'err_o=[0-9.e+-]+' | sort -t= -k2 -g | tail -1)"
done
[[ -f /tmp/q_v2.log && -f /tmp/q_new.log ]] && echo "quick v2 vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_v2.log) <(grep -E '^(ok|FAIL)' /tmp/q_new.log) | grep -c '^[<>]') lines differ (0 expected)"
for f in /tmp/q_*.log; do echo "== $f"; cat $f; done > $OUT/quick_all.log 2>/dev/null  # (8 files come back at most)
LAST=${OK[${#OK[@]}-1]}
for spec in "synccheck:fast" "racecheck:fast bf16 128" "memcheck:fast"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 ${BIN[$LAST]} --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool ($LAST) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
