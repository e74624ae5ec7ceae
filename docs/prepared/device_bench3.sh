#!/usr/bin/env bash
# The three-column prefill benchmark (gdn, fla 0.6, FlashQLA 0.1.3) at a commit: `bash docs/prepared/device_bench3.sh <commit>`
# with carry .whl .peers (fla wheels; FlashQLA + tilelang + tvm-ffi + z3 unpacked and packed as .peers/qla-site.tar.xz; both ignored by git,
# on this machine since session 18). Writes $OUT/h200.json; then here: cp it to bench/results/h200_sNN.json,
# `python3 scripts/merge_bench.py <it> bench/results/h200.json --note "prefill: commit ... (session NN: ...)"` (keeps the
# committed decode and serving rows) and `/tmp/mpl/bin/python bench/report.py bench/results/h200.json` (matplotlib).
set -u
export GDN_COMMIT=$1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
CMAKE_BUILD_PARALLEL_LEVEL=16 timeout 200 python3 -m pip install -q --no-build-isolation --no-deps . > $OUT/pybuild.log 2>&1; echo "[$SECONDS s] pip rc=$?"
mkdir -p /tmp/site && python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl > /dev/null 2>&1
mkdir -p /tmp/qla && tar -xJf .peers/qla-site.tar.xz -C /tmp/qla
echo "[$SECONDS s] setup done"
PYTHONPATH=/tmp/qla:/tmp/site timeout $((585 - SECONDS)) python3 bench/bench_gpu.py --no-decode --no-serving --json $OUT/h200.json --time-budget $((560 - SECONDS)) > $OUT/bench.log 2>&1
echo "[$SECONDS s] bench rc=$?"
tail -20 $OUT/bench.log | cut -c1-400
