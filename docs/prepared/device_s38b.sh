#!/usr/bin/env bash
# Session 38, call 2 (prepared in session 37; ~4 min; carry .deps .ab): K = V = 64's state as an
# m64n64 accumulator (s37_d64_n64.patch: 32 floats a thread instead of 64, the update and vs's lo
# pass on k's first atom only, the ring's second atom no longer zeroed, the scan's rows past d
# idle). Setup here: `scripts/ab_base.sh main && git apply docs/prepared/s37_d64_n64.patch`; the
# tree carried is main + the patch. Compiled in session 37 (no spills), never run. Predicted: the
# chain's update ~128 of ~1470 tensor cycles a chunk on its critical path, h -3 to -8% at D = 64;
# D = 128 bitwise the same code.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k/d64 4x8k/d64 8x1k/d64 256x64/d64 64x256/d64 1x32k" bash scripts/device.sh build,ab > $OUT/device_ab.txt 2>&1
tail -10 $OUT/device_ab.txt
BIN=build-device/tools/cuda_check/gdn_cuda_check
timeout 60 $BIN --quick --only " 64" > $OUT/quick.log 2>&1
grep -E "^FAIL|PASSED|FAILED|fast .* 64 |ckpt .* 64 |prefill pool .* 64" $OUT/quick.log | head -30
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $BIN --quick --only "fast bf16 64 split many,fast fp16 64 serial" > $OUT/race.log 2>&1
echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log)"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 9 $BIN --quick --only " 64" > $OUT/mem.log 2>&1
echo "memcheck rc=$? $(grep 'ERROR SUMMARY' $OUT/mem.log)"
