#!/usr/bin/env bash
# Session 28, call 1 (prepared in session 27, ~9.5 min): the chain's ring filled by the TMA engine. Here
# first, on main:
#   M=$(git rev-parse --short HEAD); git checkout -b s28a
#   git am -3 -q docs/prepared/s28_a_bulk.patch; V1=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s28_tma.patch;    V2=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s28_rq_tma.patch
#   scripts/ab_base.sh $M $V1 $V2
# then with carry .ab .deps: `bash docs/prepared/device_s28a.sh <commit>`.
# Session 27 measured that both warpgroups of the fused chain are on its critical path (docs/perf.md,
# "Session 27"): any instruction added to the chain warpgroup costs its full length, so the ~300
# instructions of its prefetch in the v_new products' shadow (~200 tensor cycles: the shadow overflows,
# session 24's profile) are the cut to make. Sides:
#  base: main before them.
#  v1:   A_s as one image per (chunk, value head) in the stage's layout (kkt_solve writes it, zero rows
#        past len), one bulk copy by thread 0 on a per-stage mbarrier instead of 8 cp.async per thread.
#        SASS: the v_new shadow 312 -> 308 instructions (the per-thread pointer steps were cheap; the
#        LSU loses 25% of the LDGSTS). Predicted 0 to -2%.
#  v2:   + k, q and v by TMA boxes of tensor maps of the caller's rows (row_maps.cuh): one lane per
#        warp issues the stage's six copies; a partial chunk's rows past len zeroed in shared memory.
#        SASS: the v_new shadow 312 -> ~230 instructions (all warps' branches), LDGSTS 96 -> 12 per
#        kernel; fused bf16 243 registers (main 247).
#        Predicted h -4 to -8% on 1x32k, 4x8k (the v_new wait ~150-200 cycles late per chunk of ~3900).
#  new:  + q's norms by the chain warpgroup after the stage's full barrier, before B1 (no barrier of
#        their own now), instead of by kkt_solve, which reads all of q for them: session 27 measured this
#        on the cp.async ring as prep -16% and the chain +28-32% (the chain warpgroup had no room). The
#        TMA ring took ~80 instructions a chunk off it: whether that left room is what this side asks.
#        Land it only if it beats v2.
# Every side should be bitwise equal to main's quick lines (the same zeros, the same sums). The quick
# set now ends with "fast bf16 64 g=0" (where the D = 64 path stands at g = 0; SPEC's 5e-3) and
# "fast bf16 128 g=0 one-chunk" (session 27, after the reference log: not compared),
# held to issue 11's 2.4e-3 where the model puts it at 2.39-2.46e-3: a FAIL there is that path's
# accuracy gap (perf.md next steps), the same on every side, not this patch's.
# A barrier or tx-count mistake hangs: each side is smoke-run first (20 s per case).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 new)
ab_smoke 8x1k 1x32k 256x64 mixed
AB_PHASES=1 ab_time 320 1x32k 4x8k 8x1k 64x256 mixed 256x64 tp4-1x32k
ab_table
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s27_quick_2e6989c.log  # main's quick lines (main's kernels since 2e6989c)
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
# The sanitizers on v2 (the TMA ring): the fused chain, the split (summary pass: M_p without v),
# checkpoints, the store mode (ragged, partial chunks); then new's fused cases.
ab_sanitize v2 synccheck "vmajor pool fused,split 2 parts fused,140 seqs" 480
ab_sanitize v2 racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts" 480
ab_sanitize v2 memcheck "fused,split,140 seqs,odd stride" 480
ab_sanitize new synccheck "vmajor pool fused" 480
# The GPU suites on new (its build is this tree's: v2's ring, and the norms): the API's layouts, head
# counts, strides.
if [[ $SECONDS -lt 450 ]]; then
  (cd build-device && timeout $((585 - SECONDS)) ctest -L gpu -j4 2>&1) > $OUT/ctest.log
  echo "[$SECONDS s] ctest -L gpu: $(grep -E 'tests passed|tests failed' $OUT/ctest.log | tail -1)" | tee -a $OUT/summary.txt
fi
