#!/usr/bin/env bash
# Session 31, call 2 (prepared in session 30, ~6 min; carry .deps): on what call 1 landed, the GPU
# suites, the Python tests on the GPU and the quick set, then the plan kernel's duration on the
# GPU (ncu; the phases show 0.010-0.012 ms for it in every case, event-timed outside a graph:
# 5% of 8x1k if real). `bash docs/prepared/device_s31b.sh <commit>`.
set -u
export GDN_COMMIT=$1 OUT=${OUT:-/tmp/gdn-out}
bash scripts/device.sh build,pybuild,test,pytest,quick 2>&1 | grep -E '^== |passed|failed|FAIL' | tail -30
CHECK=build-device/tools/cuda_check/gdn_cuda_check
for c in 1x32k 8x1k 256x64; do
  timeout 60 ncu --clock-control none -k regex:'plan_kernel|kkt_solve' -c 2 --section SpeedOfLight \
    $CHECK --bench --no-check --case $c > /tmp/ncu_plan_$c.log 2>&1
  echo "[$SECONDS s] $c: $(grep -E 'plan_kernel|kkt_solve_kernel|Duration' /tmp/ncu_plan_$c.log | grep -oE '(plan_kernel|kkt_solve_kernel)|Duration +[a-z]+ +[0-9.]+' | paste - - | tr '\n' ' ')" | tee -a $OUT/summary.txt
done
cat /tmp/ncu_plan_*.log > $OUT/ncu_plan.log
