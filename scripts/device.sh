#!/usr/bin/env bash
# The one script for the GPU machine (an H200, sm_90a). In one call it:
#   1. builds everything with all cores (cmake -DGDN_CUDA=ON; GoogleTest from .deps/ if the
#      machine has none),
#   2. runs the backend's standalone check (fp64 recurrence oracle, big cases) and its timings,
#   3. runs the GPU tests (ctest -L gpu) and then all of ctest,
#   4. runs compute-sanitizer memcheck and racecheck on small cases of every kernel,
#   5. runs bench/bench_gpu.py (gdn vs flash-linear-attention) when it exists,
# and writes logs and JSON under $OUT (few files: build.log, check.log, check.json, ctest.log,
# sanitizer.log, bench.log, h200.json).
#
# Usage (from the repository root, through the device tool):
#   scripts/device.sh [steps]      steps: comma list of build,check,test,sanitize,bench (default all)
#   CHECK_ARGS="--quick --bench" scripts/device.sh build,check   (skip the big check cases)
# Carry: .deps (GoogleTest source: apt-get download googletest; dpkg -x; copy usr/src/googletest to
# .deps/googletest) and .whl (flash-linear-attention wheels) when the benchmark runs.
set -u -o pipefail
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
STEPS=${1:-build,check,test,sanitize,bench}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
JOBS=$(nproc)
BUILD=build-device
SUMMARY=()
T0=$(date +%s)
note() { SUMMARY+=("[$(($(date +%s) - T0)) s] $1"); echo "== $1"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/build.log"

# --- 1. build -------------------------------------------------------------------------------
if has build; then
  EXTRA=()
  if [[ ! -f /usr/include/gtest/gtest.h && -d .deps/googletest ]]; then
    if [[ ! -f /tmp/gtest/lib/cmake/GTest/GTestConfig.cmake && ! -f /tmp/gtest/lib64/cmake/GTest/GTestConfig.cmake ]]; then
      cmake -S .deps/googletest -B /tmp/gtest-build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/tmp/gtest \
        -DBUILD_GMOCK=OFF >>"$OUT/build.log" 2>&1 &&
        cmake --build /tmp/gtest-build -j"$JOBS" --target install >>"$OUT/build.log" 2>&1
    fi
    EXTRA+=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
  fi
  cmake -S . -B $BUILD -DGDN_CUDA=ON -DGDN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release "${EXTRA[@]}" >>"$OUT/build.log" 2>&1
  TARGETS=()
  has test || TARGETS=(--target gdn_cuda_check)  # without the tests, only the backend check
  if cmake --build $BUILD -j"$JOBS" "${TARGETS[@]}" >>"$OUT/build.log" 2>&1; then
    note "build: ok ($(grep -ci 'warning' "$OUT/build.log") warning lines)"
  else
    note "build: FAILED (see build.log); building the backend check alone"
    cmake --build $BUILD -j"$JOBS" --target gdn_cuda_check >>"$OUT/build.log" 2>&1 || note "backend check build FAILED"
  fi
  grep -i -B2 -A3 'warning\|error' "$OUT/build.log" | head -60
fi
CHECK=$BUILD/src/cuda/gdn_cuda_check

# --- 2. backend check and timings --------------------------------------------------------------
if has check && [[ -x $CHECK ]]; then
  timeout 240 $CHECK ${CHECK_ARGS:---bench --profile} --json "$OUT/check.json" 2>&1 | tee "$OUT/check.log"
  note "check: $(grep -E '^(PASSED|FAILED)' "$OUT/check.log" || echo 'did not finish')"
fi

# --- 3. tests ------------------------------------------------------------------------------------
if has test && [[ -d $BUILD ]]; then
  (cd $BUILD && timeout 180 ctest -L gpu --output-on-failure -j4 2>&1) | tee "$OUT/ctest.log" | tail -25
  note "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
  (cd $BUILD && timeout 90 ctest -LE gpu --output-on-failure -j"$JOBS" 2>&1) | tee -a "$OUT/ctest.log" | tail -8
  note "ctest (the rest): $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
fi

# --- 4. compute-sanitizer ------------------------------------------------------------------------
if has sanitize && [[ -x $CHECK ]]; then
  : >"$OUT/sanitizer.log"
  for tool in memcheck racecheck; do
    timeout 120 compute-sanitizer --tool $tool --error-exitcode 9 $CHECK --quick >>"$OUT/sanitizer.log" 2>&1
    rc=$?
    note "sanitizer $tool: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tail -1)"
  done
  grep -E '^(ok|FAIL)|SUMMARY' "$OUT/sanitizer.log" | grep -v '^ok' | head -20
fi

# --- 5. benchmark against flash-linear-attention --------------------------------------------------
if has bench && [[ -f bench/bench_gpu.py ]]; then
  if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      >"$OUT/bench.log" 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS timeout 300 python3 -m pip install -q --no-build-isolation --no-deps . >>"$OUT/bench.log" 2>&1 ||
    note "pip install . FAILED"
  PYTHONUNBUFFERED=1 timeout 300 python3 bench/bench_gpu.py --json "$OUT/h200.json" 2>&1 | tee -a "$OUT/bench.log" | tail -40
  note "bench: $( [[ -f $OUT/h200.json ]] && echo "wrote h200.json" || echo 'no h200.json')"
fi

echo "================ summary"
printf '%s\n' "${SUMMARY[@]}"
grep -E '^(bench|decode|  phases) ' "$OUT/check.log" 2>/dev/null
