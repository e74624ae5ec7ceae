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
R=$OUT/summary.txt  # (ab_lib's helpers write there too)
apply_prepared_patch docs/prepared/s42_k256_split.patch src/cuda/chunk/heuristics.h 'p.head_v == 256 && p.num_seqs != 1' >/tmp/apply.txt
rc=$?
cat /tmp/apply.txt
[[ $rc == 0 ]] || exit 1
# (device.sh writes summary.txt afresh with its build and ab lines: what comes before goes after it.)
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
cat /tmp/apply.txt >>$R
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
ab_gpu_suites 'CUDA*:Heuristics*' 120 test_forward test_head_sizes test_heuristics
ab_table
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -18 | tee -a $R
OK=("${SIDES[@]}")  # (ab_sanitize's sides: all built)
for tool in racecheck memcheck synccheck; do ab_sanitize new $tool "256 split" $((GDN_BUDGET_S - 60)); done
for tool in racecheck memcheck; do ab_sanitize v1 $tool "fast bf16 256 g=0,fast fp16 256 vmajor" $((GDN_BUDGET_S - 15)); done
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
