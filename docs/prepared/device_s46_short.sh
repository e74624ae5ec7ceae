#!/usr/bin/env bash
# Session 46's last-minute call (~3 min; carry .deps): the part-count rows that decide most (the
# model TP4 slice, the SPEC one, model-4x8k on the serial chain) and test_forward's new model-gate
# cases on the GPU (GateKind::kModel: the split with some heads' M_p negligible, others' not).
: "${GDN_BUDGET_S:=170}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
bash scripts/device.sh build >$OUT/device_build.txt 2>&1
grep -E 'build:' "$OUT/device_build.txt" | tail -1 | tee -a $R
profile_cases 45 parts.log model-tp4-1x32k model-tp4-1x32k/parts16 model-tp4-1x32k/parts12 tp4-1x32k tp4-1x32k/parts16 \
  model-4x8k model-4x8k/serial 4x8k
timeout 40 build-device/tests/test_forward --gdn_gpu_suite --gtest_filter='CUDA*_g4*' >/tmp/tf.log 2>&1
echo "test_forward (model gates, CUDA) rc=$? $(grep -E '^\[  (PASSED|FAILED)' /tmp/tf.log | tr '\n' ' ')" | tee -a $R
grep -E 'Failure|Expected|err' /tmp/tf.log | head -6 | tee -a $R
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
