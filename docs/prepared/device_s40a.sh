#!/usr/bin/env bash
# Session 40's K = 256 call (~7-9 min; carry .deps .whl .ab): this tree with s40_k256_chain.patch
# applied (new: K = V = 256 on the tensor cores, the storing wgmma chain with two chain warpgroups a
# block, one per half of K, exchanging their partial -U^T through shared memory; kkt_solve's Gram
# over 256 columns; fwd_o by V halves): pytest on the GPU (main's landed work plus the patch: the
# Python head-size suites run K = 256 through it), the CUDA head-size and forward suites, the check
# tool's K = 256 lines of v1 and new, memcheck and racecheck on new's K = 256 lines, and the A/B on
# the NAME/d256 rows (base = main: the FMA stages; v1 = main + s40_stages_oq.patch: the tf32 stages,
# one pass for bf16, o's q h term formed in fwd_h), new's 4x8k/d256 phases.
# Setup: `scripts/ab_base.sh main main+docs/prepared/s40_stages_oq.patch`.
# GDN_BUDGET_S (default 560 s): the steps after the C++ ones run while it lasts.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=560}"
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s40_k256_chain.patch src/cuda/chunk/chain_layout.cuh WgExchangeSmem || exit 1
# The C++ build first, then what proves the patch (suites, check lines, sanitizers), then the A/B
# and pytest as the budget allows (GDN_BUDGET_S, default 560 s).
bash scripts/device.sh build >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]|^== build|error' $OUT/device.txt | tail -4
B=build-device/tests
for t in test_head_sizes test_forward; do
  [[ $(left) -gt 60 ]] || break
  timeout 60 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*' >/tmp/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/$t.log | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|error' /tmp/$t.log | head -5
done
for side in v1 new; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --only 256 >/tmp/check256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/check256_$side.log)"
  grep -E '256' /tmp/check256_$side.log | grep -v '^decode' | head -12 | cut -c1-160
done
echo "[$SECONDS s]"
new=$(bin_of new)
if [[ $(left) -gt 60 ]]; then
  timeout 45 compute-sanitizer --tool memcheck --error-exitcode 9 $new --only "bf16 256,fp16 256" >/tmp/mem.log 2>&1
  echo "memcheck 256 rc=$? $(grep 'ERROR SUMMARY' /tmp/mem.log | tail -1)"
fi
if [[ $(left) -gt 50 ]]; then
  timeout 45 compute-sanitizer --tool racecheck --error-exitcode 9 $new --only "bf16 256,fp16 256" >/tmp/race.log 2>&1
  echo "racecheck 256 rc=$? $(grep 'RACECHECK SUMMARY' /tmp/race.log | tail -1)"
fi
if [[ $(left) -gt 40 ]]; then
  timeout 30 compute-sanitizer --tool synccheck --error-exitcode 9 $new --only "exact bf16 256" >/tmp/sync.log 2>&1
  echo "synccheck 256 rc=$? $(grep 'ERROR SUMMARY' /tmp/sync.log | tail -1)"
fi
[[ $(left) -gt 25 ]] && timeout 40 $new --bench --no-check --profile --case 4x8k/d256 2>&1 | grep -E '^bench |phases'
echo "[$SECONDS s]"
if [[ $(left) -gt 150 ]]; then
  GDN_AB_CASES="4x8k/d256 1x32k/d256" bash scripts/device.sh ab >>$OUT/device.txt 2>&1
  tail -5 $OUT/ab.log 2>/dev/null
fi
if [[ $(left) -gt 120 ]]; then
  GDN_PYTEST_TIMEOUT=$(($(left) - 60)) bash scripts/device.sh pybuild,pytest >>$OUT/device.txt 2>&1
  grep -E 'passed|failed' $OUT/pytest.log 2>/dev/null | tail -2
  grep -E 'FAILED|Error' $OUT/pytest.log 2>/dev/null | head -8
fi
[[ $(left) -gt 15 ]] && timeout 12 $new --dsmem 2>&1 | tail -4
rm -f $OUT/build.log
echo "[$SECONDS s] done"
