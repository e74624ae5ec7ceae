#!/usr/bin/env bash
# Session 49's leftover checks of the landed tensor-core scan (~5.5 min; carry .deps): its budget ran
# out after the split lines, racecheck and test_forward / test_checkpoints' CUDA cases (all passed,
# H100). This runs the rest on main: test_gpu_large and test_head_sizes side by side, with
# memcheck and synccheck on the check tool's split cases (4 parts, many parts at K = V = 64,
# checkpoints through the split, 2 parts) beside them.
: "${GDN_BUDGET_S:=320}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
bash scripts/device.sh build >"$OUT/device.txt" 2>&1
grep -E 'build:' "$OUT/device.txt" | tail -1 | tee -a "$R"
SIDES=(new)
ab_smoke tp8-1x32k
SUITES=(test_gpu_large test_head_sizes)
ab_gpu_suites_started 'CUDA*:CrossBackend*' $(($(left) - 80)) "${SUITES[@]}"
ONLY="bf16 128 split 4 parts,bf16 64 split many parts,ckpt bf16 128 split,bf16 128 split 2 parts"
for tool in memcheck synccheck; do ab_sanitize new $tool "$ONLY" $((GDN_BUDGET_S - 80)); done
wait
ab_suite_report "${SUITES[@]}"
# Where the scan's step with M_p goes now (perf.md "Session 49": ~3 us a step, shared memory no
# longer the bound): 8 columns a block (the default: 16 blocks of a head each copy its 64 KB M_p
# a step, 8.4 MB out of L2 at HV = 8) against 16 and 32 (half and a quarter of the copies, 2x and
# 4x the mma a block). If the step shrinks with the copies, M_p's multicast in a cluster is next.
profile_cases 10 scan_cols.log model-tp4-1x32k model-tp4-1x32k/scan16 model-tp4-1x32k/scan32 \
  model-tp4-1x32k/parts16 model-tp4-1x32k/parts16/scan16 model-tp4-1x32k/parts16/scan32 tp8-1x32k \
  tp8-1x32k/scan16 tp8-1x32k/scan32
cut -c1-220 "$OUT/scan_cols.log" >> "$R"
echo "[$SECONDS s] done" | tee -a "$R"
