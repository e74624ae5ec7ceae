#!/usr/bin/env bash
# Session 36, call 1 (prepared in session 35, ~8.5 min; carry .ab .deps): fp16 operands for bf16
# inputs (s36_fp16_operands.patch, six commits: cfg.fp16_operands; q and k converted to fp16 in
# the wgmma chain's ring and in the mma.sync kernels' fragments, A_s's image (D = 64: w, u) in fp16,
# v unpacked and o stored in bf16, no lo passes), timed against
# main and validated by the quick set and the sanitizers on the fused cases. Setup, on main:
#   git checkout -b s36 && git am -3 -q docs/prepared/s36_fp16_operands.patch && scripts/ab_base.sh main
# then `bash docs/prepared/device_s36a.sh <commit>`. Sides:
#  base: main (bf16 operands; the lo passes on weakly decaying chunks).
#  new:  the patch (bf16 inputs' chains and fwd_o on fp16 operands; the bf16 and fp16 kernels that
#        keep their operands are bitwise main's SASS).
# Expected (the rounding model, docs/perf.md "Session 34"): model-1x32k's and g0-1x32k's h from
# ~0.88-0.90 ms toward ~0.5 (-25 to -35% of the total), the bench's gates level or better (P as one
# fp16 part, -2 to -3% as on fp16 inputs, against the norm warpgroup's conversions, off the pacing
# warpgroups); the serial chain (64x256, 256x64) converts its own stage: level to +3%? The quick
# set's bf16 lines from 2.2-2.4e-3 to ~1.7e-3 (D = 64 at g = 0 from 3.23e-3: the patch's last
# commit holds it, and "g=0 long unfused", to issue 11's 2.4e-3); no FAIL. Land if model-1x32k gains and the
# bench's gates do not lose more than ~1% (then ctest -L gpu: test_checkpoints checks that every
# mode keeps the same state arithmetic).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 1x32k 8x1k 64x256 model-1x32k tp8-1x4k
AB_PHASES=1 ab_time 300 model-1x32k g0-1x32k 1x32k 4x8k 8x1k 64x256 256x64 tp4-1x32k mixed 1x4k
ab_table
for c in model-1x32k/bf16ops 1x32k/bf16ops 64x256/bf16ops; do  # new's own bf16 operands, same binary
  has_side new && timeout 30 "$(bin_of new)" --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench |phases' \
    | tr '\n' ' ' | sed 's/$/\n/' | tee -a "$OUT/summary.txt"
done
AB_QUICK_REF=bench/results/h200_s35_call2_quick_new.log ab_quick new 100
grep -E 'bf16' "$OUT/quick_new.log" | head -60 >> "$OUT/summary.txt"
ab_sanitize new racecheck "fused" 470
ab_sanitize new synccheck "fused" 520
ab_sanitize new memcheck "fast bf16 128 kmajor,split" 580
