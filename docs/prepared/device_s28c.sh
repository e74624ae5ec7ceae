#!/usr/bin/env bash
# Session 28, call 3: the GPU suites, the Python tests on the GPU, the quick set and the sanitizers on
# what landed (the TMA ring + v_new's lo part), with deadlines that fit one call. Carry .deps.
set -u
export GDN_COMMIT=$1 OUT=${OUT:-/tmp/gdn-out}
bash scripts/device.sh build,pybuild,test,pytest,quick 2>&1 | grep -E '^== |passed|failed|FAIL' | tail -30
CHECK=build-device/tools/cuda_check/gdn_cuda_check
san() {  # tool, cases, deadline
  local left=$(($3 - SECONDS)); [[ $left -lt 20 ]] && { echo "[$SECONDS s] skip $1"; return; }
  timeout $left compute-sanitizer --tool $1 --print-limit 4 --error-exitcode 9 $CHECK --quick --only "$2" >/tmp/san.log 2>&1
  echo "[$SECONDS s] $1 ($2) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
  { echo "== $1 ($2)"; grep -E '^(ok|FAIL)|Uninit|\+0x|SUMMARY' /tmp/san.log | head -40; } >>$OUT/sanitize.log
}
san memcheck "fused,split,140 seqs,odd stride" 470
san synccheck "vmajor pool fused,split 2 parts fused" 500
san racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts" 545
# initcheck on a case with no precise chunks: does it flag the v_new images (written by bulk stores)?
san initcheck "fast bf16 128 gates x2" 575
