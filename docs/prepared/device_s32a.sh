#!/usr/bin/env bash
# Session 32, call 1 (prepared in session 31, ~7.5 min): the fused chain on two warpgroups again,
# q's norms formed by the o warpgroup's own warps on the tensor cores. On main:
#   M=$(git rev-parse --short HEAD); git checkout -b s32a
#   git am -3 -q docs/prepared/s32_norm_in_o.patch
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s32a.sh <commit>`. Sides:
#  base: main (three warpgroups: the norm warpgroup forms q's norms by ldmatrix + mma.sync,
#        session 31: h -3% against its ALU form; setmaxnreg 32 / 232 / 240).
#  new:  s32_norm_in_o: each of the o warpgroup's warps forms its own 16 rows' norms by the same
#        8 ldmatrix + 16 mma.sync in q h's shadow (then two shuffles), instead of waiting on the
#        norm warpgroup's mbarrier and reading rq; 256 threads, no setmaxnreg (254 registers bf16).
#        Session 30: the norm warpgroup's presence alone cost ~2% of h; the o warpgroup paces
#        the chain, and its q h wait had room (SASS: the HMMAs between q h's issue and its wait).
#        Predicted h -1 to -3%, or +1-2% if the o warpgroup's 16 HMMA delay its q h on the
#        tensor pipe. The same sums and rsqrt as main's: bitwise main's quick lines expected.
# Then the quick lines of new (bitwise main's committed ones expected), 256x64/fused (the fused
# path where the heuristics leave o unfused: it has no third warpgroup either now), the
# sanitizers on new, and the plan kernel's and kkt_solve's durations by ncu (session 31's
# call 2 had no time for them: the phases show plan 0.010-0.012 ms, event-timed outside a graph).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 250 1x32k 4x8k 64x256 8x1k tp4-1x32k
ab_table
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
ab_quick new 60
for r in 1 2; do for side in base new; do
  has_side $side && [[ $SECONDS -lt 330 ]] && echo "$side $(timeout 30 $(bin_of $side) --bench --no-check --profile --case 256x64/fused 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $OUT/summary.txt
done; done
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 380
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 400
ab_sanitize new memcheck "fused,split,140 seqs,odd stride" 420
for c in 1x32k 8x1k 256x64; do
  [[ $SECONDS -lt 520 ]] || break
  timeout 60 ncu --clock-control none -k regex:'plan_kernel|kkt_solve' -c 2 --section SpeedOfLight \
    $(bin_of new) --bench --no-check --case $c > /tmp/ncu_plan_$c.log 2>&1
  echo "[$SECONDS s] $c: $(grep -E 'plan_kernel|kkt_solve_kernel|Duration' /tmp/ncu_plan_$c.log | grep -oE '(plan_kernel|kkt_solve_kernel)|Duration +[a-z]+ +[0-9.]+' | paste - - | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
cat /tmp/ncu_plan_*.log > $OUT/ncu_plan.log 2>/dev/null
