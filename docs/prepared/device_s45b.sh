#!/usr/bin/env bash
# Session 45, the issue-11 table (~9 min; carry .deps .whl .peers): bench_gpu.py's whole prefill
# case list (SPEC's cases, the TP slices, g = 0, the model gates, the short and mixed cases) side by
# side with fla 0.6 and FlashQLA 0.1.3 on one tree (last measured in full at `9b7ac61`, session 37;
# the A/B gains since are not in that table). No decode or serving rows (their last numbers stand).
: "${GDN_BUDGET_S:=560}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
bash scripts/device.sh build,pybuild >$OUT/device_build.txt 2>&1
grep -E 'build:|pip' "$OUT/device_build.txt" | tail -2 | tee -a $R
# GDN_TABLE_CASES: a comma list of bench_gpu.py's case names (session 48: the rows session 47's
# call did not reach first: model-1x32k,model-4x8k,model-tp4-1x32k,tp8-1x32k,g0-1x32k,tail-16k).
CASES_ARG=${GDN_TABLE_CASES:+--cases $GDN_TABLE_CASES}
GDN_BENCH_ARGS="--no-decode --no-serving $CASES_ARG" GDN_BENCH_BUDGET=$(($(left) - 90)) \
  GDN_BENCH_TIMEOUT=$(($(left) - 20)) bash scripts/device.sh bench >$OUT/device_bench.txt 2>&1
tail -30 "$OUT/bench.log" | tee -a $R
rm -f "$OUT/build.log"
echo "[$SECONDS s] done" | tee -a $R
