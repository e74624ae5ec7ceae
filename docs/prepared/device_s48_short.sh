#!/usr/bin/env bash
# device_s48.sh for the last ~4 minutes of a session's device budget (~250 s; carry .deps .ab with
# .ab holding main alone: `scripts/ab_base.sh main`): base = main, new = main +
# s47_pv_fp16_tiers.patch (applied here); the bf16 K = V = 128 fast lines of both, one round of the
# rows the patch moves, then new's test_forward CUDA cases with racecheck beside them.
: "${GDN_BUDGET_S:=250}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s47_pv_fp16_tiers.patch src/cuda/chunk/chain_precise.cuh 'state_tiers'
SIDES=(base new)
ab_smoke 1x4k | tee -a $R
ab_lines "fast bf16 128" 25 "${OK[@]}"
echo "[$SECONDS s] lines done" | tee -a $R
ab_time $((GDN_BUDGET_S - 120)) 1x32k 4x8k model-4x8k 256x64 model-tp4-1x32k 1x128k
ab_table
ab_gpu_suites_started 'CUDA*' $(($(left) - 10)) test_forward
OK=(new)
ab_sanitize new racecheck "bf16 128 gates x2 fused,bf16 128 140 seqs,bf16 128 split 4 parts" $((GDN_BUDGET_S - 12))
wait
ab_suite_report test_forward
echo "[$SECONDS s] done" | tee -a $R
