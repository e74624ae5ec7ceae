#!/usr/bin/env bash
# Session 25, device call 2 (prepared in session 24): the fused chain's B1 split (s25_b1_split.patch), alone, on what
# call 1 (device_s25.sh) landed. Here first, on main after call 1:
#   M=$(git rev-parse --short HEAD); git am -3 -q docs/prepared/s25_b1_split.patch; V=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/s25_o_scale_folded.patch; scripts/ab_base.sh $M $V
# (they apply on top of call 1's stack; without s25_o_flush_later, resolve chain_o.cuh's loop end by hand: F, not B1)
# then run with carry .ab .deps as `bash docs/prepared/device_s25b.sh <commit>` (~8 min). Columns: base = call 1's
# result, v1 = + the B1 split (same arithmetic: its quick lines must equal base's), new = + o's scale folded into q's
# row factors (32 FMUL per thread and chunk fewer in the o warpgroup, after P v_new's wait; rounding moves: the quick
# check's errors must stay where they were, ~2.2-2.6e-3 on bf16, under every case's tolerance).
# What it changes: B1 was an mbarrier of both warpgroups (256 arrivals), the o warpgroup arriving once its P v_new of
# chunk c - 1 was complete; the chain warpgroup waited there 15.5% of its samples (ncu, session 24, call 4). Now B1 is
# the chain's alone (128: chunk c landed, h_c staged; the o warpgroup only waits on it) and a third mbarrier F (the o
# warpgroup's 128) frees chunk c - 1's stage and the v staging; the chain waits on F(c) just before its prefetch, in the
# v_new products' shadow, ~500 cycles after B1. The -U^T products of chunk c then overlap the o warpgroup's P v_new of
# chunk c - 1. (If the o warpgroup paces the chain, as session 24's profile says, the gain is what the overlap lets
# the o warpgroup start earlier: B1(c) no longer waits for anything of its own.) Phases: neither warpgroup can get two phases ahead on a barrier the other waits on (B2 still joins
# them every chunk). Same arithmetic: the quick check must not differ (0 lines). racecheck and synccheck on the
# fused cases decide whether it may land.
# Predicted: h -3 to -8% on the fused cases (1x32k, 4x8k, 8x1k, tp4-1x32k, g0-1x32k), nothing on 256x64 (fwd_o).
set -u
export GDN_COMMIT=$1
scripts/device.sh build > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
B=build-device/tools/cuda_check/gdn_cuda_check
# A deadlock would hang every timed case: one smoke run first (a fused single prompt and a fused batch).
for c in 1x3k 8x1k; do
  timeout 30 $B --bench --no-check --case $c > /tmp/smoke.log 2>&1 || { echo "[$SECONDS s] smoke $c FAILED (rc=$?):"; tail -5 /tmp/smoke.log; exit 1; }
done
echo "[$SECONDS s] smoke ok"
timeout 60 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(tail -1 $OUT/quick.log | cut -c1-80)"
GDN_AB_CASES="1x32k 4x8k 8x1k tp4-1x32k g0-1x32k tp8-1x4k" scripts/device.sh ab > /dev/null 2>&1
tail -9 $OUT/ab.log
for v in base v1; do timeout 60 /tmp/ab-$v/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_$v.log 2>&1; done
echo "[$SECONDS s] quick base vs v1 (B1 split): $(diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' /tmp/q_v1.log) | grep -c '^[<>]') differing lines (0 expected)"
for f in /tmp/q_base.log $OUT/quick.log; do
  echo "  $(basename $f): $(grep -c '^FAIL' $f) FAIL, largest bf16 err_o $(grep -E '^ok +fast bf16' $f | grep -oE 'err_o=[0-9.e+-]+' | sort -t= -k2 -g | tail -1)"
done
diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | head -12 | cut -c1-150
for spec in "racecheck:fast bf16 128" "synccheck:fast" "memcheck:fast"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
