#!/usr/bin/env bash
# Session 24, device call 5: kkt_solve's instruction count and its first load (two steps), the GPU suites, in one call.
# Here first: scripts/ab_base.sh 3e539e7 <the addressing commit>; run with carry .ab .deps as
# `bash docs/prepared/device_s24c.sh <commit>`. Columns: base = main 3e539e7, v1 = + k's copies and A_s's stores from
# stepped pointers (ncu at 3e539e7: 1845 instructions per warp and item, ~470 of them the k copies' and the
# stores' address arithmetic; static 4088 -> 3760), new = + each chunk's rows from one load (the plan's chunk_rows:
# one dependent L2 round trip less before the k copies and the gate loads). Same arithmetic: the quick checks
# must not differ; prep -10 to -15% predicted (kkt_solve issue-bound at 60% of the issue slots).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k 8x1k 256x64 tp4-1x32k 1x3k" scripts/device.sh build,test,ab,quick > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -24
B=build-device/tools/cuda_check/gdn_cuda_check
for v in base v1; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
for v in base v1; do
  echo "[$SECONDS s] quick $v vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_$v.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' $OUT/quick.log)"
done
for spec in "memcheck:fast" "racecheck:fast"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
