#!/usr/bin/env bash
# Session 43, call 3 (~8 min; carry .deps .whl .peers): s42_pool16_in_place.patch (applied here; call
# 2 measured it bitwise main's on 86 lines, 256x64/bf16state 2.049 -> 1.691 ms, but still ~0.9 ms
# above the fp32 pool's 0.79: the phases of both say where) sanitized on the pool cases; then
# bench_gpu.py's K = 256 rows against fla (the split landed in f89dce0) and the model-gate rows
# against fla and FlashQLA (never measured), with the patch in (every line bitwise main's).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=560}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
apply_prepared_patch docs/prepared/s42_pool16_in_place.patch src/cuda/core/checkpoints.cuh store_chain_state_as >/tmp/apply.txt ||
  { cat /tmp/apply.txt; exit 1; }
bash scripts/device.sh build,pybuild >$OUT/device_build.txt 2>&1
cat /tmp/apply.txt >>$R
B=$(bin_of new)
for c in 256x64/bf16state 256x64 64x256/bf16state 64x256; do
  echo "$c $(timeout 40 $B --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $R
done
OK=(new)
for tool in racecheck memcheck; do ab_sanitize new $tool "pool bf16,pool fp16" 200; done
GDN_BENCH_ARGS="--no-decode --no-serving --cases tp4-1x32k_K256,tp8-1x32k_K256,8x1k_K256,64x256_K256,model-tp4-1x32k,model-4x8k" \
  GDN_BENCH_BUDGET=240 GDN_BENCH_TIMEOUT=$((GDN_BUDGET_S - SECONDS - 10)) bash scripts/device.sh bench >$OUT/device_bench.txt 2>&1
tail -9 "$OUT/bench.log" | tee -a $R
rm -f "$OUT/build.log"
echo "[$SECONDS s] done" | tee -a $R
