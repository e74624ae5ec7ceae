#!/usr/bin/env bash
# Session 35, call 1 (prepared in session 34, ~9.5 min; carry .deps .whl): the fp32 path (fp32
# inputs on the fp16 kernels through fp16 copies, `90264ed`) through the GPU suites for the first
# time, and its timing against fla (tf32) and by the check tool (no fla autotune; beside fp16 and
# bf16 on the same case). `bash docs/prepared/device_s35a.sh <commit>`.
# Expected: ctest -L gpu and pytest pass (test_head_sizes' fp32 / fp16 mixes take the copies now, at
# 2e-3); 1x32k/fp32 ~1.2-1.3 ms against fla's 6.2 (session 34: the exact stages 94 ms), 1x4k/fp32
# ~0.17 against 0.78. Keep the JSON as bench/results/h200_fp32.json.
set -u
export GDN_COMMIT=$1
GDN_BENCH_ARGS="--no-decode --no-serving --no-flashqla --dtype fp32 --cases 1x4k,8x1k,1x32k" GDN_BENCH_BUDGET=150 \
  GDN_BENCH_TIMEOUT=240 bash scripts/device.sh build,pybuild,test,pytest,bench
for c in 1x32k/fp32 1x32k/fp16 1x32k 1x4k/fp32 8x1k/fp32; do
  timeout 30 build-device/tools/cuda_check/gdn_cuda_check --bench --no-check --case "$c" 2>&1 | grep -E '^bench ' \
    | tee -a "${OUT:-/tmp/gdn-out}/summary.txt"
done
