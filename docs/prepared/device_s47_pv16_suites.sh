#!/usr/bin/env bash
# Session 47's prepared checks for session 48 (~6 min; carry .deps; after device_s47_pv16.sh on the
# same warm machine or alone): main + s47_pv_fp16_tiers.patch (applied here) through the GPU suites
# (test_forward, test_checkpoints: every checkpoint row bitwise a prefix call's final state under the
# state tiers, test_head_sizes, test_gpu_large) and compute-sanitizer racecheck / memcheck /
# synccheck on the fused, serial and split bf16 cases. Land the patch only if all pass.
: "${GDN_BUDGET_S:=560}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s47_pv_fp16_tiers.patch src/cuda/chunk/chain_precise.cuh 'state_tiers' build
SIDES=(new)
OK=(new)
ab_gpu_suites 'CUDA*:CrossBackend*' 200 test_forward test_checkpoints test_head_sizes
ONLY="bf16 128 gates x2 fused,bf16 128 140 seqs,bf16 128 split 4 parts,ckpt bf16 128 split"
for tool in racecheck memcheck synccheck; do ab_sanitize new $tool "$ONLY" $((GDN_BUDGET_S - 100)); done
[[ $(left) -gt 100 ]] && ab_gpu_suites 'CUDA*:CrossBackend*' $(($(left) - 5)) test_gpu_large
echo "[$SECONDS s] done" | tee -a $R
