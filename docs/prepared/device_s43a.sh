#!/usr/bin/env bash
# Session 43's first call (prepared in session 42; ~9.5 min; carry .deps .ab; setup
# `scripts/ab_base.sh main main+docs/prepared/s42_fwd_o_256_both_halves.patch`):
#   v1  = main + s42_fwd_o_256_both_halves.patch: fwd_o at 256 writes both V halves in one block,
#         one after the other (P and q's norms formed once a head instead of twice, q and k loaded
#         once; 96 registers, still two blocks per SM): the o phase (4x8k/d256 1.64 ms) -5-10%;
#         every sum in main's order (its K = 256 lines bitwise main's), the D = 128 fwd_o SASS
#         byte-identical;
#   new = main + s42_k256_split.patch (applied here): K = V = 256 split in two parts for one
#         sequence at tensor-parallel head counts (the summary pass at 256 on two chain
# warpgroups, the part states 256 x 256, the even cut in the store mode at 256, no scan). Session
# 42 (H100): tp4-1x32k_K256 gdn 1.676 ms against fla 1.877, tp8 1.411 against 1.486, the chain's
# 512 chunks serial in 32 / 16 blocks (h ~1.19 ms). Expected h ~0.6-0.65 ms where the bench's gates
# let part 1 start at the middle (the summary over the 4 chunks before it), ~0.85 at g = 0 (71%).
# Every D = 64 / 128 kernel's SASS is byte-identical to main's (cubin .text), the 256 store
# kernel 247 / 250 registers, the 256 summary 218 / 224, no spills. Land each side that passes
# and gains (the two patches apply together).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=570}"
source docs/prepared/ab_lib.sh
R=$OUT/s43a.txt
apply_prepared_patch docs/prepared/s42_k256_split.patch src/cuda/chunk/heuristics.h 'p.head_v == 256 && p.num_seqs != 1' >$R
rc=$?
cat $R
[[ $rc == 0 ]] || exit 1
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -2 | tee -a $R
SIDES=(base v1 new)
for side in "${SIDES[@]}"; do
  timeout 90 "$(bin_of $side)" --only 256 >/tmp/c256_$side.log 2>&1
  echo "check 256 $side rc=$? $(tail -1 /tmp/c256_$side.log)" | tee -a $R
done
# v1: every line bitwise base's. new: the lines main's path takes (no split) bitwise; the split
# lines side by side with base's (unsplit there).
diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log) <(grep -E '^(ok|FAIL)' /tmp/c256_v1.log) >/dev/null &&
  echo "v1 K = 256 lines: bitwise base's" | tee -a $R || echo "v1 K = 256 lines DIFFER" | tee -a $R
diff <(grep -E '^(ok|FAIL)' /tmp/c256_base.log | grep -v split) <(grep -E '^(ok|FAIL)' /tmp/c256_new.log | grep -v split) >/dev/null &&
  echo "new: unsplit K = 256 lines bitwise base's" | tee -a $R || echo "new: unsplit K = 256 lines DIFFER" | tee -a $R
paste -d'\n' <(grep -E '^(ok|FAIL).*split' /tmp/c256_base.log) <(grep -E '^(ok|FAIL).*split' /tmp/c256_new.log) | cut -c1-160 | tee -a $R
for round in 1 2; do
  for c in tp4-1x32k/d256 tp8-1x32k/d256 4x8k/d256 1x32k/d256; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 230 ]] || break 3
      echo "$side $c $(timeout 40 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
B=build-device/tests
for t in test_forward test_head_sizes test_heuristics; do
  timeout 120 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:Heuristics*' >/tmp/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' /tmp/$t.log | tr '\n' ' ' | cut -c1-120)" | tee -a $R
  grep -E '^\[  FAILED  \] (CUDA|Heur)' /tmp/$t.log | head -6 | cut -c1-150 | tee -a $R
done
ab_table | tee -a $R
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -18 | tee -a $R
new=$(bin_of new)
for tool in racecheck memcheck synccheck; do
  [[ $(left) -gt 30 ]] || break
  timeout 60 compute-sanitizer --tool $tool --error-exitcode 9 $new --only "256 split" >/tmp/san.log 2>&1
  echo "$tool new 256 split rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)" | tee -a $R
done
for tool in racecheck memcheck; do
  [[ $(left) -gt 25 ]] || break
  timeout 40 compute-sanitizer --tool $tool --error-exitcode 9 "$(bin_of v1)" --only "fast bf16 256 g=0,fast fp16 256 vmajor" >/tmp/san.log 2>&1
  echo "$tool v1 256 rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)" | tee -a $R
done
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
