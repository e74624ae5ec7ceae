#!/usr/bin/env bash
# Session 47's prepared A/B for session 48 (~9 min; carry .deps .ab; setup
# `scripts/ab_base.sh main main+docs/prepared/s47_pv_fp16.patch`): the fused o's P v_new as ONE
# fp16 product for bf16 inputs with l2norm (v_new staged in fp16, scaled per V column by a power of
# two), then the state's lo passes by tier (W's alone where a chunk decays by e^-1 .. e^-32).
# Sides: base = main, v1 = main + s47_pv_fp16.patch (o only: every err_state line bitwise base's,
# bf16 err_o down, ~1.74e-3 on the SPEC's gates), new = main + s47_pv_fp16_tiers.patch (applied
# here; err_state moves on weakly decaying gates, err_o <= 2.4e-3 everywhere).
# Expected (docs/perf.md "Session 47"): v1 -1 to -3% on the kFusedO rows (4 m64n64k16 and P's
# split a chunk fewer in the o warpgroup, which paces the chain); new model-4x8k -8 to -12%
# (fp16 operands at D = 128 measured -11% there: no lo passes at all), the SPEC rows as v1.
: "${GDN_BUDGET_S:=560}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s47_pv_fp16_tiers.patch src/cuda/chunk/chain_precise.cuh 'state_tiers'
SIDES=(base v1 new)
ab_smoke 1x4k 256x64 | tee -a $R
# Correctness: every bf16 / fp16 line at K = V = 128 (fused, serial, split, pools, resets).
ab_lines "fast bf16 128,fast fp16 128,ckpt bf16 128" 60 "${OK[@]}"
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 130)) 1x32k 4x8k model-4x8k 1x128k 8x1k model-1x32k tp4-1x32k \
  model-tp4-1x32k 64x256 256x64
ab_table v1/new
# What is left: test_forward's CUDA cases on new (device_s47_pv16_suites.sh runs the rest).
[[ $(left) -gt 110 ]] && ab_gpu_suites 'CUDA*:CrossBackend*' $(($(left) - 5)) test_forward
echo "[$SECONDS s] done" | tee -a $R
