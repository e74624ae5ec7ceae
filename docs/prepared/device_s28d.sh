#!/usr/bin/env bash
# Session 28, call 4 (~3 min, the session's last device time): base = b5fefbb (before v_new's lo
# part), v1 = 84a1093 (the lo part: 256x64 +3.4% in call 2, though the bench's gates take no lo
# pass), new = + the decision's two decays loaded at fwd_o's start. Carry .ab .deps.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 new)
ab_smoke 256x64
AB_PHASES=1 ab_time 165 256x64 64x256 256x64
ab_table
timeout 25 $(bin_of new) --quick --only "g=0 one-chunk,g=0 long unfused,140 seqs,gates x2" 2>&1 | grep -E '^(ok|FAIL|PASSED|FAILED)' | tee -a $OUT/summary.txt
grep -E 'phases' $OUT/ab.log | grep -oE '^\S+ \S+|prep [0-9.]+  h [0-9.]+  o [0-9.]+' | paste - - | tee -a $OUT/summary.txt
