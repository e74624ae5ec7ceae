#!/usr/bin/env bash
# Session 27, an optional call (prepared in session 26, ~7 min): two timing experiments that decide whether a P
# shared by a head's two slice blocks (docs/perf.md, "Next steps 0": the slice pair's P over DSMEM) is worth building.
# Here first, on main (after or instead of device_s27.sh's call; the s27 patches as it applies them):
#   git checkout -b s27b
#   git am -3 -q docs/prepared/s27_a_upper_skip.patch docs/prepared/s27_rq_chain.patch; V2=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_st2.patch;                                          ST2=$(git rev-parse --short HEAD)
#   git checkout -q -b s27c $V2
#   git am -3 -q docs/prepared/s27_rq_shadow.patch;                                      NEW=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_solp.patch;                                         SOLP=$(git rev-parse --short HEAD)
#   git am -3 -q docs/prepared/x_s27_nop.patch
#   scripts/ab_base.sh $V2 $ST2 $NEW $SOLP
# then with carry .ab .deps: `bash docs/prepared/device_s27b.sh <commit>`. Sides:
#  base (v2 of device_s27.sh: q's norms before B1), v1 = st2: the same on a 2-stage ring (165 KiB instead of 221:
#  the room a shared P's buffers need; a real variant, checked: its quick lines must equal base's), v2 = new of
#  device_s27.sh (q's norms in the -U^T shadow), v3 = solP: v2 with the o warpgroup's P gating and hi / lo split on
#  even chunks only (odd chunks reuse the last P: o WRONG, timing only), the ALU half a shared P saves; this tree =
#  noP: the same on chunk 0 only, the most any P optimization (a shared P, a P warpgroup of a 128-column design) can
#  save in the o warpgroup. Read: solP against v2 is the most a shared P can gain (before its exchange's cost); st2
#  against base is what its smem costs. Build the shared P only if solP - st2's loss is worth it (> ~5%).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base v1 v2 v3 new)
ab_smoke 8x1k 1x32k
ab_time 400 1x32k 4x8k 8x1k 64x256 tp4-1x32k
ab_table v1/base v3/v2 new/v2  # st2 / base, solP / v2, noP / v2
ab_lines "" 100 base v1  # st2 is a real variant: its err_o lines as base's
ab_sanitize v1 synccheck fused 580
