#!/usr/bin/env bash
# Session 29, call 2 (~6 min; carry .deps): the GPU suites, the Python tests on the GPU, the quick set
# and the sanitizers on what call 1 landed. `bash docs/prepared/device_s29b.sh <commit>`.
# (initcheck is left out: it reports every read of a buffer written by bulk stores, session 28.)
set -u
export GDN_COMMIT=$1 OUT=${OUT:-/tmp/gdn-out}
bash scripts/device.sh build,pybuild,test,pytest,quick 2>&1 | grep -E '^== |passed|failed|FAIL' | tail -30
CHECK=build-device/tools/cuda_check/gdn_cuda_check
san() {  # tool, cases, deadline
  local left=$(($3 - SECONDS)); [[ $left -lt 20 ]] && { echo "[$SECONDS s] skip $1"; return; }
  timeout $left compute-sanitizer --tool $1 --print-limit 4 --error-exitcode 9 $CHECK --quick --only "$2" >/tmp/san.log 2>&1
  echo "[$SECONDS s] $1 ($2) rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)"
  { echo "== $1 ($2)"; grep -E '^(ok|FAIL)|\+0x|SUMMARY' /tmp/san.log | head -40; } >>$OUT/sanitize.log
}
san synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 470
san racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 530
san memcheck "fused,split,140 seqs,odd stride" 585
