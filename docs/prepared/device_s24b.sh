#!/usr/bin/env bash
# Session 24, device call 2 (prepared in session 23), at the commit kept after call 1 (device_s24.sh): the GPU suites, and
# where the fused chain's warps stall per SASS instruction (Nsight Compute, 1x32k). Run with carry .deps as
# `bash docs/prepared/device_s24b.sh <commit>` (~8 min). The Python GPU tests (device.sh's pybuild,pytest steps, ~4 min)
# did not run in session 23: give them a call of their own, or the rest of the bench3 call.
# Read ncu_stalls.txt for the chain warpgroup's per-chunk waits (docs/perf.md, "Next steps 0", call 2):
#  - at B1's SYNCS.PHASECHK.TRYWAIT: the chain waits for the o warpgroup's arrival (its P v_new after B2);
#  - at the three WARPGROUP.DEPBAR waits (-U^T, v_new, update): tensor time, and how much of it the o warpgroup's
#    q h / q k^T (issued at the same B1) and P v_new (beside the update) add;
#  - "no instruction" / dispatch stalls between them: the chain's ALU stretches (the critical ones).
set -u
export GDN_COMMIT=$1
scripts/device.sh build,test,ncu > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
head -60 $OUT/ncu_stalls.txt 2>/dev/null | cut -c1-200
