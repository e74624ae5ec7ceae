#!/usr/bin/env bash
# Session 34, call 1 (prepared in session 33, ~9 min): the gated longest-first order (landed in
# session 33 untimed in its gated form) and the order's entries as records (s34_order_records),
# then where model-like gates spend their time (phases; the full ncu profile is call 3's:
# `GDN_NCU_CASE=model-1x32k scripts/device.sh build,ncu`).
# On main:
#   git checkout -b s34a && git am -3 -q docs/prepared/s34_order_records.patch
#   scripts/ab_base.sh 2e657b8 main
# then with carry .ab .deps: `bash docs/prepared/device_s34a.sh <commit>`. Sides:
#  base: 2e657b8 (session 32's main: no order).
#  v1:   main (the order where the heuristics say lengths may differ: off for one sequence and for
#        lengths the host knows equal, so 8x1k, 1x4k, 256x64 run base's path: expected level;
#        mixed and tail-16k expected at session 33 call 2's -9% / -14%). NAME/nohost: the same
#        case without the host copy of cu_seqlens (the order on for equal lengths: call 2 measured
#        +1.7-3% there, the plan's sort and one more dependent load in every chain block's prologue).
#  new:  v1 + s34_order_records: the order's entries carry (tb, te, c0, seq), so the chain's
#        prologue reads its sequence's bounds in the same round of loads as the order: the
#        /nohost rows expected at ~1 us over base (the sort alone), mixed / tail-16k a little
#        faster than v1. Bitwise v1's quick lines.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 new)
ab_smoke 8x1k mixed tail-16k 256x64
ab_time 270 8x1k 1x4k 256x64 mixed tail-16k 8x1k/nohost 256x64/nohost 64x256/nohost
ab_table v1/new
ab_quick new 60
ab_sanitize new racecheck "140 seqs,vmajor pool fused" 350
ab_sanitize new memcheck "fused,split,140 seqs,odd stride,serial" 385
# model-like gates: the phases (prep, h) of model-1x32k and g0-1x32k against 1x32k.
for c in 1x32k model-1x32k g0-1x32k; do
  [[ $SECONDS -lt 420 ]] || break
  echo "v1 $(timeout 40 $(bin_of v1) --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
scripts/device.sh test > /tmp/test.log 2>&1
grep -E 'ctest' $OUT/summary.txt | tail -1
