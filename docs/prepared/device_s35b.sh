#!/usr/bin/env bash
# Session 35 (prepared in session 34, ~6 min): where the gated longest-first order's 1.1-1.4% on
# equal lengths comes from (session 34 call 1: 8x1k 0.203 -> 0.205, 1x4k 0.110 -> 0.111, 256x64
# 0.760 -> 0.768, both rounds, on cases that take the path without the order).
# On main:
#   cp docs/prepared/s35_bisect_plan.patch /tmp/ && git checkout -q -b s35b 2e657b8 &&
#     git am -3 -q /tmp/s35_bisect_plan.patch && git checkout -q main
#   scripts/ab_base.sh 2e657b8 s35b
# then with carry .ab .deps: `bash docs/prepared/device_s35b.sh <commit>`. Sides:
#  base: 2e657b8 (session 32's main: no order).
#  v1:   base + the plan kernel and Plan of 7d89a76 (the sort's code and shared memory, its fourth
#        output, __launch_bounds__(1024, 1); the order never asked for). The chains unchanged.
#  new:  main (the chains' seq_in_order / seq_shared, the unsigned HV, the order's records).
# v1 level with new: the plan kernel is the cost (look at its ncu time, `GDN_NCU_CASE=8x1k`);
# v1 level with base: the chains' prologue and epilogue are. (The unsigned HV alone on 2e657b8
# spills 12 bytes in the fused kernel, so it is no side of its own.)
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 new)
ab_smoke 8x1k 256x64
ab_time 330 8x1k 1x4k 256x64 64x256 tp8-1x4k
ab_table v1/new
