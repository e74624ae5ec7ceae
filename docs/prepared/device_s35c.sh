#!/usr/bin/env bash
# Session 35 (prepared in session 34, ~7 min): P as one fp16 part in the fp16 kernels' o warpgroup
# (s35_fp16_p_single.patch), timed on fp16 inputs and on fp32 inputs (which run the fp16 kernels on
# fp16 copies since session 34), with the quick set's accuracy.
# On main (after session 35's first call has validated the fp32 path):
#   git checkout -b s35c && git am -3 -q docs/prepared/s35_fp16_p_single.patch
#   scripts/ab_base.sh main
# then with carry .ab .deps: `bash docs/prepared/device_s35c.sh <commit>`. Sides:
#  base: main.
#  new:  + P without its lo part where the operands are fp16 (kPSplit<E>, chain_precise.cuh): the
#        o warpgroup (which paces the fused chain) loses P's split (-32 FADD, -16 F2FP static) and
#        4 of its 8 P v_new products (-4 HGMMA) a chunk; bf16's SASS is bitwise main's.
# Expected: the fp16 and fp32 rows' h -2 to -5%, bf16 rows level (the same SASS); the quick set's
# fp16 D = 128 lines from 2.65-2.97e-4 to ~2.9-3.7e-4 (the rounding model: `emulate_roundings.py
# --base fp16 --adaptive 32 --rule tail --set h_o=hilo16,W=hilo16,vs=hilo16,P=fp16 --strong P=fp16`),
# under kFp16Target (5e-4). Land if the fp16 rows gain and the quick set has no FAIL.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 1x32k/fp16 8x1k/fp16
AB_PHASES=1 ab_time 330 1x32k/fp16 4x8k/fp16 8x1k/fp16 64x256/fp16 1x32k/fp32 1x32k
ab_table
ab_quick new 100
grep -E 'fp16|fp32' "$OUT/quick_new.log" | head -40 >> "$OUT/summary.txt"
ab_sanitize new racecheck "fast fp16 128 kmajor fused" 420
