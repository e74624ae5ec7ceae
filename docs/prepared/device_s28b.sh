#!/usr/bin/env bash
# Session 28 (prepared in session 27, ~6 min): the unfused o's P v_new with v_new's lo part on weakly
# decaying chunks (s28_vnew_lo.patch). Here first, on main (after what call 1 landed; the patch applies
# on main and on the TMA stack):
#   M=$(git rev-parse --short HEAD); git checkout -b s28b
#   git am -3 -q docs/prepared/s28_vnew_lo.patch
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s28b.sh <commit>`. Sides:
#  base: main.
#  new:  + the store chain stages E(v_new - E(v_new)) of weakly decaying chunks (precise_state_chunk)
#        in the chunk's free v input stage and bulk-stores it beside v_new (b.v_new_lo); fwd_o, deciding
#        from the same eg, loads it into k's dead rows and adds P_hi v_new_lo. The model
#        (emulate_roundings.py --set W=hilo,vs=hilo,vnew_o=hilo): one-chunk sequences at g = 0
#        2.39-2.46e-3 -> 1.73-1.79e-3 (the quick check's "fast bf16 128 g=0 one-chunk", held to 2.4e-3),
#        "g=0 long unfused" 2.60e-3 -> ~2.46e-3. Ordinary chunks: bitwise unchanged (no lo pass), one
#        branch and two eg loads more per fwd_o block: 256x64, 64x256, 1x3k within noise; g0-1x3k
#        pays the third pass on its unfused o.
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 256x64 1x3k g0-1x3k
ab_time 280 256x64 64x256 1x3k g0-1x3k 8x1k
ab_table
ab_quick base new
# fwd_o reads b.v_new_lo only where the chain wrote it: initcheck says whether the two decisions agree.
ab_sanitize new initcheck "g=0 one-chunk,g=0 long unfused,gates x0.01,gates x2,split 2 parts" 560
ab_sanitize new memcheck "g=0 one-chunk,g=0 long unfused,gates x0.01" 560
ab_sanitize new racecheck "g=0 one-chunk,gates x0.01" 560
ab_sanitize new synccheck "g=0 one-chunk,g=0 long unfused" 560
