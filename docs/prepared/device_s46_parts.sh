#!/usr/bin/env bash
# Session 45's prepared sweep for session 46 (~3 min; carry .deps): the exact split's part count
# (check tool NAME/partsNN: NN equal parts, o fused, the rest of the config as choose_split derives
# it) where gdn trails FlashQLA: the model gates (session 45, H100: model-tp4-1x32k 0.385 ms against
# FlashQLA's 0.350, model-1x32k 1.114 / 1.114; their slow heads keep M_p, so the summary pass runs
# every middle part in full: tp4's 8 parts put 16 x 13 = 208 summary blocks on 132 SMs, two waves
# of 64 chunks). FlashQLA cuts such a sequence into ~16-chunk segments (PEERS.md). The defaults
# (tp4 8 parts, tp8 16, HV = 32 2) are timed beside; the SPEC's gates (tp4-1x32k, tp8-1x32k) show
# what more parts cost where the history is negligible. A heuristics change follows only if one
# part count wins on both gate kinds (the host cannot see the gates). The phases split h into the
# summary pass (sum), the scan and the chain (h) where there are 3+ parts (`--profile`, new in
# session 45): how the part count moves each. Last (session 46): model-4x8k (no split: 256 blocks
# in two waves, any SM with a slow head's block runs two) on the serial chain (two blocks an SM)
# and with o unfused, against 4x8k's.
: "${GDN_BUDGET_S:=240}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
bash scripts/device.sh build >$OUT/device_build.txt 2>&1
grep -E 'build:' "$OUT/device_build.txt" | tail -1 | tee -a $R
profile_cases 10 parts.log model-tp4-1x32k model-tp4-1x32k/parts4 model-tp4-1x32k/parts12 model-tp4-1x32k/parts16 \
  model-tp4-1x32k/parts24 model-tp4-1x32k/parts32 tp4-1x32k tp4-1x32k/parts12 tp4-1x32k/parts16 \
  tp4-1x32k/parts24 tp4-1x32k/parts32 tp8-1x32k tp8-1x32k/parts24 tp8-1x32k/parts32 \
  model-1x32k model-1x32k/parts3 model-1x32k/parts4 1x32k/parts3 1x32k/parts4 \
  model-4x8k model-4x8k/serial model-4x8k/seq 4x8k 4x8k/serial
rm -f $OUT/build.log
echo "[$SECONDS s] done" | tee -a $R
