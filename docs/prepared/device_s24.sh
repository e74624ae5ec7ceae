#!/usr/bin/env bash
# Session 24, device call 1 (prepared in session 23): session 23's unrun overlap removal checked, three chain patches timed in
# two steps, in one call (~9 min). Here first, on main:
#   M=$(git rev-parse --short HEAD)      # (ea8f28b or later: the overlap removal merged)
#   git apply docs/prepared/s24_prefetch_u_shadow.patch && git commit -qam "chain: the prefetch in the -U^T products' shadow"
#   git apply docs/prepared/s24_prefetch_no_select.patch && git commit -qam "chain_prefetch: rows past len by the zero-fill alone"
#   P=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s24_w_halves.patch && git commit -qam "chain: v_new's left half issued once W's first 32 tokens are formed"
#   scripts/ab_base.sh 157ca26 $M $P
# then run with carry .ab .deps as `bash docs/prepared/device_s24.sh <commit>`. Columns: base = 157ca26 (the last measured
# tree), v1 = main (three changes landed SASS-checked and never run: 176d4c8 the overlap removal, c9a9fd3 the 4-stage
# store chain removed, 55f560f kkt_solve's Gram descriptors from one WgTile), v2 = + the
# prefetch moved and its selects dropped, new = + the W halves. Call 2: `ctest -R gpu` (~3 min) at the commit kept and
# the ncu step (docs/perf.md, "Next steps 0"), then device_bench3.sh if the chain moved.
#  1. v1's three changes (dead code since 22405d6 and the same descriptors) must not move anything: the
#     A/B within noise, the quick check's lines identical to 157ca26's but for "g=0 long unfused" and "gates x2 ...",
#     which run fwd_o again (forced: fwd_o_after; 157ca26 ran them fused): err_o ~2.6e-3 there, under their 3e-3.
#  2. The prefetch in the -U^T products' shadow (SASS of the bf16 fused chain: the v_new products' shadow 390 -> ~100
#     instructions, the -U^T shadow 31 -> ~336, the critical stretch after the -U^T wait 134 -> ~116): predicted h
#     phase -2 to -4% on the chain-bound cases (1x32k, 4x8k, g0-1x32k, tp4-1x32k); 8x1k / 256x64 less. The same
#     arithmetic in the same order: the quick check must not move (0 differing lines).
#  3. (In v2 with 2.) The prefetch without its pointer selects (rows past len zero-filled by a source size of 0, the pointer passed
#     as it is, possibly past the tensor's end: ptxas's ignore-src form, which reads nothing): 248 -> 184
#     instructions per prefetch, 244 -> 240 registers; small (0-1%) unless the -U^T shadow overflows after 2.
#     memcheck must stay clean on the ragged cases (their last rows lie past T).
#  4. The W halves (new): v_new's left half (4 of the 12 wgmmas) issued once W's first 32 tokens are formed: the
#     stretch between the -U^T wait and the first v_new wgmma 116 -> 88 instructions (SASS); ~1%. Same sums.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k g0-1x32k tp4-1x32k 8x1k 256x64" scripts/device.sh build,ab,quick > /dev/null 2>&1  # (summary.txt)
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -48
B=build-device/tools/cuda_check/gdn_cuda_check
for v in base v1 v2; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
for v in base v1 v2; do
  echo "[$SECONDS s] quick $v vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_$v.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines of $(grep -cE '^(ok|FAIL)' $OUT/quick.log)"
done
for spec in "memcheck:fast" "racecheck:g=0 long,gates x2" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((560 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
