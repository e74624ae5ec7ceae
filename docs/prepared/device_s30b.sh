#!/usr/bin/env bash
# Session 30, call 2 (~8.5 min; carry .deps .whl): on what call 1 landed, the GPU suites, the Python
# tests on the GPU, the quick set, then fla's side-by-side tests alone (session 29 carried fla for
# the first time since session 26 and found o's dtype for mixed inputs swapped against fla 0.6's,
# fixed on the desk in 82bda97). `bash docs/prepared/device_s30b.sh <commit>`.
# (The sanitizers ran in call 1. initcheck is left out: it reports every read of a buffer written
# by bulk stores, session 28.)
set -u
export GDN_COMMIT=$1 OUT=${OUT:-/tmp/gdn-out}
# Without the wheels first: with fla importable the whole Python step compiles fla's Triton kernels
# for every shape and ran past its 300 s in session 29.
[[ -d .whl ]] && mv .whl /tmp/whl_hold
bash scripts/device.sh build,pybuild,test,pytest,quick 2>&1 | grep -E '^== |passed|failed|FAIL' | tail -30
[[ -d /tmp/whl_hold ]] || { echo "no .whl carried: fla's tests not run"; exit 0; }
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site /tmp/whl_hold/*.whl
# fla's grid side by side (head sizes 32, 100 at fp16 and fp32 q/k with fp16 v; 256 autotunes for
# minutes and is left out, as in scripts/device.sh)
PYTHONPATH=/tmp/site GDN_TEST_DEVICES=cuda timeout 240 python3 -m pytest -v -rs -s python/tests/test_head_sizes.py \
  python/tests/test_torch.py -k "same_results_as_fla and not 256 or decode_matches_fla" >"$OUT/pytest_fla.log" 2>&1
echo "[$SECONDS s] pytest with fla: $(grep -E 'passed|failed|error' "$OUT/pytest_fla.log" | tail -1)"
