#!/usr/bin/env bash
# Session 27, device call 1 (prepared in session 26): A_s's zero blocks skipped, q's norms moved from kkt_solve into
# the fused chain's chain warpgroup (two placements), in one call (~8 min). Here first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s27
#   git am -3 -q docs/prepared/s27_a_upper_skip.patch; V1=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s27_rq_chain.patch;     V2=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s27_rq_shadow.patch
#   scripts/ab_base.sh $M $V1 $V2
# then run with carry .ab .deps as `bash docs/prepared/device_s27.sh <commit>`. Sides:
#  base: main.
#  v1:  + A_s's 16 x 16 blocks above the diagonal neither stored by kkt_solve nor copied by the chain (their ring slots
#       zeroed once): A_s's bytes -37.5% (1x32k: 268 -> 168 MB written by prep and read by the chain). Predicted prep
#       -3 to -8% (it moves ~550 MB at ~2.5 TB/s: partly memory-bound), the chain 0-1%: 1x32k -1 to -3%. Bitwise the
#       same (the same values; zeros from the init instead of from memory): v1's quick lines equal main's.
#  v2:  + q's norms formed by the fused chain's chain warpgroup (before B1, after its own barrier Q: every thread's
#       pieces of q landed) instead of by kkt_solve, which read all of q for them (session 26: prep +12%, ~27 us on
#       1x32k, against the o warpgroup's -8% of h). The chain warpgroup waits for the o warpgroup after B2 anyway;
#       whether its B2 -> B1 stretch has ~150 instructions of room is what this measures. Predicted: prep back to
#       ~0.19 ms on 1x32k and h unchanged: 1x32k, 4x8k -3 to -4%. The same sums (quick lines equal v1's).
#  new: the same norms of chunk c + 1 in chunk c's -U^T shadow (chunk 0's before the loop): on the chain warpgroup's
#       B1 -> B2 stretch instead. One of v2 / new should win; both equal v1's quick lines.
# A barrier mistake hangs: each side is smoke-run first (20 s per case), only passing sides are timed.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 new)
ab_smoke 8x1k 1x32k 256x64/fused
# Round 1 with the phases (prep / h), round 2 without (shorter); both rounds' times averaged.
AB_PHASES=1 ab_time 350 1x32k 4x8k 8x1k 64x256 256x64 tp4-1x32k
ab_table
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
# Every side bitwise equal to the one before: main's committed quick lines, then each side's.
REF=bench/results/h200_s26_quick_a46606b.log  # main's quick lines (a46606b; main's kernels since)
lines() { grep -E '^(ok|FAIL)' $1; }
prev=$REF
for side in v1 v2 new; do
  has_side $side || continue
  timeout 90 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  n=$(lines $prev | wc -l)
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL' /tmp/q_$side.log) FAIL, of $(basename $prev)'s $n lines $(diff <(lines $prev) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ (0 expected)" | tee -a $OUT/summary.txt
  grep -E '^FAIL' /tmp/q_$side.log | head -5
  prev=/tmp/q_$side.log
done
for f in /tmp/q_v1.log /tmp/q_v2.log /tmp/q_new.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
# The sanitizers on the fused cases (barrier Q, the zeroed slots) of new, then of v2 as time allows.
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused" 580
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused" 580
ab_sanitize v2 synccheck "vmajor pool fused,split 2 parts fused" 580
ab_sanitize new memcheck fused 580
ab_sanitize v2 racecheck "ckpt bf16 128 vmajor oob fused" 580
