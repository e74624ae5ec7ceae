#!/usr/bin/env bash
# Session 49's prepared A/B (~6 min; carry .deps .ab, .ab = `scripts/ab_base.sh main`):
# s50_scan_multicast.patch (applied here) against main. The split scan's M_p copied once a cluster
# of a head's column blocks (up to 8) by the TMA engine, multicast into every CTA's stage, instead
# of once a block by cp.async (8.4 MB a step out of L2 at HV = 8 and 8 columns -> ~1 MB); the
# cluster barrier at each step's end. Run it after device_s50_checks.sh's column sweep, and only
# if the sweep says the step with M_p is bound by its copies (it shrinks with the columns' blocks).
# Expected: the step with M_p ~3 -> ~1-1.5 us (model-tp4-1x32k's scan 0.022 -> ~0.010 ms, /parts16
# 0.046 -> ~0.020), no change where M_p is negligible (tp4 / tp8 on the SPEC's gates: a cluster
# barrier a step added); the split lines bitwise main's (the same sums in the same order).
: "${GDN_BUDGET_S:=360}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s50_scan_multicast.patch src/cuda/chunk/split_scan.cu 'bulk_load_multicast'
SIDES=(base new)
ab_smoke tp8-1x32k model-tp4-1x32k
ab_lines "split" 40 "${OK[@]}"  # (expected: no line moved)
has_side new && { ab_run_suite 'CUDA*' 120 test_forward & ab_run_suite 'CUDA*' 120 test_checkpoints & }
ONLY="bf16 128 split 4 parts,bf16 64 split many parts,ckpt bf16 128 split"
for tool in racecheck synccheck memcheck; do ab_sanitize new $tool "$ONLY" $((SECONDS + 40)); done
wait
ab_suite_report test_forward test_checkpoints
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 10)) model-tp4-1x32k model-tp4-1x32k/parts16 tp8-1x32k tp4-1x32k \
  model-1x32k g0-1x32k tp4-1x128k
ab_table
echo "[$SECONDS s] done" | tee -a $R
