#!/usr/bin/env bash
# Session 51's look-ahead summary pass (~7 min; carry .deps .ab, .ab = `scripts/ab_base.sh <the commit
# sent>`): base = the tree as built by default, new = the same tree built with -DGDN_SUMMARY_AHEAD=ON
# (src/cuda/chunk/summary_ahead.cuh: the split's summary pass on two warpgroups, the state's update
# and the next chunk's U product off the chain's per-chunk path). First its correctness: the split
# lines of the quick set on both sides (new's move: other roundings, the rounding model's
# `--form lookahead`; none may FAIL), test_forward's and test_checkpoints' CUDA cases on new,
# racecheck / synccheck / memcheck on three split cases; then the split rows' phases, two rounds.
# (Ordered for a short call: the timings before the suites.)
# Expected (perf.md "Session 51"): the summary phase (sum) -20 to -40% where whole parts run it
# (model-tp4-1x32k 0.134 ms, g0-1x32k), level where the history is negligible (tp4 / tp8 on the
# SPEC's gates: 2 chunks a part).
: "${GDN_BUDGET_S:=420}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
# The wgmma groups' latencies first (tools/wgmma_probe, ~30 s): one and two warpgroups an SM.
nvcc -std=c++17 -arch=sm_90a -O3 -I include -I src --expt-relaxed-constexpr tools/wgmma_probe/wgmma_probe.cu \
  -o /tmp/wgmma_probe && timeout 60 /tmp/wgmma_probe > "$OUT/wgmma_probe.txt" 2>&1
cut -c1-150 "$OUT/wgmma_probe.txt"
GDN_CMAKE_FLAGS=-DGDN_SUMMARY_AHEAD=ON ab_build | tail -2 | tee -a "$R"
SIDES=(base new)
ab_smoke model-tp4-1x32k g0-1x32k tp8-1x32k
ab_lines "split" 60 "${OK[@]}"
# The timings next (the question the build asks), then the suites and sanitizers with what is left.
AB_PHASES=1 ab_time $((GDN_BUDGET_S / 2 + 60)) model-tp4-1x32k g0-1x32k tp8-1x32k model-1x32k tp4-1x32k \
  model-tp4-1x32k/parts16 1x32k
ab_table
grep -E "^(base|new) .*phases" "$OUT/ab.log" | cut -c1-200 >> "$R"  # (round 1's phases)
if has_side new && [[ $(left) -gt 60 ]]; then
  ab_run_suite 'CUDA*' $(($(left) - 15)) test_forward &
  ONLY="bf16 128 split 4 parts,ckpt bf16 128 split,fp16 128 split g=0"
  for tool in synccheck racecheck memcheck; do ab_sanitize new $tool "$ONLY" $((SECONDS + 40)); done
  wait
  ab_suite_report test_forward
fi
echo "[$SECONDS s] done" | tee -a "$R"
