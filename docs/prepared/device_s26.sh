#!/usr/bin/env bash
# Session 26, device call 1 (prepared in session 25): q's norms from prep (s26_rq_in_prep.patch), kkt_solve's
# diagonal inverse over 32 lanes (s26_kkt_inverse_warp.patch) and the fused chain as a stream (s26_fused_stream.patch),
# in one call (~9 min). Here first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s26
#   git am -3 -q docs/prepared/s26_rq_in_prep.patch
#   git am -3 -q docs/prepared/s26_kkt_inverse_warp.patch;   A=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s26_fused_stream.patch
#   scripts/ab_base.sh $M $A
# then run with carry .ab .deps as `bash docs/prepared/device_s26.sh <commit>`. Sides: base = main, v1 = + q's norms
# from prep + kkt's inverse (the phases tell them apart: prep carries both kkt changes, h the o warpgroup's gain),
# new = + the stream.
#  v1: kkt_solve writes q's inverse norms (b.rq, the first value head of each q/k head, in the o warpgroup's summation
#      order: same fp32 sums), the chain prefetches them with the chunk, and the fused o warpgroup, which paces the
#      chain (ncu, session 24), loses ~224 instructions per chunk (static SASS 6259 -> 6035 for bf16; its q norms were
#      ~200 instructions and 17% of its samples). kkt_solve +~150 instructions per thread on half its items (static
#      3739 -> 4043, 93 registers as before): prep +2-5%. Predicted: the fused cases -2 to -6% net, if the norms were
#      not hidden under q h / q k^T's tensor time. Same arithmetic (the PTX sums alike).
#      kkt_solve's diagonal blocks D_m = (I + L_mm)^-1 by blocked substitution over the warp's 32 lanes (8 x 8 blocks:
#      A, B column by column on lanes 0-15, X = -B (N21 A) two entries per lane): ~60 multiply-adds per lane instead
#      of 120 (the ncu profile of session 24: the column solves were ~233 of kkt's ~1500 instructions per warp and
#      item), 87 registers (was 93): prep -4 to -7%, which pays for the q norms. Rounding moves in fp32 (host model:
#      the same error as one column per lane, far below A_s's hi + lo precision): v1's quick errors compared.
#  new: where the fused chain's blocks fill several waves (fuse_o, no split, > 1 block per SM's worth of
#      (sequence, head, slice) items: 4x8k, 8x1k, 64x256, mixed, tp4-8x4k), one block per SM runs its items back to
#      back (block b takes item b, then claims items 132, 133, ... from a counter the plan kernel zeroes: the hardware's
#      dynamic order; bitwise the same whichever block takes an item): warp 0 of the o warpgroup walks the items ST
#      chunks ahead and describes each chunk in a ring
#      of 8 ChunkDesc in shared memory, the chain prefetches from them (into the next item), stores an item's final
#      state and loads the next item's initial state between the last chunk's update and the next B1. Per-item
#      overhead on main (64x256: 4 chunks of ~2.2 us per item, ~12.5 us per wave): ~3.7 us (block start, the initial
#      state's load, the ring's fill, the last o rows). Predicted: 64x256 -15 to -25%, 8x1k -3 to -8%, 4x8k ~0,
#      mixed ~0 or better (the claims keep a ragged batch balanced),
#      256x64/fused (o fused, which main's heuristics do not choose there: 0.996 fused vs 0.901 unfused in session 22)
#      perhaps below 256x64's default: then let the heuristics fuse one-chunk batches too. 1x32k: the control for
#      new (split: the unchanged kFusedO kernel). The stream kernel: bf16 255 registers (no spills), fp16 252.
# A barrier or ring mistake hangs: each side is smoke-run first (20 s per case), only passing sides are timed.
# The quick checks: v1 against main's (bench/results/h200_s25_quick_8131e5e.log, 122 lines; rounding moves: all ok,
# the largest errors printed beside main's); new against v1 (its lines unchanged, bitwise) and its " fused stream"
# cases (3 blocks each streaming many items, empty and one-token sequences, checkpoints) all ok; sanitizers on new's
# stream cases.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1  # builds this tree and .ab's base (no timing)
cat $OUT/summary.txt 2>/dev/null | cut -c1-200
declare -A BIN=([base]=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check [v1]=/tmp/ab-v1/build/tools/cuda_check/gdn_cuda_check
  [new]=build-device/tools/cuda_check/gdn_cuda_check)
