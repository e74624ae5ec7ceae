#!/usr/bin/env bash
# Session 37, call 3: the o side's k-steps at K = V = 64 (kKS through chain_o.cuh), A/B against HEAD (.ab) and the D = 64 quick cases.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k/d64 4x8k/d64 8x1k/d64 256x64/d64 64x256/d64 1x32k" bash scripts/device.sh build,ab > $OUT/device_ab.txt 2>&1
tail -14 $OUT/device_ab.txt
BIN=build-device/tools/cuda_check/gdn_cuda_check
timeout 60 $BIN --quick --only " 64,128 split,128 g=0" > $OUT/quick.log 2>&1; grep -E "^FAIL|PASSED|FAILED| 64 " $OUT/quick.log | head -40
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 $BIN --quick --only "fast bf16 64 split many,fast fp16 64 serial" > $OUT/race.log 2>&1; echo "racecheck rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log)"
