#!/usr/bin/env bash
# Session 38 (prepared in session 37; ~4 min; carry .deps .ab): fp16 operands for bf16 inputs at
# K = V = 64 by default (s37_d64_fp16_operands.patch: the chain's <__half, __nv_bfloat16> kDK = 64
# kernels compiled by default, heuristics.h's fp16_operands at D = 64; compiled without spills in
# session 37, never run). Setup: `scripts/ab_base.sh main && git apply
# docs/prepared/s37_d64_fp16_operands.patch` (with s37_d64_n64.patch too if that one landed: they
# apply together). Decides: the D = 64 rows' cost (D = 128 measured +5.5% on the SPEC's gates in
# session 36) against err_o ~1.7e-3 instead of 2.3-2.4e-3 (the quick set's D = 64 bf16 lines).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k/d64 4x8k/d64 8x1k/d64 256x64/d64 64x256/d64 model-1x32k/d64" bash scripts/device.sh build,ab > $OUT/device_ab.txt 2>&1
tail -10 $OUT/device_ab.txt
BIN=build-device/tools/cuda_check/gdn_cuda_check
timeout 60 $BIN --quick --only " 64" > $OUT/quick.log 2>&1
grep -E "^FAIL|PASSED|FAILED|fast .* 64 |ckpt .* 64 |prefill pool .* 64" $OUT/quick.log | head -30
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $BIN --quick --only "fast bf16 64 split many,fast bf16 64 g=0" > $OUT/race.log 2>&1
echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log)"
(cd build-device && timeout 150 ctest -L gpu -R "heuristics|forward|checkpoints" --output-on-failure) > $OUT/ctest.log 2>&1
echo "ctest: $(grep -E 'tests passed|tests failed' $OUT/ctest.log)"
