#!/usr/bin/env bash
# Session 44, a second call (prepared in session 43; ~6 min; carry .deps): the GPU suites on the
# final tree of session 43. Its last kernel change (`dca8275`, the chain's state prologue: one loop
# per pool type) was checked on the device by the pool and quick fast / ckpt lines (bitwise main's)
# and racecheck only; test_forward / test_head_sizes last ran on `f89dce0` (+ the pool patch for
# test_forward). Then the full check set under memcheck on the pool and K = 256 split cases.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=540}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
bash scripts/device.sh build >$OUT/device_build.txt 2>&1
grep -E 'build:' "$OUT/device_build.txt" | tail -1 | tee -a $R
timeout 150 "$(bin_of new)" >/tmp/check_all.log 2>&1
echo "check (all cases) rc=$? $(tail -1 /tmp/check_all.log)" | tee -a $R
grep -E '^FAIL' /tmp/check_all.log | head -8 | cut -c1-160 | tee -a $R
ab_gpu_suites 'CUDA*:CrossBackend*:Heuristics*' 140 test_forward test_head_sizes test_checkpoints test_token_states
OK=(new)
for tool in memcheck synccheck; do ab_sanitize new $tool "pool,256 split" $((GDN_BUDGET_S - 10)); done
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
