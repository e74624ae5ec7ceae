#!/usr/bin/env bash
# Session 45's prepared timing for session 46 (~4 min; carry .deps): fp16 operands at K = V = 128
# (the CMake option GDN_FP16_OPERANDS_D128, opt-in since session 36) on the model gates. gdn trails
# FlashQLA on model-4x8k (0.94x, H100, session 45), which has no split: its h is 20% over 4x8k's,
# the lo passes on the slow heads' chunks (chain_precise.cuh). fp16 operands take no lo pass on any
# chunk (err_o ~1.7e-3), but session 36 measured the SPEC's gates +5.5% with them (model-1x32k
# -8.6%). The host cannot see the gates, so this pays only if the model rows gain more than the
# SPEC rows lose, or if a later change makes the ring's q / k conversion cheap. One build with the
# option: NAME takes fp16 operands, NAME/bf16ops the default's (`base` below), two rounds.
: "${GDN_BUDGET_S:=300}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
cmake -S . -B /tmp/b16 -DGDN_CUDA=ON -DGDN_BUILD_TESTS=OFF -DGDN_BUILD_TOOLS=ON -DCMAKE_BUILD_TYPE=Release \
  -DGDN_FP16_OPERANDS_D128=ON >$OUT/device_build.txt 2>&1 &&
  cmake --build /tmp/b16 -j"$(nproc)" --target gdn_cuda_check >>$OUT/device_build.txt 2>&1
echo "[$SECONDS s] build rc=$? warnings: $(grep -c 'warning' $OUT/device_build.txt)" | tee -a $R
B=/tmp/b16/tools/cuda_check/gdn_cuda_check
timeout 60 $B --only "fast" >/tmp/fast16.log 2>&1
echo "check fast (fp16 operands at 128) rc=$? $(tail -1 /tmp/fast16.log)" | tee -a $R
grep -E '^(ok|FAIL)' /tmp/fast16.log | grep -E ' 128' | head -12 | cut -c1-140 | tee -a $R
for round in 1 2; do
  for c in model-4x8k 4x8k model-1x32k 1x32k model-tp4-1x32k tp4-1x32k 8x1k 64x256; do
    for side in base fp16ops; do
      [[ $(left) -gt 10 ]] || break 3
      name=$c && [[ $side == base ]] && name=$c/bf16ops
      echo "$side $c $(timeout 20 $B --bench --no-check --profile --case $name 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
