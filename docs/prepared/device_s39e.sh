#!/usr/bin/env bash
# Session 40's first call (written in session 39, which got no machine: ~6-9 min; carry .deps .whl
# .ab): this tree with s40_stages_oq.patch applied (new: the tf32 stages, one pass for bf16 inputs,
# and the exact forward's fwd_h forming o's q h term instead of storing h): pytest on the GPU
# (main's landed work, not run since session 38's D = 64 patches and tiled stages, plus the
# patch), the A/B on the check tool's NAME/d256 rows (base = main, v1 = main +
# s39_stages_tf32.patch: three passes for every input, v2 = main + s39_stages_tf32_1pass.patch),
# the K = 256 correctness lines of v1, v2 and new, the stage suites, and as time allows
# racecheck, new's 4x8k/d256 phases, its kernels one by one and `--dsmem`.
# Setup: `scripts/ab_base.sh main main+docs/prepared/s39_stages_tf32.patch
# main+docs/prepared/s39_stages_tf32_1pass.patch` (REV+PATCH: the patch applied, no commit).
# GDN_BUDGET_S (default 575 s): under 500 no A/B and a shorter pytest, under 380
# the C++ checks and suites alone.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=575}"
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s40_stages_oq.patch src/cuda/stages/stages_tiled.cu kOq || exit 1
# (GDN_BUDGET_S under 500 s: no A/B, a shorter pytest.)
STEPS=build,pybuild,pytest,ab PT=200
[[ $GDN_BUDGET_S -lt 500 ]] && STEPS=build,pybuild,pytest PT=150
[[ $GDN_BUDGET_S -lt 380 ]] && STEPS=build  # (the C++ checks and suites alone)
GDN_PYTEST_TIMEOUT=$PT GDN_AB_CASES="4x8k/d256 1x32k/d256" bash scripts/device.sh $STEPS >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]|^== (build|pytest)|passed|failed' $OUT/device.txt | tail -8
tail -5 $OUT/ab.log 2>/dev/null
for side in v1 v2 new; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --only 256 >/tmp/check256_$side.log 2>&1
  echo "check 256 $side rc=$?"; grep -E '256' /tmp/check256_$side.log | head -14 | cut -c1-150; tail -1 /tmp/check256_$side.log
done
B=build-device/tests
for t in test_stages test_head_sizes; do
  timeout 60 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:CrossBackend*' >/tmp/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' /tmp/$t.log | tr '\n' ' ')"
  grep -E '^\[  FAILED|Failure|error' /tmp/$t.log | head -5
done
echo "[$SECONDS s]"
if [[ $(left) -gt 60 ]]; then
  timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_stages --gdn_gpu_suite --gtest_filter='CUDA*' >/tmp/race.log 2>&1
  echo "racecheck stages rc=$? $(grep 'RACECHECK SUMMARY' /tmp/race.log | tail -1)"
fi
if [[ $(left) -gt 45 ]]; then  # the exact forward's kernels (fwd_h with oq)
  timeout 30 compute-sanitizer --tool racecheck --error-exitcode 9 "$(bin_of new)" \
    --only "exact bf16 256" >/tmp/race2.log 2>&1
  echo "racecheck exact 256 rc=$? $(grep 'RACECHECK SUMMARY' /tmp/race2.log | tail -1)"
fi
[[ $(left) -gt 30 ]] && timeout $(($(left) - 15)) "$(bin_of new)" --bench --no-check --profile --case 4x8k/d256 2>&1 | grep -E '^bench |phases'
[[ $(left) -gt 50 ]] && timeout $(($(left) - 20)) python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]|kernels" | head -8
[[ $(left) -gt 15 ]] && timeout 12 "$(bin_of new)" --dsmem 2>&1 | tail -4
rm -f $OUT/build.log
echo "[$SECONDS s] done"
