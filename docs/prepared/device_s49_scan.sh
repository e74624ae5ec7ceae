#!/usr/bin/env bash
# Session 49 (~6.5 min; carry .deps .ab, any .ab whose base is main, device_s48.sh's too):
# s49_scan_tf32.patch (applied here; it includes s47_scan_b_ring.patch) against main. The split
# scan's product M_p S_p on the tensor cores (mma.m16n8k8, tf32 hi + lo in three passes) instead of
# an fp32 fma per element and thread, which shared memory's 128 bytes a cycle bound (~2560 cycles a
# step at 8 columns: every fma a register delivered; session 47's ~3.75 us a step where M_p is
# present), and B_p's slices kBRing - 1 parts ahead (the ~1.25 us steps where M_p is negligible).
# Expected: the scan phase -50 to -70% where M_p is present (model-tp4-1x32k 0.026 -> ~0.010 ms,
# then bound by M_p's 8 MB a step out of L2), -30 to -50% where it is negligible (tp4 / tp8 on the
# SPEC's gates); the split lines move by the scan's rounding (~2^-21 relative a step against
# fp32's 2^-24; the chain reads the state as 16-bit hi + lo parts, ~2^-17).
: "${GDN_BUDGET_S:=400}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s49_scan_tf32.patch src/cuda/chunk/split_scan.cu 'mma_tf32'
SIDES=(base new)
ab_smoke tp8-1x32k model-tp4-1x32k | tee -a $R
ab_lines "split" 40 "${OK[@]}"
# test_forward's CUDA cases (the split's: 3, 8, 12 parts, parts ending mid-chunk, model gates with
# M_p negligible on some heads) and test_checkpoints beside the sanitizers.
has_side new && { ab_run_suite 'CUDA*' 120 test_forward & ab_run_suite 'CUDA*' 120 test_checkpoints & }
ONLY="bf16 128 split 4 parts,bf16 64 split many parts,ckpt bf16 128 split"
for tool in racecheck synccheck memcheck; do ab_sanitize new $tool "$ONLY" $((SECONDS + 45)); done
wait
ab_suite_report test_forward test_checkpoints
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 10)) tp8-1x32k model-tp4-1x32k tp4-1x32k tp4-1x32k/parts16 \
  model-tp4-1x32k/parts16 tp4-1x128k model-1x32k g0-1x32k
ab_table
echo "[$SECONDS s] done" | tee -a $R
