#!/usr/bin/env bash
# Session 25, device call 3 (prepared in session 24): the fused chain's producer warpgroup (s25_producer.patch), alone,
# on what calls 1 and 2 landed (it needs the B1 split: s25_b1_split.patch). Here first, on main:
#   M=$(git rev-parse --short HEAD); git am -3 -q docs/prepared/s25_producer.patch; scripts/ab_base.sh $M
# then run with carry .ab .deps as `bash docs/prepared/device_s25c.sh <commit>` (~8 min).
# What it changes (kFusedO only): 384 threads; threads 256-383 (setmaxnreg 40) fill the ring by cp.async, chunk by
# chunk, each stage once its empty mbarrier (the chain's 128 arrivals after its update, the o warpgroup's 128 after
# its P v_new) completes, announcing it full by cp.async.mbarrier.arrive.noinc (128 arrivals as the copies land); the
# chain and o warpgroups (setmaxnreg 232) wait on full[s] and then fence.proxy.async (the copies are generic-proxy
# writes their wgmmas read), instead of their own cp.async groups. The chain warpgroup loses its prefetch stretch
# (285 instructions per chunk, 28% of its ncu samples in session 24) and its copy pointers (the consumer code now
# needs ~196 registers). Phases: a stage's next fill waits for both consumers' release of its last chunk, and its next
# release needs that fill: no barrier gets two phases ahead of a waiter. Same arithmetic: 0 quick lines may differ.
# Predicted: h -10 to -25% on the fused cases once the o warpgroup's patches (call 1) have made the chain pace again.
# If racecheck reports hazards between the producer's cp.async and the consumers' reads, check whether the tool
# models cp.async.mbarrier.arrive before believing them; a real one would also show in the quick check.
set -u
export GDN_COMMIT=$1
scripts/device.sh build > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
B=build-device/tools/cuda_check/gdn_cuda_check
# A barrier mistake would hang every timed case: smoke runs first (a fused single prompt, a fused batch, a split).
for c in 1x3k 8x1k 1x32k; do
  timeout 30 $B --bench --no-check --case $c > /tmp/smoke.log 2>&1 || { echo "[$SECONDS s] smoke $c FAILED (rc=$?):"; tail -5 /tmp/smoke.log; exit 1; }
done
echo "[$SECONDS s] smoke ok"
timeout 60 $B --quick > $OUT/quick.log 2>&1; echo "[$SECONDS s] quick: $(tail -1 $OUT/quick.log | cut -c1-80)"
GDN_AB_CASES="1x32k 4x8k 8x1k tp4-1x32k g0-1x32k tp8-1x4k" scripts/device.sh ab > /dev/null 2>&1
tail -8 $OUT/ab.log
timeout 60 /tmp/ab-base/build/tools/cuda_check/gdn_cuda_check --quick > /tmp/q_base.log 2>&1
echo "[$SECONDS s] quick base vs new: $(diff <(grep -E '^(ok|FAIL)' /tmp/q_base.log) <(grep -E '^(ok|FAIL)' $OUT/quick.log) | grep -c '^[<>]') differing lines (0 expected)"
for spec in "synccheck:fast" "racecheck:fast bf16 128" "memcheck:fast"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((570 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
