#!/usr/bin/env bash
# Session 43, call 4 (~4 min; carry .deps .ab; setup `scripts/ab_base.sh main` at 9b1b308): the
# chain's state prologue with every row load issued before any is used (one loop per pool type,
# no branch inside: main branched around each load, so each 16-bit load waited for the one before
# it; 256x64/bf16state h 1.59 ms against the fp32 pool's 0.69). Lines bitwise base's; A/B timed.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
: "${GDN_BUDGET_S:=270}"
source docs/prepared/ab_lib.sh
R=$OUT/summary.txt
GDN_AB_CASES=none bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
SIDES=(base new)
for side in "${SIDES[@]}"; do
  timeout 60 "$(bin_of $side)" --only pool >/tmp/p_$side.log 2>&1
  echo "check pool $side rc=$? $(tail -1 /tmp/p_$side.log)" | tee -a $R
  timeout 60 "$(bin_of $side)" --quick --only "fast,ckpt" >/tmp/q_$side.log 2>&1
  echo "check quick fast,ckpt $side rc=$? $(tail -1 /tmp/q_$side.log)" | tee -a $R
done
for f in p q; do
  diff <(grep -E '^(ok|FAIL)' /tmp/${f}_base.log) <(grep -E '^(ok|FAIL)' /tmp/${f}_new.log) >/dev/null &&
    echo "$f: lines bitwise base's ($(grep -cE '^(ok|FAIL)' /tmp/${f}_new.log))" | tee -a $R || echo "$f: lines DIFFER" | tee -a $R
done
for round in 1 2; do
  for c in 256x64/bf16state 64x256/bf16state 8x1k/bf16state 256x64 1x32k/bf16state; do
    for side in "${SIDES[@]}"; do
      [[ $(left) -gt 40 ]] || break 3
      echo "$side $c $(timeout 30 "$(bin_of $side)" --bench --no-check --profile --case $c 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >>$OUT/ab.log
    done
  done
done
ab_table
grep phases $OUT/ab.log | sed -E 's/^(\S+) .*(phases.*)/\1 \2/' | head -10 | tee -a $R
OK=("${SIDES[@]}")
ab_sanitize new racecheck "pool" $((GDN_BUDGET_S - 5))
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
