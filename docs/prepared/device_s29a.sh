#!/usr/bin/env bash
# Session 29, call 1 (prepared in session 28, ~9.5 min): three cuts of the fused chain's coupling
# and work. Here first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s29a
#   git am -3 -q docs/prepared/s29_p_tiles.patch; V1=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/s29_norm_wg.patch; V2=$(git rev-parse --short HEAD)
#   git reset -q --hard $M
#   git am -3 -q docs/prepared/x_s29_qk_after_v.patch; V3=$(git rev-parse --short HEAD)
#   git reset -q --hard $V2
#   git am -3 -q docs/prepared/s29_p_tiles.patch
#   scripts/ab_base.sh $M $V1 $V2 $V3
# then with carry .ab .deps: `bash docs/prepared/device_s29a.sh <commit>`. Sides:
#  base: main.
#  v1:   P by 8-column tiles against each warp's 16 rows (s29_p_tiles): the tiles before the warp's
#        diagonal pair take no causal mask, the tiles after it are zero (no shuffles, factors or
#        hi / lo split), rows past len a row factor of 0. SASS: ~70-80 of the o warpgroup's ~640
#        instructions a chunk fewer on average (warp 0 the most). Session 26 measured -224 (q's
#        norms) as h -8%: predicted h -2 to -4%. Bitwise the same on every stored value.
#  v2:   q's norms by a third warpgroup (s29_norm_wg): kkt_solve stops reading q, the fused chain
#        runs 384 threads (setmaxnreg: norm 24, chain 248, o 232) and hands them over on per-stage
#        mbarriers. Session 28 measured prep -16% (0.229 -> 0.192 ms on 1x32k) when kkt_solve
#        stopped, and the chain +28% when its chain warpgroup formed them: here neither critical
#        warpgroup does (the o warpgroup waits once per chunk, ~2 chunks after they are ready).
#        Predicted prep -16%, h within +-1%: 1x32k, 4x8k -4 to -5%. Bitwise the same sums.
#  v3:   an experiment on main (x_s29_qk_after_v): the o warpgroup issues q k^T of chunk c after
#        the chain's v_new products of chunk c (a V mbarrier), so that the tensor cores' queue runs
#        the chain's critical products first (perf.md "Next steps 0": the tensor-queue hypothesis).
#        If h falls, the coupling is the queue and a look-ahead P is the next step. (On top of
#        s29_norm_wg it spills 4 bytes, a prologue value across the setmaxnreg: not stacked here.)
#  new:  v1 + v2.
# A barrier or phase mistake hangs: each side is smoke-run first (20 s per case). The sanitizers and
# the GPU suites run in call 2 on what lands (`device_s29b.sh`).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 v3 new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 410 1x32k 4x8k 64x256 8x1k
ab_table
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log  # main's quick lines (the fused kernels since b5fefbb)
lines() { grep -E '^(ok|FAIL)' $1; }
n=$(lines $REF | wc -l)
for side in new v3; do  # (new holds v1's and v2's changes)
  has_side $side || continue
  [[ $SECONDS -gt 530 ]] && break
  timeout 60 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' /tmp/q_$side.log) FAIL, of $(basename $REF)'s $n lines $(diff <(lines $REF) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ (0 expected)" | tee -a $OUT/summary.txt
done
for f in /tmp/q_new.log /tmp/q_v3.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
