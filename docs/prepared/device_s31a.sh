#!/usr/bin/env bash
# Session 31, call 1 (prepared in session 30, ~8.5 min): the o warpgroup's late loads and the
# norm warpgroup's work. On main:
#   M=$(git rev-parse --short HEAD); git checkout -b s31a
#   git am -3 -q docs/prepared/x_s31_regs.patch; V1=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s31_norm_mma.patch; V2=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s31_eg_early.patch; V3=$(git rev-parse --short HEAD)
#   git reset -q --hard $V2; git am -3 -q docs/prepared/s31_eg_early.patch
#   scripts/ab_base.sh $M $V1 $V2 $V3
# then with carry .ab .deps: `bash docs/prepared/device_s31a.sh <commit>`. Sides:
#  base: main.
#  v1:   setmaxnreg 32 / 232 / 240 instead of 24 / 232 / 248, nothing else (x_s31_regs): what the
#        chain warpgroup's 8 registers fewer cost (its SASS: 4080 -> 4074 instructions), which v2
#        needs. Bitwise the same.
#  v2:   q's norms on the tensor cores (s31_norm_mma): the norm warpgroup's warps form the diagonal
#        of Q_w Q_w^T by 8 ldmatrix and 16 mma.sync instead of ~140 unpacks and multiply-adds a
#        thread; the same 16 KB of shared-memory reads. Session 30: the norm warpgroup's work is
#        3.5% of h. Predicted h -1 to -3% (less if its reads, not its instructions, cost it). rq's
#        bits change (fp32 sums in another order): quick lines may differ in the last digit.
#  v3:   the o warpgroup's row factors exp(G_i) read from eg before its waits (s31_eg_early):
#        ncu (session 30) found their loads issued after P's gating and the multiply waiting
#        2600 samples (4.7% of the kernel's, ~14% of the o warpgroup's) for them. Predicted h -1
#        to -4%. Bitwise the same.
#  new:  v2 + v3.
# Then the quick lines of v1, v3 (bitwise equal to main's expected), v2 and new (errors at main's
# level expected; the differing lines are listed) and the sanitizers on new (the norm warpgroup
# now reads q by ldmatrix, never past len).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 v3 new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 330 1x32k 4x8k 64x256 8x1k
ab_table new/v3 v2/v1
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log  # main's quick lines (unchanged since session 28)
lines() { grep -E '^(ok|FAIL)' $1; }
n=$(lines $REF | wc -l)
for side in v3 new v1 v2; do
  has_side $side && [[ $SECONDS -lt 470 ]] || continue
  timeout 60 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' /tmp/q_$side.log) FAIL, of $n reference lines $(diff <(lines $REF) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ" | tee -a $OUT/summary.txt
done
for f in /tmp/q_v3.log /tmp/q_new.log /tmp/q_v1.log /tmp/q_v2.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
[[ -f /tmp/q_new.log ]] && diff <(lines $REF) <(lines /tmp/q_new.log | head -$n) | head -40 >> $OUT/summary.txt
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 500
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 540
ab_sanitize new memcheck "fused,split,140 seqs,odd stride" 580
