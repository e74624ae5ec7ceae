#!/usr/bin/env bash
# Session 35, call 3: the mixed-dtype copies (ctest head sizes, errors, forward; pytest mixed) and the peer rows
# session 34 could not take (carry .deps .whl .peers).
set -u
export GDN_COMMIT=$1
OUT=${OUT:-/tmp/gdn-out}
scripts/device.sh build,pybuild > /dev/null 2>&1
cat $OUT/summary.txt 2>/dev/null | tail -3
(cd build-device && timeout 150 ctest -R "head_sizes_gpu|errors_gpu|forward_gpu" -j3 --output-on-failure 2>&1 | tail -8) | tee $OUT/ctest.log
PYTHONPATH=/tmp/site GDN_TEST_DEVICES=cuda timeout 120 python3 -m pytest -q -rs python/tests/test_head_sizes.py -k "mixed_dtypes" 2>&1 | tail -4 | tee $OUT/pytest.log
GDN_BENCH_ARGS="--no-decode --no-serving --cases model-1x32k,g0-1x32k,tail-16k,1x3k,g0-1x3k" GDN_BENCH_BUDGET=200 GDN_BENCH_TIMEOUT=250 bash scripts/device.sh bench 2>&1 | tail -20
