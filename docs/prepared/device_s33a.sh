#!/usr/bin/env bash
# Session 33, call 1 (prepared in session 32, ~8.5 min): programmatic dependent launch through the
# forward and the plan's search in shared memory (s33_pdl + s33_plan_smem), the sequences longest
# first (s33_lpt), and the bound of P formed outside the o warpgroup (x_s33_nop, a diagnostic).
# On main:
#   M=$(git rev-parse --short HEAD)
#   git checkout -b s33n && git am -3 -q docs/prepared/x_s33_nop.patch && N=$(git rev-parse --short HEAD)
#   git checkout main && git checkout -b s33a
#   git am -3 -q docs/prepared/s33_pdl.patch docs/prepared/s33_plan_smem.patch && P=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s33_lpt.patch
#   scripts/ab_base.sh $M $N $P
# then with carry .ab .deps: `bash docs/prepared/device_s33a.sh <commit>`. Sides:
#  base: main (kernels launched in stream order but the summary pass -> chain).
#  v1:   x_s33_nop (DIAGNOSTIC, o wrong): the fused o warpgroup forms P (q k^T, its gating, the hi /
#        lo split) on chunk 0 only and runs P v_new with P = 0 after. The o warpgroup paces the fused
#        chain (ncu, sessions 24 and 30): h's drop here bounds what P from prep (an image beside A_s,
#        loaded by TMA) or from a partner block could buy. Build that only if h drops > ~10%.
#  v2:   s33_pdl + s33_plan_smem: the plan lets kkt_solve start at once (it waits for the plan at
#        its top), and kkt_solve lets the chain start (no split): the chain's blocks decode their
#        items and load their initial states while kkt_solve's last blocks run; the plan's
#        boundaries and chunk offsets in shared memory too (N <= 2047), so that its binary search
#        per chunk reads no global memory. Predicted: 1x4k and tp8-1x4k -2 to -6% (a launch gap,
#        the state loads and ~2 us of the plan in 0.05-0.11 ms), 8x1k -1 to -2%, the long cases ~0.
#        The same arithmetic: the quick lines bitwise main's (ab_quick against session 32's).
#  new:  v2 + s33_lpt: the sequences longest first (the plan's counting sort by chunk count; the
#        chain's block groups mapped through it; equal lengths keep the identity). A list-scheduling
#        model (132 SMs, a block's time its chunks + 2): mixed -13% of h, tail-16k -21% (its 16k
#        prompt started last before), equal-length cases unchanged. Bitwise v2's lines expected
#        (which block computes a sequence changes nothing it computes).
# If v2 / new gain and their quick lines hold, call 2 runs the suites on what lands (CUDA graphs
# capture the programmatic edges: test_graphs.py, test_torch.py).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 new)
ab_smoke 8x1k 1x4k mixed
AB_PHASES=1 ab_time 330 1x4k tp8-1x4k 8x1k mixed tail-16k 1x32k
ab_table v2/new
grep -E '^\S+ (1x32k|4x8k|8x1k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
# tail-16k (255 one-chunk sequences and a 16k prompt): the heuristics' long-tail rule (the host
# copy of cu_seqlens keeps it on kFusedO) against the serial form it would take without the copy,
# and the unfused chain (/seq).
if has_side new; then
  for c in tail-16k tail-16k/serial tail-16k/fused tail-16k/seq; do
    [[ $SECONDS -lt 380 ]] || break
    echo "new $(timeout 30 $(bin_of new) --bench --no-check --case $c 2>&1 | grep -E '^bench ' | tr '\n' ' ')" | tee -a $OUT/summary.txt
  done
fi
ab_quick new 90
ab_sanitize new synccheck "fused,140 seqs,split 2 parts" 440
ab_sanitize new racecheck "140 seqs,vmajor pool fused" 475  # (the plan's shared-memory sort)
ab_sanitize new memcheck "fused,split,140 seqs,odd stride,serial" 525
# The plan's duration by ncu, base against new (session 32: 4.2 us on 1x32k, 4.5 on 8x1k, 4.9 on 256x64).
for side in base new; do
  for c in 8x1k 256x64; do
    [[ $SECONDS -lt 560 ]] || break
    timeout 40 ncu --clock-control none -k regex:plan_kernel -c 1 --section SpeedOfLight $(bin_of $side) --bench --no-check --case $c > /tmp/ncu_plan.log 2>&1
    echo "[$SECONDS s] $side $c plan: $(grep -oE 'Duration +[a-z]+ +[0-9.]+' /tmp/ncu_plan.log | head -1)" | tee -a $OUT/summary.txt
  done
done
