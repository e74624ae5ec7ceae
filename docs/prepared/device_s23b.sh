#!/usr/bin/env bash
# Session 23, a later device call (prepared in session 22): prep's Gram by wgmma and the fused o everywhere. On main
# (after call 1's decisions):
#   M=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s23_kkt_wgmma_gram.patch && git commit -qam "kkt_solve: the Gram matrix by one wgmma"
#   G=$(git rev-parse --short HEAD)
#   git apply docs/prepared/s23_fuse_always.patch && git commit -qam "heuristics: o fused also where SMs stay idle"
#     (s23_fuse_always_after_split.patch instead where s23_split_short.patch landed)
#   scripts/ab_base.sh $M $G
# then `bash docs/prepared/device_s23b.sh <commit>` with carry .ab .deps. Columns: base = main, v1 = the Gram by wgmma
# (prep phase: 6 blocks per SM with mma.sync against 5 with ~5-8% fewer instructions per warp), new = + o fused
# wherever a wave is not full (1x3k, g0-1x3k if unsplit, tp8-1x4k: fwd_o beside the chain today; the fused o's
# g = 0 error 2.18e-3 against fwd_o's ~2.6e-3). If the fused o wins there, fwd_o's overlap path (ready counters,
# its programmatic launch) no longer runs in production: remove it in a follow-up.
set -u
export GDN_COMMIT=$1
GDN_AB_CASES="1x32k 4x8k 8x1k 1x3k g0-1x3k tp8-1x4k 1x4k" scripts/device.sh build,ab,quick > /dev/null 2>&1  # (summary.txt: build, A/B and quick check notes)
cat $OUT/summary.txt 2>/dev/null | cut -c1-300
tail -8 $OUT/ab.log
grep -A1 -E '^bench' $OUT/ab.log | grep phases | cut -c1-100 | head -42
B=build-device/tools/cuda_check/gdn_cuda_check
grep -E "g=0 long" $OUT/quick.log | cut -c1-100
for spec in "memcheck:g=0,gates x,fp16 128" "racecheck:g=0 long,gates x2" "synccheck:g=0 long"; do
  tool=${spec%%:*}; only=${spec#*:}; left=$((560 - SECONDS)); [[ $left -lt 15 ]] && break
  timeout $left compute-sanitizer --tool $tool --error-exitcode 9 $B --quick --only "$only" > $OUT/$tool.log 2>&1
  echo "[$SECONDS s] $tool rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $OUT/$tool.log | tail -1)"
done
