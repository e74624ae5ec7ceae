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
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
GDN_AB_CASES="4x8k/d256 8x1k/d256 1x32k/d256" bash scripts/device.sh build,pybuild,ab > $OUT/device_ab.txt 2>&1
tail -6 $OUT/device_ab.txt
B=build-device/tests
for t in test_stages test_head_sizes test_forward; do
  timeout 70 $B/$t --gdn_gpu_suite --gtest_filter='CUDA*:CrossBackend*' > $OUT/$t.log 2>&1
  echo "$t rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' $OUT/$t.log | tr '\n' ' ')"
done
timeout 40 compute-sanitizer --tool racecheck --error-exitcode 9 $B/test_stages --gdn_gpu_suite --gtest_filter='CUDA*' > $OUT/race.log 2>&1
echo "racecheck stages rc=$? $(grep 'RACECHECK SUMMARY' $OUT/race.log | tail -1)"
timeout 60 python3 bench/gdn_kernels.py --reps 3 2>&1 | grep -E "^ +[0-9]|kernels" | head -8
timeout 30 python3 bench/gdn_kernels.py --reps 3 --dtype fp32 --lens 8192 2>&1 | tail -1
rm -f $OUT/build.log
echo "[$SECONDS s] done"
