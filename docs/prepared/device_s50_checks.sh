#!/usr/bin/env bash
# Session 49's leftover checks of the landed tensor-core scan (~4 min; carry .deps): its budget ran
# out after the split lines, racecheck and test_forward / test_checkpoints' CUDA cases (all passed,
# H100). This runs the rest on main: test_gpu_large and test_head_sizes side by side, with
# memcheck and synccheck on the check tool's split cases (4 parts, many parts at K = V = 64,
# checkpoints through the split, 2 parts) beside them.
: "${GDN_BUDGET_S:=240}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
bash scripts/device.sh build >"$OUT/device.txt" 2>&1
grep -E 'build:' "$OUT/device.txt" | tail -1 | tee -a "$R"
SIDES=(new)
ab_smoke tp8-1x32k
SUITES=(test_gpu_large test_head_sizes)
ab_gpu_suites_started 'CUDA*:CrossBackend*' $(($(left) - 15)) "${SUITES[@]}"
ONLY="bf16 128 split 4 parts,bf16 64 split many parts,ckpt bf16 128 split,bf16 128 split 2 parts"
for tool in memcheck synccheck; do ab_sanitize new $tool "$ONLY" $((GDN_BUDGET_S - 15)); done
wait
ab_suite_report "${SUITES[@]}"
echo "[$SECONDS s] done" | tee -a "$R"
