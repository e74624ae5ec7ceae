#!/usr/bin/env bash
# session 20 device call 1 (prepared in session 19). First, here: `git apply docs/prepared/s20_kkt_balance.patch
# docs/prepared/s20_split_overlap.patch`, commit both on main (two commits), `scripts/ab_base.sh <main before>`; carry .ab .deps.
# GPU suites; A/B with phases (prep = kkt balance; h = the split overlap on 1x32k, 1x4k, 1x128k; 4x8k, 8x1k, 256x64
# only kkt); the quick check of this tree AND of the base, diffed (kkt should be bitwise: every row but the new
# 2-part split case identical); sanitizers on kkt and the 2-part split; rows /split2 (equal parts + overlap), 256x64/fused
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 1x4k 1x128k 4x8k 8x1k 256x64" scripts/device.sh build,test,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
grep -E 'Failed|tests passed' $OUT/ctest.log 2>/dev/null | tail -6
tail -8 $OUT/ab.log
B=build-device/tools/cuda_check/gdn_cuda_check
BB=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
timeout 100 $BB --quick > /tmp/quick_base.log 2>&1
diff <(grep -E '^(ok|FAIL)' /tmp/quick_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) > $OUT/extra.log; echo "[$SECONDS s] quick diff base/new: $(grep -c '^[<>]' $OUT/extra.log) lines (expect only the new 2-part case)"; head -8 $OUT/extra.log
for spec in "memcheck:fast bf16 128 split 2 parts,fast bf16 128,fast fp16 128 kmajor" "racecheck:fast bf16 128 split 2 parts,fast bf16 128" "synccheck:fast bf16 128 split 2 parts,fast bf16 128"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((530 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" >> $OUT/extra.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/extra.log | tail -1)"
done
for c in 1x32k/split2 1x128k/split2 256x64/fused; do
  [[ $SECONDS -gt 575 ]] && break
  echo "== $c" >> $OUT/extra.log; timeout 20 $B --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench |phases' >> $OUT/extra.log
done
echo "[$SECONDS s] rows"; grep -E '^bench|phases' $OUT/extra.log
