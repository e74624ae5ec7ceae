#!/usr/bin/env bash
# Session 39 (prepared in session 38; ~4 min; carry .deps .ab): the exact stages' products on the
# tensor cores (s39_stages_tf32.patch: mma.sync m16n8k8 tf32, three products per term, lo x hi +
# hi x lo + hi x hi: ~22 significant bits, the fp32 tests' 1e-4 should hold; each warp a 16 x 32
# tile; tile strides 68 / 72 floats by how the fragments read them; fwd_h 127 registers, the others
# 58-64, no spills). Setup: `scripts/ab_base.sh main && git apply
# docs/prepared/s39_stages_tf32.patch`. An alternative to s39_stages_prefetch.patch (both rewrite
# stages_tiled.cu; time each against main, then combine the winner's ideas). Predicted (H100,
# session 38: fwd_h 15.1 ms, fwd_o 9.9, w_u 2.9, kkt 1.3 on 4x8k_K256): the products ~4x faster,
# the loads and barriers unchanged: fwd_h ~7, fwd_o ~5, 4x8k/d256 31 -> ~18 ms.
# The same steps as device_s39a.sh (the A/B on the NAME/d256 rows, the stage suites, racecheck,
# the kernels one by one), on this tree.
exec bash "$(dirname "$0")/device_s39a.sh" "$@"
