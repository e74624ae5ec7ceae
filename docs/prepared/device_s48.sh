#!/usr/bin/env bash
# Session 48's one-call form of device_s47_pv16.sh + device_s47_pv16_suites.sh (~9.5 min; carry
# .deps .ab; setup `scripts/ab_base.sh main main+docs/prepared/s47_pv_fp16.patch`), for a session
# whose device starts keep failing (every failed start costs 90 s of the budget): sides base =
# main, v1 = main + s47_pv_fp16.patch, new = main + s47_pv_fp16_tiers.patch (applied here); the
# K = V = 128 check lines of each, the kFusedO / serial / split / model rows timed (two rounds), then
# new's GPU suites side by side (test_forward, test_checkpoints, test_head_sizes, test_gpu_large)
# with racecheck and memcheck on its fused, serial and split bf16 cases.
: "${GDN_BUDGET_S:=570}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s47_pv_fp16_tiers.patch src/cuda/chunk/chain_precise.cuh 'state_tiers'
SIDES=(${GDN_SIDES:-base v1 new})  # (GDN_SIDES="base new" with .ab holding main alone: the short form)
ab_smoke 1x4k 256x64 | tee -a $R
ab_lines "fast bf16 128,fast fp16 128,ckpt bf16 128" 40 "${OK[@]}"
echo "[$SECONDS s] lines done" | tee -a $R
# (The suites need ~230 s beside the sanitizers: the timings stop there, the cases in order of use.)
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 230)) 1x32k 4x8k model-4x8k 256x64 model-tp4-1x32k 8x1k tp4-1x32k \
  64x256 model-1x32k 1x128k
ab_table v1/new
# The suites at once (they only check), the sanitizers beside them.
SUITES=(test_forward test_checkpoints test_head_sizes test_gpu_large)
ab_gpu_suites_started 'CUDA*:CrossBackend*' $(($(left) - 20)) "${SUITES[@]}"
OK=(new)
ONLY="bf16 128 gates x2 fused,bf16 128 140 seqs,bf16 128 split 4 parts,ckpt bf16 128 split"
for tool in racecheck memcheck; do ab_sanitize new $tool "$ONLY" $((GDN_BUDGET_S - 25)); done
wait
ab_suite_report "${SUITES[@]}"
echo "[$SECONDS s] done" | tee -a $R
