#!/usr/bin/env bash
# Session 44, the short call that device time left room for (~5 min; carry .deps): the final tree
# of session 43 proven on the device (its last kernel change, `dca8275`, was checked there by the
# pool and quick lines and racecheck only) and the V-major pools timed beside K-major ones (never
# timed: they decide whether s43_vmajor_pairs.patch + device_s44c.sh is worth a call).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=300}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
bash scripts/device.sh build >$OUT/device_build.txt 2>&1
grep -E 'build:' "$OUT/device_build.txt" | tail -1 | tee -a $R
B=$(bin_of new)
for c in 256x64/bf16state 256x64/bf16vstate 256x64 256x64/vstate 64x256/bf16state 64x256/bf16vstate; do
  echo "$c $(timeout 30 $B --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" | tee -a $R
done
timeout 90 "$B" --only "pool,vmajor,256 split" >/tmp/pool.log 2>&1
echo "check pool,vmajor,256 split rc=$? $(tail -1 /tmp/pool.log)" | tee -a $R
ab_gpu_suites 'CUDA*:CrossBackend*:Heuristics*' 100 test_forward test_checkpoints test_token_states
OK=(new)
ab_sanitize new memcheck "pool,256 split" $((GDN_BUDGET_S - 5))
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