OK=()
for side in base v1 new; do
  good=1
  for c in 8x1k 64x256 256x64/fused; do
    timeout 20 ${BIN[$side]} --bench --no-check --case $c > /tmp/smoke_$side.log 2>&1 || { good=0; break; }
  done
  if [[ $good == 1 ]]; then OK+=($side); else echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 /tmp/smoke_$side.log; fi
done
echo "[$SECONDS s] smoke passed: ${OK[*]}"
for round in 1 2; do for c in 64x256 8x1k 4x8k mixed 256x64/fused 1x32k; do for side in "${OK[@]}"; do
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
print(f"{'case':13s}" + "".join(f" {s:>8s}" for s in sides) + "".join(f" {'base/' + s:>9s}" for s in sides[1:]))
for c in cases:
    ms = {s: sum(t[(c, s)]) / len(t[(c, s)]) for s in sides if t[(c, s)]}
    print(f"{c:13s}" + "".join(f" {ms.get(s, 0):8.3f}" for s in sides) +
          "".join(f" {ms['base'] / ms[s]:9.3f}" if 'base' in ms and s in ms else f" {'-':>9s}" for s in sides[1:]))
PY
grep -E '^(base|new) (64x256|256x64/fused) ' $OUT/ab.log | head -4 | grep -oE '(base|new) \S+|phases.*' | paste - - | cut -c1-160
REF=bench/results/h200_s25_quick_8131e5e.log
nb=$(grep -cE '^(ok|FAIL)' $REF)
maxerr() { grep -E "^ok +$2" $1 | grep -oE 'err_o=[0-9.e+-]+' | cut -d= -f2 | sort -g | tail -1; }
if [[ " ${OK[*]} " == *" v1 "* ]]; then
  timeout 90 ${BIN[v1]} --quick > /tmp/q_v1.log 2>&1
  echo "[$SECONDS s] quick v1: $(grep -c '^FAIL' /tmp/q_v1.log) FAIL, $(diff <(grep -E '^(ok|FAIL)' $REF) <(grep -E '^(ok|FAIL)' /tmp/q_v1.log) | grep -c '^[<>]') of main's $nb lines differ (rounding moves); largest err_o bf16 / fp16: main $(maxerr $REF 'fast bf16') / $(maxerr $REF 'fast fp16'), v1 $(maxerr /tmp/q_v1.log 'fast bf16') / $(maxerr /tmp/q_v1.log 'fast fp16')"
  grep -E '^FAIL' /tmp/q_v1.log | head -5
fi
if [[ " ${OK[*]} " == *" new "* ]]; then
  timeout 90 ${BIN[new]} --quick > /tmp/q_new.log 2>&1
  V1=/tmp/q_v1.log && [[ -s $V1 ]] || V1=$REF
  n1=$(grep -cE '^(ok|FAIL)' $V1)
  echo "[$SECONDS s] quick new: $(grep -c '^FAIL' /tmp/q_new.log) FAIL; of v1's $n1 lines $(diff <(grep -E '^(ok|FAIL)' $V1) <(grep -E '^(ok|FAIL)' /tmp/q_new.log | head -$n1) | grep -c '^[<>]') differ (0 expected); stream cases: $(grep -cE '^ok .*stream' /tmp/q_new.log) ok, $(grep -cE '^FAIL.*stream' /tmp/q_new.log) FAIL"
  grep -E '^FAIL' /tmp/q_new.log | head -5
fi
for f in /tmp/q_v1.log /tmp/q_new.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
for spec in "synccheck:stream" "memcheck:stream" "racecheck:ckpt bf16 128 vmajor oob fused stream"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  [[ " ${OK[*]} " == *" new "* ]] || break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 ${BIN[new]} --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
