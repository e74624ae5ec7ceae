#!/usr/bin/env bash
# Session 45's prepared A/B for session 46 (~4 min; carry .deps .ab; setup
# `scripts/ab_base.sh 809bdba main`): s45_vpairs_final_only.patch (applied here). Session 45 landed
# the V-major pairs (`f8c2b30`, device_s45a.sh on an H100: V-major pools -8 to -23%) with two rows
# slower, consistently over two rounds: 1x32k/bf16vstate +2.2% and 256x64/bf16state (K-major) +1.5%.
# The pairs' checkpoint path sits inside the chain loop (184 more instructions there); the patch
# keeps the element loop for the checkpoints (store_chain_state's kVPairs: on only for the final
# state, after the loop), which leaves the chain loop 17 instructions shorter than 809bdba's.
# Sides: base = 809bdba (before the pairs), v1 = main (the pairs), new = main + the patch.
# Expected: new at v1's V-major times, at base's or better on the others; lines bitwise base's.
: "${GDN_BUDGET_S:=240}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
apply_prepared_patch docs/prepared/s45_vpairs_final_only.patch src/cuda/core/checkpoints.cuh 'kVPairs' | tee -a $R
grep -q kVPairs src/cuda/core/checkpoints.cuh || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E 'build:' "$OUT/device.txt" | tail -1 | tee -a $R
SIDES=(base v1 new)
for side in "${SIDES[@]}"; do
  timeout 40 "$(bin_of $side)" --only "vmajor,pool,ckpt" >/tmp/v_$side.log 2>&1
  echo "check vmajor,pool,ckpt $side rc=$? $(tail -1 /tmp/v_$side.log)" | tee -a $R
done
for side in v1 new; do
  diff <(grep -E '^(ok|FAIL)' /tmp/v_base.log) <(grep -E '^(ok|FAIL)' /tmp/v_$side.log) >/dev/null &&
    echo "$side: lines bitwise base's ($(grep -cE '^(ok|FAIL)' /tmp/v_$side.log))" | tee -a $R ||
    echo "$side: lines DIFFER" | tee -a $R
done
OK=("${SIDES[@]}")
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 8)) 1x32k/bf16vstate 256x64/bf16state 256x64/bf16vstate 1x32k 256x64/vstate
ab_table
echo "[$SECONDS s] done" | tee -a $R
