#!/usr/bin/env bash
# The chain's chunk body in two copies (prepared in session 26, ~5 min): s28_precise_body.patch on main as it is, or
# s28_precise_body_on_resets.patch once s27_precise_resets.patch has landed (the first applies on main, on
# s27_a_upper_skip and on s27_rq_chain; the second on s27_precise_resets with or without those two; neither on
# s27_rq_shadow, whose q norms sit inside the body: move its q_norms(c + 1, ...) call into chain_chunk_body.inc,
# after the -U^T commit, and regenerate). Here first:
#   M=$(git rev-parse --short HEAD); git checkout -b s28
#   git am -3 -q docs/prepared/s28_precise_body.patch        (or s28_precise_body_on_resets.patch)
#   scripts/ab_base.sh $M
# then with carry .ab .deps: `bash docs/prepared/device_s28.sh <commit>`.
# What it changes: the loop body from B1 to the chunk's end moves into chain_chunk_body.inc, included twice (a lambda
# made ptxas serialize every wgmma, C7511; textual copies do not: docs/perf.md, session 26). A weakly decaying chunk
# runs the copy with `constexpr bool precise = true`: W's lo pass in the v_new group and vs's in the update's, two
# wgmma waits fewer (each ~100-200 cycles of a ~5000-cycle precise chunk); an ordinary chunk runs the copy without
# their code or registers (the adaptive precision cost 1.6% of the ordinary chunks in session 20). Registers (bf16):
# fused 236 -> 232, store 238 -> 219, summary 225 -> 207 (on the resets patch: fused 247 -> 234). Predicted:
# g0-1x32k and model-1x32k (their slowest heads precise on every chunk) -3 to -6%, 1x32k / 4x8k 0 to -1.5%. The
# same accumulation order (each lo pass after its hi passes in the same accumulators): quick lines bitwise equal
# (on the resets patch, chunks that needed only W's lo part now take vs's too: those lines may move, all ok).
set -u
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
ab_build
SIDES=(base new)
ab_smoke 8x1k g0-1x32k 256x64
ab_time 360 g0-1x32k model-1x32k 1x32k 4x8k 8x1k 256x64
ab_table
ab_quick base new  # bitwise expected without the resets patch: no line listed
ab_sanitize new synccheck "g=0" 580
