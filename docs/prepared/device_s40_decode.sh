#!/usr/bin/env bash
# Session 40 (prepared in session 39; ~5 min; carry .deps .ab): V-major decode states split into
# four one-warp blocks (s40_decode_vmajor_warps.patch: decode_rows_kernel<1, false, ...>, grid x 4,
# 4x the blocks per SM; K-major unchanged). Setup: `scripts/ab_base.sh main` (base = main); this
# script applies the patch to the device's copy (new) and packs v1, the same patch with two-warp
# blocks. The hypothesis: gdn's V-major rows run at 90-92% of the copy rate where fla 0.6's
# one-warp programs reach 97-100% (BENCHMARK_H200.md: fla 0.92x gdn's time at N >= 64) because two
# whole-state blocks per SM load, sum and store in step, while 8 one-warp blocks interleave; the
# same bytes in flight. Each row's arithmetic and order are unchanged: the decode lines of the
# quick set should be bitwise main's.
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=$1
source docs/prepared/ab_lib.sh
apply_prepared_patch docs/prepared/s40_decode_vmajor_warps.patch src/cuda/decode/rows_kernel.cuh kRowsWarpsVMajor || exit 1
# v1: the same patch with two-warp V-major blocks (kRowsWarpsVMajor = 2), packed here as an A/B side.
mkdir -p /tmp/w2 .ab && tar -cf - CMakeLists.txt include src reference tools bench/CMakeLists.txt bench/*.cpp bench/*.txt |
  tar -xf - -C /tmp/w2 &&
  sed -i 's/^constexpr int kRowsWarpsVMajor = 1;/constexpr int kRowsWarpsVMajor = 2;/' /tmp/w2/src/cuda/decode/rows_kernel.cuh &&
  grep -q 'kRowsWarpsVMajor = 2' /tmp/w2/src/cuda/decode/rows_kernel.cuh && tar -cf .ab/v1.tar -C /tmp/w2 . &&
  echo "w2" >.ab/v1.rev || echo "v1 (two warps) not packed"
GDN_AB_CASES="8x1k" bash scripts/device.sh build,ab >$OUT/device.txt 2>&1
grep -E '^\[ *[0-9]+s\]' $OUT/device.txt | tail -4
for side in base v1 new; do
  bin=$(bin_of $side)
  [[ -x $bin ]] || continue
  timeout 60 $bin --quick --only decode,verify,spec >/tmp/quick_$side.log 2>&1
  echo "quick decode $side rc=$? $(tail -1 /tmp/quick_$side.log)"
done
for side in v1 new; do
  [[ -f /tmp/quick_$side.log ]] || continue
  diff <(grep -vE '^(PASSED|FAILED)|ms' /tmp/quick_base.log) <(grep -vE '^(PASSED|FAILED)|ms' /tmp/quick_$side.log) >/dev/null &&
    echo "$side decode lines: bitwise main's" || echo "$side decode lines differ: $(diff /tmp/quick_base.log /tmp/quick_$side.log | head -6)"
done
(cd build-device && timeout 90 ctest -L gpu -R 'decode|token|spec|heuristics' 2>&1 | tail -3)
for round in 1 2; do
  for side in base v1 new; do
    bin=$(bin_of $side)
    [[ -x $bin ]] || continue
    echo "== $side round $round" >>$OUT/decode_ab.log
    timeout 120 $bin --decode --bench --no-check 2>&1 | grep -E '^(decode|verify)' >>$OUT/decode_ab.log
  done
done
python3 - $OUT/decode_ab.log <<'PY'
import re, sys, collections
t = collections.defaultdict(list); side = None
for l in open(sys.argv[1]):
    m = re.match(r"== (\S+) round", l)
    if m: side = m.group(1); continue
    m = re.match(r"(decode N=\s*\d+ \S+ \S+|verify N=\s*\d+ T=\d+ \S+ \S+)\s+([\d.]+) ms.*\((\d+)%\)", l)
    if m: t[(re.sub(r"\s+", " ", m.group(1)), side)].append((float(m.group(2)), m.group(3)))
for key in sorted({k for k, _ in t}):
    b = t.get((key, "base"), [])
    if not b: continue
    mb = sum(x for x, _ in b) / len(b)
    row = f"{key:40s} base {mb:.4f} ({b[-1][1]}%)"
    for side in ("v1", "new"):
        n = t.get((key, side), [])
        if n:
            mn = sum(x for x, _ in n) / len(n)
            row += f"  {side} {mn:.4f} ({n[-1][1]}%) base/{side} {mb / mn:.3f}"
    print(row)
PY
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 9 "$(bin_of new)" --quick --only "decode bf16 128,decode pool" >/tmp/race.log 2>&1
echo "racecheck decode rc=$? $(grep 'RACECHECK SUMMARY' /tmp/race.log | tail -1)"
rm -f $OUT/build.log
echo "[$SECONDS s] done"
