#!/usr/bin/env bash
# Session 22, device call 1 (prepared in session 21): the four s22 patches in one call. Here first, on main:
#   git apply docs/prepared/s22_chain_o_two_copies.patch && git commit -qam "..." &&
#   git apply docs/prepared/s22_precise_queued.patch && git commit -qam "..." &&
#   git apply docs/prepared/s22_negligible_transitions.patch && git commit -qam "..." &&
#   git apply docs/prepared/s22_even_split.patch && git commit -qam "..." &&
#   scripts/ab_base.sh <main before all four>
# then run with carry .ab .deps as `bash docs/prepared/device_s22.sh <commit>`. Phases separate them: the two copies
# touch only the fused o warpgroup (1x32k's h phase back from 0.819 to ~0.80?), the queued lo passes only chunks
# that decay weakly (g0-1x32k, model-1x32k: h phase down, predicted -10 to -20%), the negligible history only
# the split's summary pass and scan (the TP slices: tp8-1x32k ~0.15 ms, tp4-1x32k ~0.24, tp4-1x128k ~0.80; 1x32k/split2, equal
# parts, for comparison), the even split 1x32k / 1x4k on the bench's gates (h ~0.80 -> ~0.57 ms on 1x32k). The
# first two keep every output bit; the last two move the split cases' (their part boundary, the history they drop:
# differences at the level of rounding), so the quick check's diff against the base lists those only. Revert
# whichever commit measures slower.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 1x4k 1x32k/split2 model-1x32k g0-1x32k 4x8k tp8-1x32k tp4-1x32k tp4-1x128k 8x1k" scripts/device.sh build,ab > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -11 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | head -20 | cut -c1-100
B=build-device/tools/cuda_check/gdn_cuda_check
BB=/tmp/ab-base/build/tools/cuda_check/gdn_cuda_check
timeout 100 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(grep -E '^(PASSED|FAILED)' $OUT/quick.log)"; grep -E '^FAIL' $OUT/quick.log | head
timeout 100 $BB --quick > /tmp/quick_base.log 2>&1
diff <(grep -E '^(ok|FAIL)' /tmp/quick_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) > $OUT/extra.log; echo "[$SECONDS s] quick diff base/new: $(grep -c '^[<>]' $OUT/extra.log) lines (expect only split cases: their cut and their 2-part boundary move)"; head -12 $OUT/extra.log
for spec in "memcheck:g=0,gates x,split" "racecheck:g=0 long,split 4" "synccheck:g=0 long,split 4"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((420 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" >> $OUT/extra.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/extra.log | tail -1)"
done
left=$((560 - SECONDS)); [[ $left -gt 20 ]] && (cd build-device && timeout $left ctest -R 'forward_gpu|checkpoints_gpu|stages_gpu' --output-on-failure > $OUT/ctest.log 2>&1; echo "[$SECONDS s] ctest rc=$?"; grep -E 'tests passed|Failed|Passed|\*\*\*' $OUT/ctest.log | tail -6)
