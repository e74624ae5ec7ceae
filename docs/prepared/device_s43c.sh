#!/usr/bin/env bash
# Session 43, call 3 (prepared in session 42; ~7 min; carry .deps .ab; setup `scripts/ab_base.sh
# main`): bf16 / fp16 state pools read and written in place by the tensor-core chain
# (s42_pool16_in_place.patch, applied here: the chain's prologue widens the pool row's halfwords,
# its epilogue rounds the final row once, as the checkpoints already did; backend.cu's fp32 copy of
# the rows around the forward, state_copy.cu, deleted). main pays a gather (read 16-bit, write
# fp32), the chain's fp32 read and write, and a scatter (read fp32, write 16-bit): on 256x64 with a
# bf16 pool ~2.1 GB, ~0.45 ms on a ~0.76 ms call; 64x256 ~0.11 ms. Every line should be bitwise
# main's (the widening is exact, the rounding the same round-to-nearest-even).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=500}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt  # (ab_lib's helpers write there too)
apply_prepared_patch docs/prepared/s42_pool16_in_place.patch src/cuda/core/checkpoints.cuh store_chain_state_as >/tmp/apply.txt
rc=$?
cat /tmp/apply.txt
[[ $rc == 0 ]] || exit 1
# (device.sh writes summary.txt afresh with its build and ab lines: what comes before goes after it.)
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
cat /tmp/apply.txt >>$R
SIDES=(base new)
for side in "${SIDES[@]}"; do
  timeout 120 "$(bin_of $side)" --only "fast,ckpt" >/tmp/cp_$side.log 2>&1
  echo "check $side rc=$? $(tail -1 /tmp/cp_$side.log)" | tee -a $R
done
diff <(grep -E '^(ok|FAIL)' /tmp/cp_base.log) <(grep -E '^(ok|FAIL)' /tmp/cp_new.log) >/dev/null &&
  echo "new: every prefill line bitwise base's ($(grep -cE '^(ok|FAIL)' /tmp/cp_new.log) lines)" | tee -a $R ||
  { echo "new: lines DIFFER" | tee -a $R; diff /tmp/cp_base.log /tmp/cp_new.log | head -8 | cut -c1-160 | tee -a $R; }
for round in 1 2; do
  for c in 256x64/bf16state 64x256/bf16state 8x1k/bf16state 1x32k/bf16state 256x64 64x256; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 200 ]] || break 3
      echo "$side $c $(timeout 40 "$(bin_of $side)" --bench --no-check --case $c 2>&1 | grep -E '^bench ' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
ab_gpu_suites 'CUDA*:CrossBackend*' 100 test_forward test_checkpoints test_token_states test_gpu_large
OK=("${SIDES[@]}")  # (ab_sanitize's sides: both built)
for tool in racecheck memcheck; do ab_sanitize new $tool "pool bf16,pool fp16" $((GDN_BUDGET_S - 15)); done
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
