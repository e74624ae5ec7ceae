#!/usr/bin/env bash
# Session 29, call 2 (~8 min; carry .ab .deps): call 1 measured q k^T after the chain's v_new
# (x_s29_qk_after_v) at h -3 to -5% and q's norms by a third warpgroup (s29_norm_wg) at prep -17%
# but h +8% alone. Here the two together (the 4-byte spill the stack had is gone: split_part_begin
# widens chunks_per_part as unsigned), with and without P by tiles (s29_p_tiles). Sides:
#  base: main. v1: qk_after_v alone. v2: norm_wg + qk_after_v. new: v2 + p_tiles.
# Then the quick lines of v2 and new against main's (bitwise equal expected) and the sanitizers on new.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 new)
ab_smoke 8x1k 1x32k
AB_PHASES=1 ab_time 300 1x32k 4x8k 64x256 8x1k 256x64
ab_table v2/v1 new/v2
grep -E '^\S+ (1x32k|4x8k) .*phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+' | paste - - | tee -a $OUT/summary.txt
REF=bench/results/h200_s28_quick_84a1093.log
lines() { grep -E '^(ok|FAIL)' $1; }
n=$(lines $REF | wc -l)
for side in v2 new; do
  has_side $side || continue
  timeout 60 $(bin_of $side) --quick > /tmp/q_$side.log 2>&1
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' /tmp/q_$side.log) FAIL, of $n reference lines $(diff <(lines $REF) <(lines /tmp/q_$side.log | head -$n) | grep -c '^[<>]') differ (0 expected)" | tee -a $OUT/summary.txt
done
for f in /tmp/q_v2.log /tmp/q_new.log; do echo "== $f"; cat $f 2>/dev/null; done > $OUT/quick_all.log
ab_sanitize new synccheck "vmajor pool fused,split 2 parts fused,140 seqs fused" 470
ab_sanitize new racecheck "ckpt bf16 128 vmajor oob fused,split 4 parts,gates x2 fused" 520
ab_sanitize new memcheck "fused,split,140 seqs,odd stride" 560
