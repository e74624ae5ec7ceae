#!/usr/bin/env bash
# Session 50's second call (~2.5 min; carry .deps .ab, .ab = `scripts/ab_base.sh 8c7d1bd`): the kernel
# file's split at its final form (part_tb back in the kernel: the fused kernels' SASS as base's but
# for register numbers in the prologue) timed against 8c7d1bd, two rounds (round 1 with phases):
# the fused rows, and the summary pass's phase (its loop reorders a few instructions, as the
# serial kernels' do, which call 1 timed level). Call 1 had 1x32k +0.7% on the first form (static
# shared offsets moved).
: "${GDN_BUDGET_S:=150}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_build | tail -2 | tee -a "$R"
SIDES=(base new)
ab_smoke 1x32k
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 5)) 1x32k model-tp4-1x32k tp8-1x32k 256x64 4x8k 8x1k 64x256
ab_table
grep -E "^(base|new) .*phases" "$OUT/ab.log" | cut -c1-200 >> "$R"  # (round 1's phases)
echo "[$SECONDS s] done" | tee -a "$R"
