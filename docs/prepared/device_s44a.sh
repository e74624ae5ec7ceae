#!/usr/bin/env bash
# Session 44's first call (prepared in session 43; ~9 min; carry .deps .whl .peers): (1) the
# check tool's timings of the state-pool rows after `dca8275` (the chain's prologue loads, one loop
# per pool type: 256x64 with an fp32 pool not timed since), also V-major (/vstate, /bf16vstate:
# the serving engines' layout, never timed; its loads and stores step 2 elements along a row where
# K-major's step 8 along a row, so it may trail K-major), (2) the thin margins against FlashQLA:
# bench_gpu.py's model-gate rows (model-4x8k and model-tp4-1x32k never measured against a peer)
# and 64x256 / 256x64, (3) with what is left, test_gpu_large (session 43's 100 s stopped it).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=570}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
bash scripts/device.sh build,pybuild >$OUT/device_build.txt 2>&1
grep -E 'build:|pip' "$OUT/device_build.txt" | tail -2 | tee -a $R
B=$(bin_of new)
for c in 256x64 256x64/bf16state 256x64/vstate 256x64/bf16vstate 64x256 64x256/bf16state 64x256/bf16vstate 1x32k/bf16vstate; do
  echo "$c $(timeout 40 $B --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $R
done
GDN_BENCH_ARGS="--no-decode --no-serving --cases model-1x32k,model-4x8k,model-tp4-1x32k,64x256,256x64" \
  GDN_BENCH_BUDGET=280 GDN_BENCH_TIMEOUT=330 bash scripts/device.sh bench >$OUT/device_bench.txt 2>&1
tail -9 "$OUT/bench.log" | tee -a $R
# (what is left of the call: test_gpu_large needs ~100-150 s)
[[ $(left) -gt 40 ]] && ab_gpu_suites 'CUDA*' $(($(left) - 10)) test_gpu_large
rm -f "$OUT/build.log"
echo "[$SECONDS s] done" | tee -a $R
