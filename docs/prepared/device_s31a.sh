#!/usr/bin/env bash
# Session 31, call 1 (prepared in session 30, ~9.5 min): three cuts of the fused chain's
# warpgroups, each from session 30's ncu of 1x32k (bench/results/h200_s30_ncu_1x32k_stalls.txt).
# On main:
#   M=$(git rev-parse --short HEAD); git checkout -b s31a
#   git am -3 -q docs/prepared/s31_norm_mma.patch; V1=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s31_eg_early.patch; V2=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s31_row_stores.patch; V3=$(git rev-parse --short HEAD)
#   git reset -q --hard $V1; git am -3 -q docs/prepared/s31_eg_early.patch docs/prepared/s31_row_stores.patch
#   scripts/ab_base.sh $M $V1 $V2 $V3
# then with carry .ab .deps: `bash docs/prepared/device_s31a.sh <commit>`. Sides:
#  base: main.
#  v1:   q's norms on the tensor cores (s31_norm_mma): the norm warpgroup's warps form the diagonal
#        of Q_w Q_w^T by 8 ldmatrix and 16 mma.sync instead of ~140 unpacks and multiply-adds a
#        thread (the same 16 KB of shared reads); setmaxnreg 32 / 232 / 240. Session 30: the norm
#        warpgroup's work is 3.5% of h. Predicted h -1 to -3%. rq's bits change (fp32 sums in
#        another order): quick lines may differ in the last digit.
#  v2:   the o warpgroup's row factors exp(G_i) read before its waits (s31_eg_early): their loads
#        came after P's gating and their multiply waited 2600 samples (4.7% of the kernel's).
#        Predicted h -1 to -4%. Bitwise the same.
#  v3:   16-byte row stores with a stepped destination (s31_row_stores): the o warpgroup's flush_o
#        ~135 -> ~70 instructions a chunk (it overran the P v_new shadow: the wait after it had 4
#        samples); fwd_o (256x64's o) and fwd_prep (D = 64) store the same way. Predicted h -1 to
#        -2%, 256x64 o -1 to -3%. Bitwise the same.
#  new:  all three.
# Then the quick lines of v2, v3 (bitwise main's expected) and new (within the last digit of main's:
# the differing lines are listed), 256x64 (unfused: fwd_o) base against v3, and the sanitizers on
# new (the norm warpgroup reads q by ldmatrix, never past len).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 v3 new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 310 1x32k 4x8k 64x256 8x1k
ab_table
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log  # main's quick lines (unchanged since session 28)
lines() { grep -E '^(ok|FAIL)' $1; }
n=$(lines $REF | wc -l)
for side in v2 v3 new; do
  has_side $side && [[ $SECONDS -lt 470 ]] || continue
  timeout 60 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' /tmp/q_$side.log) FAIL, of $n reference lines $(diff <(lines $REF) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ" | tee -a $OUT/summary.txt
done
for f in /tmp/q_v2.log /tmp/q_v3.log /tmp/q_new.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
[[ -f /tmp/q_new.log ]] && diff <(lines $REF) <(lines /tmp/q_new.log | head -$n) | head -40 >> $OUT/summary.txt
for r in 1 2; do for side in base v3; do
  has_side $side && [[ $SECONDS -lt 530 ]] && echo "$side $(timeout 30 $(bin_of $side) --bench --no-check --profile --case 256x64 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $OUT/summary.txt
done; done
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 560
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 580
ab_sanitize new memcheck "fused,split,140 seqs,odd stride" 598
