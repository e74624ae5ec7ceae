#!/usr/bin/env bash
# Session 25, device call 1 (prepared in session 24): five changes that keep the arithmetic, timed in four steps,
# in one call (~9 min). Here first, on main:
#   M=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_o_store16.patch
#   git am -3 -q docs/prepared/s25_o_flush_later.patch
#   git am -3 -q docs/prepared/s25_o_issue_uniform.patch;   A=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_fwd_o_addr.patch;        B=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_kkt_gates_first.patch;   C=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_prefetch_no_select.patch
#   scripts/ab_base.sh $M $A $B $C
# then run with carry .ab .deps as `bash docs/prepared/device_s25.sh <commit>`. Columns: base = main, v1 = + the fused
# o warpgroup's instruction stream (o's stores 16-byte and one chunk later, during the next P v_new; q h's and q k^T's
# wgmma descriptors in uniform registers),
# v2 = + fwd_o's copies from stepped pointers, v3 = + kkt_solve's gate loads first, new = + the chain's prefetch
# without its pointer selects.
#  1. The o warpgroup paces the fused chain (ncu, session 24: it almost never waits on an mbarrier, long_sb 2% of
#     its samples, while the chain warpgroup waits 15.5% of its own at B1 for it). Its o stores sat on its path right
#     after the P v_new wait: four 4-byte STG.E per 16-byte piece (ptxas' lowering of `*(uint4*)dst = x` there), each
#     behind the LDS.128 of the staging (~8% of the o warpgroup's samples). v1: STG.E.128, and the loads and stores
#     of o_{c-1} issued right after P v_new_c's wgmmas, before its wait (SASS checked: no C7518, 236 registers);
#     and the 16 wgmmas of q h and q k^T from descriptors in uniform registers (a broadcast stage index: R2UR in the
#     bf16 kernel 100 -> 40, the products nearly back to back; ncu had 3050 + 3384 samples on their issue).
#     Predicted 2-8% on the fused cases (1x32k, 4x8k, 8x1k, tp4-1x32k); fwd_o's stores (256x64) too.
#  2. fwd_o's copies (v2): the load phase 746 -> 341 SASS instructions, straight-line (session 24's kkt_solve change of
#     the same kind: prep -11%). fwd_o runs on 256x64 (o 0.263 ms): o -5 to -15% predicted there.
#  3. kkt_solve (v3): the gates' loads ahead of k's copies (the first barrier, 8.4% of kkt's stall samples, waits for
#     them): prep -1 to -3%.
#  4. The no-select prefetch (new): 248 -> 184 instructions per prefetch (SASS, session 23); 0-2% on the chain-bound
#     cases, or a loss like the pair's of session 24 (prefetch moved + no selects: -2 to -4%; then the move was not the
#     whole story). memcheck must stay clean on the ragged cases (pointers past T with a source size of 0).
# All keep the arithmetic: the quick check must not differ from base's (0 lines).
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k 8x1k 256x64 tp4-1x32k" scripts/device.sh build,ab,quick > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -25
B=build-device/tools/cuda_check/gdn_cuda_check
for v in base; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
for v in base; do
  echo "[$SECONDS s] quick $v vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_$v.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' $OUT/quick.log)"
done
for spec in "memcheck:fast" "racecheck:fast" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
