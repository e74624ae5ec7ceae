#!/usr/bin/env bash
# Session 50's first call (~8.5 min; carry .deps .ab, .ab = `scripts/ab_base.sh 8c7d1bd`): the
# checks session 49 left out for the tensor-core scan (memcheck and synccheck on the split cases,
# test_gpu_large, test_head_sizes) and the kernel file's split (059e6d5: the chain's steps as
# inlined functions; SASS the same but for the prologues' order, static shared offsets and a few
# reordered instructions in the serial kernels) checked against 8c7d1bd: the whole quick set
# bitwise (no line may move), the four CUDA suites, the timings of the rows of each chain mode.
# With it (uncommitted when sent) the summary pass heavy first (split_cut.cuh): its lines bitwise
# too (the new "split heavy first" lines: base lacks them), model-tp4-1x32k's sum 0.133 -> ~0.09 ms
# expected (its slow heads' whole-part chains an SM each), the SPEC gates' tp rows +1-2 us (every
# summary block ranks the pairs first). Then the scan's column sweep with phases.
: "${GDN_BUDGET_S:=540}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_build | tail -2 | tee -a "$R"
SIDES=(base new)
ab_smoke tp8-1x32k 256x64 model-tp4-1x32k
ab_lines "" 150 base new  # (expected: 0 FAIL, no line moved)
SUITES=(test_forward test_checkpoints test_gpu_large test_head_sizes)
has_side new && ab_gpu_suites_started 'CUDA*:CrossBackend*' 240 "${SUITES[@]}"
ONLY="bf16 128 split 4 parts,bf16 64 split many parts,ckpt bf16 128 split,bf16 128 split 2 parts,bf16 128 140 seqs"
for tool in memcheck synccheck; do ab_sanitize new $tool "$ONLY" $((SECONDS + 100)); done
wait
ab_suite_report "${SUITES[@]}"
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 45)) model-tp4-1x32k tp8-1x32k tp4-1x32k model-tp4-1x32k/parts16 1x32k \
  256x64 64x256 256x64/bf16state
ab_table
# Where the scan's step with M_p goes (perf.md "Session 49"): 8 columns a block (the default at
# HV = 8: 16 blocks of a head each copy its 64 KB M_p a step) against 16 and 32 (half and a quarter
# of the copies, 2x and 4x the mma a block). If the step shrinks with the copies, M_p's multicast
# in a cluster is next (s50_scan_multicast.patch).
profile_cases 5 scan_cols.log model-tp4-1x32k model-tp4-1x32k/scan16 model-tp4-1x32k/scan32 \
  model-tp4-1x32k/parts16 model-tp4-1x32k/parts16/scan16 model-tp4-1x32k/parts16/scan32 tp8-1x32k \
  tp8-1x32k/scan16 tp8-1x32k/scan32
cut -c1-220 "$OUT/scan_cols.log" >> "$R"
echo "[$SECONDS s] done" | tee -a "$R"
