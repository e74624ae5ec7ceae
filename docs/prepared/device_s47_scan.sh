#!/usr/bin/env bash
# Session 47's prepared A/B for session 48 (~4.5 min; carry .deps .ab, the same .ab as
# device_s47_pv16.sh: base = main): s47_scan_b_ring.patch (applied here), the split scan's B_p
# slices copied kBRing - 1 parts ahead into a ring of their own (M_p still one part ahead, in two
# stages). Session 47's phases: a scan step costs ~1.25 us where M_p is negligible (tp4-1x32k 8 ->
# 16 parts: scan 0.012 -> 0.022 ms), a wait for a 4-16 KB copy issued one short step before.
# Expected: the split rows' scan phase -30 to -50% where M_p is negligible (tp4 / tp8 on the SPEC's
# gates), level where it is not (model-tp4: M_p's 64 KB a block and step out of L2 is that pole;
# perf.md, next steps); the split lines bitwise base's (the same sums in the same order).
: "${GDN_BUDGET_S:=270}"
source docs/prepared/ab_lib.sh  # (set -u; OUT, GDN_COMMIT = $1, R)
ab_patch_build docs/prepared/s47_scan_b_ring.patch src/cuda/chunk/split_scan.cu 'kBRing'
SIDES=(base new)
ab_smoke tp8-1x32k | tee -a $R
ab_lines "split" 40 "${OK[@]}"  # (expected: no line moved)
ab_sanitize new racecheck "bf16 128 split 4 parts,bf16 64 split many parts" 130
ab_sanitize new synccheck "bf16 128 split 4 parts,bf16 64 split many parts" 160
AB_PHASES=1 ab_time $((GDN_BUDGET_S - 60)) tp8-1x32k tp4-1x32k tp4-1x32k/parts16 model-tp4-1x32k tp4-1x128k 1x128k \
  model-1x32k
ab_table
# Which of perf.md "Session 48"'s two readings of the scan's ~3.75 us step with M_p holds: L2 (lts
# throughput, stalls on the cp.async wait: multicast) or shared memory (MIO throttle, wavefronts
# per LDS.128 of X's broadcast: register blocking). main's scan, one launch on model-tp4-1x32k.
if [[ $(left) -gt 45 ]]; then
  timeout $(($(left) - 5)) ncu --clock-control none -k regex:split_scan -c 1 --set full \
    "$(bin_of base)" --bench --no-check --case model-tp4-1x32k >"$OUT/scan_ncu.txt" 2>&1
  echo "[$SECONDS s] scan ncu rc=$? $(grep -E 'L2 Cache Throughput|Shared Memory|Mem Pipes Busy' "$OUT/scan_ncu.txt" | head -4 | tr -s ' ' | tr '\n' ';')" | tee -a $R
fi
echo "[$SECONDS s] done" | tee -a $R
