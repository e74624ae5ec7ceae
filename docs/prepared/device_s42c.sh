set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
bash scripts/device.sh build,pybuild >"$OUT/device_build.txt" 2>&1
grep -E 'build:|pip' "$OUT/device_build.txt" | tail -2
GDN_BENCH_ARGS="--no-decode --no-serving --no-flashqla --cases tp4-1x32k_K256,tp8-1x32k_K256" \
  GDN_BENCH_BUDGET=120 GDN_BENCH_TIMEOUT=$((225 - SECONDS)) bash scripts/device.sh bench >"$OUT/device_bench.txt" 2>&1
tail -12 "$OUT/bench.log"
rm -f "$OUT/build.log"
echo "[$SECONDS s] done"
