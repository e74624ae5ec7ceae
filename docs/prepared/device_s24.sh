#!/usr/bin/env bash
# Session 24, device call 1 (prepared in session 23): two patches timed apart in one call (~9.5 min). Here first, on main:
#   M=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s24_remove_overlap.patch && git commit -qam "fwd_o: the overlap path removed (production no longer runs it)"
#   R=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s24_prefetch_u_shadow.patch && git commit -qam "chain: the prefetch in the -U^T products' shadow"
#   scripts/ab_base.sh $M $R
# then run with carry .ab .deps as `bash docs/prepared/device_s24.sh <commit>`. Columns: base = main, v1 = the overlap
# path removed, new = + the prefetch moved.
#  1. The overlap removal (dead code since 22405d6: the heuristics never choose overlap_o) must not move anything: the
#     A/B within noise, the quick check's lines identical to main's (the same kernels minus never-taken branches).
#  2. The prefetch in the -U^T products' shadow (SASS of the bf16 fused chain: the v_new products' shadow 390 -> ~100
#     instructions, the -U^T shadow 31 -> ~336, the critical stretch after the -U^T wait 134 -> ~116): predicted h
#     phase -2 to -4% on the chain-bound cases (1x32k, 4x8k, g0-1x32k, tp4-1x32k); 8x1k / 256x64 less. The same
#     arithmetic in the same order: the quick check must not move (0 differing lines).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k g0-1x32k tp4-1x32k 8x1k 256x64" scripts/device.sh build,ab,quick > /dev/null 2>&1  # (summary.txt)
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -36
B=build-device/tools/cuda_check/gdn_cuda_check
for v in base v1; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
for v in base v1; do
  echo "[$SECONDS s] quick $v vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_$v.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' $OUT/quick.log)"
done
for spec in "memcheck:g=0,gates x,fp16 128,unfused" "racecheck:g=0 long,gates x2" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((400 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
cd build-device && timeout $((570 - SECONDS)) ctest -R gpu --output-on-failure 2>&1 | tail -6
