#!/usr/bin/env bash
# Session 45, first call (session 44's device_s44c.sh plus the token-state and head-size suites; ~8 min;
# carry .deps .ab; setup
# `scripts/ab_base.sh main`): s43_vmajor_pairs.patch (applied here). V-major state rows (vLLM's and
# SGLang's pools) hold each chain thread's element pairs (kk, kk + 1) side by side: the prologue
# loads them as one 8-byte (fp32) or 4-byte (bf16 / fp16) word a pair where the pair is aligned
# (every row of an unpadded pool), and store_chain_state writes the final state and checkpoints
# the same way: half the loads and stores, each instruction covering 8 rows x 16 (32) contiguous
# bytes instead of every other element. Unaligned rows (odd strides, offsets) keep the element
# loop. No spills (registers within 4 of main's). Expected: /bf16vstate and /vstate close to (or
# under) their K-major twins where they trail them (device_s44a.sh times the gap first); every
# line bitwise main's (the same values, wider accesses).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=540}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
apply_prepared_patch docs/prepared/s43_vmajor_pairs.patch src/cuda/core/checkpoints.cuh 'Pair{from_f' >/tmp/apply.txt
rc=$?
cat /tmp/apply.txt
[[ $rc == 0 ]] || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
cat /tmp/apply.txt >>$R
SIDES=(base new)
for side in "${SIDES[@]}"; do
  timeout 90 "$(bin_of $side)" --only "vmajor,pool,odd stride" >/tmp/v_$side.log 2>&1
  echo "check vmajor,pool $side rc=$? $(tail -1 /tmp/v_$side.log)" | tee -a $R
done
diff <(grep -E '^(ok|FAIL)' /tmp/v_base.log) <(grep -E '^(ok|FAIL)' /tmp/v_new.log) >/dev/null &&
  echo "new: lines bitwise base's ($(grep -cE '^(ok|FAIL)' /tmp/v_new.log))" | tee -a $R ||
  { echo "new: lines DIFFER" | tee -a $R; diff /tmp/v_base.log /tmp/v_new.log | head -8 | cut -c1-160 | tee -a $R; }
for round in 1 2; do
  for c in 256x64/bf16vstate 256x64/vstate 64x256/bf16vstate 256x64/bf16state 1x32k/bf16vstate; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 150 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
ab_gpu_suites 'CUDA*:CrossBackend*:Heuristics*' 90 test_forward test_checkpoints test_token_states
[[ $(left) -gt 150 ]] && ab_gpu_suites 'CUDA*' $(($(left) - 60)) test_head_sizes
OK=("${SIDES[@]}")
for tool in racecheck memcheck; do ab_sanitize new $tool "vmajor,odd stride" $((GDN_BUDGET_S - 5)); done
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
