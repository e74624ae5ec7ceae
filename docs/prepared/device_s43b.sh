#!/usr/bin/env bash
# Session 43, call 2 (~5 min; carry .deps .whl): the K = 256 tensor-parallel and short-sequence
# rows against fla 0.6 (8x1k_K256 and 64x256_K256 never measured against it)
# with s42_k256_split.patch (applied here; bench_gpu.py's by-name rows tp4-1x32k_K256 and
# tp8-1x32k_K256; session 42 without the split, H100: 1.676 / 1.411 ms against fla 1.877 / 1.486).
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s42_k256_split.patch src/cuda/chunk/heuristics.h 'p.head_v == 256 && p.num_seqs != 1' || exit 1
bash scripts/device.sh build,pybuild >"$OUT/device_build.txt" 2>&1
grep -E 'build:|pip' "$OUT/device_build.txt" | tail -2
GDN_BENCH_ARGS="--no-decode --no-serving --no-flashqla --cases tp4-1x32k_K256,tp8-1x32k_K256,8x1k_K256,64x256_K256" \
  GDN_BENCH_BUDGET=200 GDN_BENCH_TIMEOUT=$((285 - SECONDS)) bash scripts/device.sh bench >"$OUT/device_bench.txt" 2>&1
tail -8 "$OUT/bench.log"
rm -f "$OUT/build.log"
echo "[$SECONDS s] done"
