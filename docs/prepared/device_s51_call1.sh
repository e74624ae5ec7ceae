#!/usr/bin/env bash
# Session 51's first call (~5 min, ~8 with GDN_S51_AB=1; carry .deps, and .ab with it, .ab = `scripts/ab_base.sh 8c7d1bd`): session 50's
# call 2 (the split kernel file's final form timed against 8c7d1bd) after the wgmma groups'
# latencies (tools/wgmma_probe), then ncu on model-tp4-1x32k
# (kkt_solve, the summary pass, the scan, the fused chain: ncu_stalls.txt per instruction and stretch).
OUT=${OUT:-/tmp/gdn-out}
# The wgmma groups' latencies (tools/wgmma_probe): one and two warpgroups an SM.
nvcc -std=c++17 -arch=sm_90a -O3 -I include -I src --expt-relaxed-constexpr tools/wgmma_probe/wgmma_probe.cu \
  -o /tmp/wgmma_probe && timeout 60 /tmp/wgmma_probe | tee "$OUT/wgmma_probe.txt"
# With GDN_S51_AB=1 (~2.5 min more): session 50's call 2 (builds this tree and .ab's base); else
# this tree's build only.
if [[ ${GDN_S51_AB:-0} == 1 ]]; then
  GDN_BUDGET_S=${GDN_BUDGET_S:-130} bash docs/prepared/device_s50_call2.sh "$1"
  GDN_NCU_CASE=model-tp4-1x32k bash scripts/device.sh ncu >"$OUT/device_ncu.txt" 2>&1
else
  GDN_NCU_CASE=model-tp4-1x32k bash scripts/device.sh build,ncu >"$OUT/device_ncu.txt" 2>&1
fi
tail -3 "$OUT/device_ncu.txt"
grep -E "^(Duration|  *Duration)|fwd_h|split_scan|kkt_solve" "$OUT/ncu.log" | head -20
