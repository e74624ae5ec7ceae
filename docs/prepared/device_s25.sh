#!/usr/bin/env bash
# Session 25, device call 1 (prepared in session 24): three changes that keep the arithmetic, timed in three steps,
# in one call (~9 min). Here first, on main:
#   M=$(git rev-parse --short HEAD)
#   git am -q docs/prepared/s25_fwd_o_addr.patch;          A=$(git rev-parse --short HEAD)
#   git am -q docs/prepared/s25_kkt_gates_first.patch;     B=$(git rev-parse --short HEAD)
#   git am -q docs/prepared/s25_prefetch_no_select.patch
#   scripts/ab_base.sh $M $A $B
# then run with carry .ab .deps as `bash docs/prepared/device_s25.sh <commit>`. Columns: base = main, v1 = + fwd_o's
# copies from stepped pointers (the load phase 746 -> 341 SASS instructions, straight-line; rows from chunk_rows),
# v2 = + kkt_solve's gate loads issued before k's copies (the first barrier, 8.4% of kkt's stall samples, waits for
# them), new = + the chain's prefetch without its pointer selects (alone: session 24 timed it only together with the
# prefetch moved into the -U^T shadow, which lost 2-4%).
#  1. fwd_o runs on 256x64 (o 0.263 ms) and 64x256: the same copies with ~70% fewer instructions in fwd_o's load
#     phase (session 24's kkt_solve change of the same kind: prep -11%). Predicted o -5 to -15% on 256x64.
#  2. kkt_solve: prep -1 to -3% (the gates' ~1 us latency behind the k copies' issue).
#  3. The no-select prefetch: 248 -> 184 instructions per prefetch (SASS, session 23); 0-2% on the chain-bound
#     cases, or a loss like the pair's (then the move was not the whole story). memcheck must stay clean on the
#     ragged cases (pointers past T with a source size of 0).
# All three keep the arithmetic: the quick checks must not differ (0 lines).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k 8x1k 256x64 64x256 tp4-1x32k" scripts/device.sh build,ab,quick > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -24
B=build-device/tools/cuda_check/gdn_cuda_check
for v in base v1 v2; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
for v in base v1 v2; do
  echo "[$SECONDS s] quick $v vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_$v.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' $OUT/quick.log)"
done
for spec in "memcheck:fast" "racecheck:fast" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
