#!/usr/bin/env bash
# Session 30, call 1 (prepared in session 29, ~8 min): where the o warpgroup's products go on the
# tensor cores' queue. Session 29 measured q k^T issued after the chain's v_new products at h -3
# to -5% (landed). Here first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s30a
#   git am -3 -q docs/prepared/x_s30_qh_after_u.patch; V1=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/x_s30_norm_skip.patch; V2=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s30_p_ahead.patch; V3=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s30_ahead_u.patch
#   scripts/ab_base.sh $M $V1 $V2 $V3
# then with carry .ab .deps: `bash docs/prepared/device_s30a.sh <commit>`. Sides:
#  base: main.
#  v1:   q h after the chain's -U^T products too (x_s30_qh_after_u, a U mbarrier): -U^T no longer
#        queues behind q h's 256 tensor cycles; v_new may queue behind its rest. Same arithmetic.
#  v2:   a diagnostic, o wrong (x_s30_norm_skip): the norm warpgroup forms no norms, its waits and
#        arrivals kept. Session 29: the norm warpgroup costs h +5.5% (prep -16%); this says whether
#        its work (16 KB of shared-memory reads and ~150 instructions a chunk) or its presence
#        costs it. Timed only (no quick lines).
#  v3:   the look-ahead P (s30_p_ahead): the o warpgroup forms P of chunk c + 1 (q k^T, gates,
#        hi / lo) after chunk c's P v_new, while the chain forms E(S^T) and stages h; eg, G, rk
#        announced by the chain's cp.async arrivals on small[s]. Predicted: the B1 -> B2 window
#        holds only q h on the o warpgroup's side: h -3 to -8% if the o warpgroup's work fits the
#        chain's tail, worse if it then paces B1. Bitwise the same.
#  new:  v3 + q h after -U^T (x_s30_ahead_u).
# Then v3's and new's quick lines against main's (bitwise equal expected) and the sanitizers on v3
# (a new mbarrier fed by cp.async arrivals; racecheck may see the chain's zeroing of k's rows past
# len beside the o warpgroup's early q k^T, values P gates out by selects: see form_p).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 v3 new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 330 1x32k 4x8k 64x256 8x1k
ab_table new/v3 v3/v1
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log  # main's quick lines (unchanged through session 29's landings)
lines() { grep -E '^(ok|FAIL)' $1; }
n=$(lines $REF | wc -l)
for side in v3 new; do
  has_side $side || continue
  timeout 60 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' /tmp/q_$side.log) FAIL, of $n reference lines $(diff <(lines $REF) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ (0 expected)" | tee -a $OUT/summary.txt
done
for f in /tmp/q_v3.log /tmp/q_new.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
# One-chunk sequences on the fused chain (the heuristics run 256x64 unfused: 0.875 ms against
# FlashQLA's ~0.84; session 26 measured 256x64/fused at 0.950): the look-ahead forms chunk 0's P
# while the chain loads the initial state.
for r in 1 2; do for side in base v3; do
  has_side $side && [[ $SECONDS -lt 450 ]] && echo "$side $(timeout 30 $(bin_of $side) --bench --no-check --case 256x64/fused 2>&1 | grep -E '^bench ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
done; done
ab_sanitize v3 synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 480
ab_sanitize v3 racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 520
ab_sanitize v3 memcheck "fused,split,140 seqs,odd stride" 560
