#!/usr/bin/env bash
# The one script for the GPU machine (an H200, sm_90a). In one call it:
#   1. builds the C++ tree (cmake -DGDN_CUDA=ON, all cores; GoogleTest from .deps/ if the machine
#      has none) and, with step pybuild, at the same time the Python package (pip install
#      --no-build-isolation .; pytest and bench install it themselves when it is missing),
#   2. runs the GPU tests (ctest -L gpu), then the CPU ones,
#   3. runs the Python tests on the GPU (torch, CUDA graphs, torch.compile, opcheck, fla),
#   4. runs the benchmark against flash-linear-attention (bench/bench_gpu.py -> h200.json),
#   5. runs compute-sanitizer memcheck, racecheck and synccheck on small cases of every kernel
#      (optional step `quick`: the correctness cases alone, quick.log),
#   6. runs the CLI's main job on the GPU (optional step `cli`),
#   7. profiles the three forward kernels on 1x32k with Nsight Compute, per SASS instruction
#      (optional step `ncu`: ncu_stalls.txt, per instruction and per stretch; ncu_src.csv.xz),
#   8. times the backend against base revisions', alternately (optional step `ab`: first
#      scripts/ab_base.sh <rev> [<rev> ...] here, and carry .ab too),
# with a time budget per step, and writes logs and JSON under $OUT (at most 8 files).
#
# Usage (repository root, through the device tool; carry .deps and .whl):
#   GDN_COMMIT=<sha> [GDN_CMAKE_FLAGS=<cmake options>] scripts/device.sh [steps]   steps: comma list of
#       build,pybuild,test,pytest,bench,sanitize,quick,check,cli,ncu,ab
#       (default: build,pybuild,test,pytest,bench,sanitize)
# .deps/googletest: googletest source (apt-get download googletest; dpkg -x; copy usr/src/googletest).
# .whl: flash-linear-attention (+ fla-core) wheels for the benchmark and the fla tests.
# .peers/qla-site.tar.xz: FlashQLA 0.1.3 with tilelang, apache-tvm-ffi, z3-solver and
#   torch-c-dlpack-ext unpacked from their wheels into one folder (site-packages layout), for the
#   benchmark's FlashQLA column.
# .peers/tl_cache.tar.xz (optional): TileLang's kernel cache from an earlier bench step's
#   $OUT/tl_cache.tar.xz, so that FlashQLA's kernels need not compile again.
set -u -o pipefail
OUT=${OUT:-/tmp/gdn-out}
mkdir -p "$OUT"
STEPS=${1:-build,pybuild,test,pytest,bench,sanitize}
has() { [[ ",$STEPS," == *",$1,"* ]]; }
JOBS=$(nproc)
BUILD=build-device
SUMMARY=()
note() { SUMMARY+=("[$(printf '%4d' $SECONDS)s] $1"); echo "== $1"; }
export PYTHONUNBUFFERED=1

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$OUT/build.log"
# The device's copy of .git can lag the tree: pass GDN_COMMIT=<sha> from the machine that sent it.
export GDN_COMMIT=${GDN_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
echo "commit $GDN_COMMIT" | tee -a "$OUT/build.log"

if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    >>"$OUT/build.log" 2>&1 && export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi

# One A/B revision's check (.ab/<name>.tar from scripts/ab_base.sh) built in /tmp/ab-<name>.
build_ab_rev() {
  local name=$1
  shift
  rm -rf "/tmp/ab-$name" && mkdir -p "/tmp/ab-$name" && tar -xf ".ab/$name.tar" -C "/tmp/ab-$name" &&
    cmake -S "/tmp/ab-$name" -B "/tmp/ab-$name/build" -DGDN_CUDA=ON -DGDN_BUILD_TESTS=OFF -DGDN_BUILD_TOOLS=ON \
      -DCMAKE_BUILD_TYPE=Release "$@" && cmake --build "/tmp/ab-$name/build" -j"$JOBS" --target gdn_cuda_check
}
ab_check_of() {  # the check binary of A/B revision $1 (its path moved once)
  local d=/tmp/ab-$1/build
  if [[ -x $d/tools/cuda_check/gdn_cuda_check ]]; then echo "$d/tools/cuda_check/gdn_cuda_check"; else echo "$d/src/cuda/gdn_cuda_check"; fi
}

# --- 1. builds (C++ tree and Python package side by side) ------------------------------------
if has build; then
  EXTRA=()
  if [[ ! -f /usr/include/gtest/gtest.h && -d .deps/googletest ]]; then
    cmake -S .deps/googletest -B /tmp/gtest-build -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/tmp/gtest \
      -DBUILD_GMOCK=OFF >>"$OUT/build.log" 2>&1 &&
      cmake --build /tmp/gtest-build -j"$JOBS" --target install >>"$OUT/build.log" 2>&1
    EXTRA+=(-DCMAKE_PREFIX_PATH=/tmp/gtest)
  fi
  PY_PID=
  if has pybuild; then
    (CMAKE_BUILD_PARALLEL_LEVEL=$((JOBS / 2)) timeout 400 python3 -m pip install -q --no-build-isolation --no-deps . \
      >"$OUT/pybuild.tmp" 2>&1; echo "rc=$?" >>"$OUT/pybuild.tmp") &
    PY_PID=$!
  fi
  AB_PIDS=()
  if has ab && [[ -f .ab/base.tar ]]; then  # the base revisions' checks, built beside this tree
    for tarball in .ab/*.tar; do
      name=$(basename "$tarball" .tar)
      (build_ab_rev "$name" "${EXTRA[@]}") >"$OUT/ab_$name.tmp" 2>&1 &
      AB_PIDS+=($!)
    done
  fi
  # GDN_CMAKE_FLAGS: extra options for this tree, e.g. -DCMAKE_CUDA_FLAGS=-lineinfo.
  # shellcheck disable=SC2086
  cmake -S . -B $BUILD -DGDN_CUDA=ON -DGDN_BUILD_TESTS=ON -DCMAKE_BUILD_TYPE=Release "${EXTRA[@]}" ${GDN_CMAKE_FLAGS:-} \
    >>"$OUT/build.log" 2>&1
  if cmake --build $BUILD -j"$JOBS" >>"$OUT/build.log" 2>&1; then
    note "build: ok ($(grep -ci 'warning' "$OUT/build.log") warning lines)"
  else
    note "build: FAILED (see build.log)"
    grep -i -B2 -A6 'error' "$OUT/build.log" | head -60
  fi
  if [[ -n $PY_PID ]]; then
    wait $PY_PID
    cat "$OUT/pybuild.tmp" >>"$OUT/build.log"
    rm -f "$OUT/pybuild.tmp"
    note "pip install .: $(grep -E '^rc=' "$OUT/build.log" | tail -1)"
  fi
  for pid in "${AB_PIDS[@]}"; do wait "$pid"; done
  cat "$OUT"/ab_*.tmp >"$OUT/ab.log" 2>/dev/null
  rm -f "$OUT"/ab_*.tmp
elif has pybuild; then
  CMAKE_BUILD_PARALLEL_LEVEL=$JOBS timeout 400 python3 -m pip install -q --no-build-isolation --no-deps . \
    >>"$OUT/build.log" 2>&1
  note "pip install .: rc=$?"
fi

# --- 2. C++ tests ---------------------------------------------------------------------------------
if has test && [[ -d $BUILD ]]; then
  (cd $BUILD && timeout 220 ctest -L gpu --output-on-failure -j4 2>&1) >"$OUT/ctest.log"
  tail -15 "$OUT/ctest.log"
  note "ctest -L gpu: $(grep -E 'tests passed|tests failed' "$OUT/ctest.log" | tail -1)"
fi

# --- 3. Python tests on the GPU -------------------------------------------------------------------
if has pytest; then
  # test_torch.py (torch, CUDA graphs, torch.compile, opcheck, fla) and every suite with CUDA
  # parametrizations (the serving calls, head sizes, checkpoints, graphs); GDN_PYTEST_FILES overrides.
  # fla's chunk forward at K = 256 autotunes for minutes (Triton 3.6, H200; session 26: past the step's budget in
  # its compiler, gdn's call before it done): those two comparisons are left to a run of their own.
  GDN_TEST_DEVICES=cuda timeout ${GDN_PYTEST_TIMEOUT:-300} python3 -m pytest -v -rs --durations=12 \
    --deselect "python/tests/test_head_sizes.py::test_same_results_as_fla[False-256-chunk]" \
    --deselect "python/tests/test_head_sizes.py::test_same_results_as_fla[True-256-chunk]" \
    ${GDN_PYTEST_FILES:-python/tests/test_torch.py python/tests/test_compat*.py python/tests/test_head_sizes.py \
      python/tests/test_spec_decode.py python/tests/test_checkpoints.py $(ls python/tests/test_graphs.py 2>/dev/null)} \
    >"$OUT/pytest.log" 2>&1
  tail -12 "$OUT/pytest.log"
  note "pytest (cuda): $(grep -E 'passed|failed|error' "$OUT/pytest.log" | tail -1)"
fi

# --- 4. benchmark against flash-linear-attention ------------------------------------------------
if has bench; then
  # A later call on the warm machine (steps split across calls) may find the package gone.
  python3 -c "import gdn" 2>/dev/null || python3 -m pip install -q --no-build-isolation --no-deps . >>"$OUT/bench.log" 2>&1
  BENCH_PATH=${PYTHONPATH:-}
  if [[ -f .peers/qla-site.tar.xz ]]; then  # FlashQLA and its packages, for the flashqla column
    mkdir -p /tmp/qla-site && tar -xJf .peers/qla-site.tar.xz -C /tmp/qla-site &&
      BENCH_PATH=/tmp/qla-site${BENCH_PATH:+:$BENCH_PATH}
  fi
  # FlashQLA's kernels compile per shape (TileLang: 3-30 s each, most of a table call in session
  # 47). Its kernel cache travels: a call's $OUT/tl_cache.tar.xz, copied into .peers/ by hand, is
  # unpacked before the next call's run (an H100's and an H200's are both sm_90a; a stale entry is
  # compiled again), and the cache after the run is packed into $OUT for the call after.
  TL_CACHE=/tmp/tilelang-cache
  mkdir -p "$TL_CACHE"
  [[ -f .peers/tl_cache.tar.xz ]] && tar -xJf .peers/tl_cache.tar.xz -C "$TL_CACHE"
  # GDN_BENCH_ARGS: more options for bench_gpu.py, e.g. "--no-decode --no-serving" (the prefill's three
  # columns alone: with FlashQLA compiling per shape they take ~280 s) or "--cases tp8-1x32k,g0-1x32k".
  # shellcheck disable=SC2086
  TILELANG_CACHE_DIR=$TL_CACHE PYTHONPATH=$BENCH_PATH timeout ${GDN_BENCH_TIMEOUT:-300} python3 bench/bench_gpu.py \
    --json "$OUT/h200.json" --time-budget ${GDN_BENCH_BUDGET:-240} ${GDN_BENCH_ARGS:-} >"$OUT/bench.log" 2>&1
  tail -32 "$OUT/bench.log"
  note "bench: $([[ -f $OUT/h200.json ]] && echo 'wrote h200.json' || echo 'no h200.json')"
  if [[ -n $(ls -A "$TL_CACHE") ]]; then
    tar -cJf "$OUT/tl_cache.tar.xz" -C "$TL_CACHE" . 2>/dev/null
    note "tilelang cache: $(du -h "$OUT/tl_cache.tar.xz" | cut -f1) in \$OUT/tl_cache.tar.xz (<= 16 MB comes back; carry it in .peers/)"
  fi
fi

# --- 5. compute-sanitizer on small cases of every kernel -------------------------------------------
CHECK=$BUILD/tools/cuda_check/gdn_cuda_check
if has sanitize && [[ -x $CHECK ]]; then
  : >"$OUT/sanitizer.log"
  for tool in memcheck racecheck synccheck; do
    # racecheck of the whole quick set takes minutes on an H200: by default the cases of the
    # kernels with shared-memory hand-offs between warps (GDN_RACECHECK_ONLY, --only's syntax).
    ONLY=()
    [[ $tool == racecheck ]] && ONLY=(--only "${GDN_RACECHECK_ONLY:-fused,split 4,decode bf16 128}")
    timeout $([[ $tool == racecheck ]] && echo 200 || echo 90) compute-sanitizer --tool $tool --error-exitcode 9 \
      $CHECK --quick "${ONLY[@]}" >>"$OUT/sanitizer.log" 2>&1
    rc=$?
    note "sanitizer $tool: rc=$rc, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitizer.log" | tail -1)"
  done
fi

# --- 6. optional: the backend's own check (big cases, A/B timings) and the CLI's main job --------
if has quick && [[ -x $CHECK ]]; then  # the correctness cases alone (quick set): quick.log
  timeout 150 $CHECK --quick >"$OUT/quick.log" 2>&1
  note "quick: $(grep -E '^(PASSED|FAILED)' "$OUT/quick.log" || echo 'did not finish') $(grep -E '^FAIL' "$OUT/quick.log" | head -3 | cut -c1-60 | tr '\n' ' ')"
fi
if has check && [[ -x $CHECK ]]; then
  timeout 200 $CHECK --bench --profile --json "$OUT/check.json" >"$OUT/check.log" 2>&1
  note "check: $(grep -E '^(PASSED|FAILED)' "$OUT/check.log" || echo 'did not finish')"
fi
if has cli && [[ -x $BUILD/tools/gdn ]]; then
  timeout 200 $BUILD/tools/gdn --backend cuda --json "$OUT/cli_h200.json" >"$OUT/cli.log" 2>&1
  rc=$?
  cat "$OUT/cli.log"
  note "cli: rc=$rc"
fi

if has ncu && [[ -x $CHECK ]]; then
  # Where each kernel of one forward spends its cycles (GDN_NCU_CASE, default 1x32k; the first
  # prep / h (summary) / scan / h / o launches of the warm-up): the full set, with source-level warp-stall sampling
  # summarized per SASS instruction (scripts/ncu_stalls.py -> ncu_stalls.txt). --clock-control
  # none: the card's clocks stay as they are.
  timeout 300 ncu --clock-control none -k regex:'kkt_solve|fwd_(prep|h|o)|split_scan|summary_ahead' -c 4 --set full --import-source no \
    -f -o /tmp/gdn_ncu $CHECK --bench --no-check --case "${GDN_NCU_CASE:-1x32k}" >"$OUT/ncu.log" 2>&1
  note "ncu: rc=$?"
  if [[ -f /tmp/gdn_ncu.ncu-rep ]]; then
    ncu -i /tmp/gdn_ncu.ncu-rep --page details --print-details all >>"$OUT/ncu.log" 2>&1
    ncu -i /tmp/gdn_ncu.ncu-rep --page source --csv --print-source sass >/tmp/gdn_ncu_src.csv 2>>"$OUT/ncu.log" &&
      python3 scripts/ncu_stalls.py /tmp/gdn_ncu_src.csv >"$OUT/ncu_stalls.txt" 2>&1 &&
      python3 scripts/ncu_stalls.py /tmp/gdn_ncu_src.csv --stretches >>"$OUT/ncu_stalls.txt" 2>&1
    # The source page itself (per-instruction executed counts and stall samples: ~150 KB as .xz),
    # for scripts/ncu_stalls.py here.
    [[ -f /tmp/gdn_ncu_src.csv ]] && xz -T0 -c /tmp/gdn_ncu_src.csv >"$OUT/ncu_src.csv.xz"
  fi
fi
if has ab && [[ -f .ab/base.tar ]]; then
  # A/B timing against base revisions (scripts/ab_base.sh <rev> [<rev> ...] here, carry .ab):
  # each revision's gdn_cuda_check is built beside this tree's and all time each case in turn,
  # two rounds (GDN_AB_CASES: the cases, default below). Ratios are the first revision's (base)
  # ms over each other column's. (Built in the build step, beside this tree; without it, here.)
  SIDES=()
  for tarball in .ab/base.tar $(ls .ab/v*.tar 2>/dev/null | sort -V); do
    name=$(basename "$tarball" .tar)
    [[ -d /tmp/ab-$name/build ]] || build_ab_rev "$name" >>"$OUT/ab.log" 2>&1
    SIDES+=("$name")
  done
  [[ -x $CHECK ]] || cmake --build $BUILD -j"$JOBS" --target gdn_cuda_check >>"$OUT/ab.log" 2>&1
  ok=1
  for name in "${SIDES[@]}"; do [[ -x $(ab_check_of "$name") ]] || ok=0; done
  if [[ $ok == 1 && -x $CHECK ]]; then
    revs=""
    for name in "${SIDES[@]}"; do revs+="$name=$(cat ".ab/$name.rev" 2>/dev/null) "; done
    echo "# A/B: ${revs}vs this tree (new=$GDN_COMMIT)" >>"$OUT/ab.log"
    for round in 1 2; do
      for c in ${GDN_AB_CASES:-1x4k 1x32k 4x8k 8x1k 64x256 256x64}; do
        for side in "${SIDES[@]}" new; do
          bin=$CHECK && [[ $side != new ]] && bin=$(ab_check_of "$side")
          echo "== $side $c" >>"$OUT/ab.log"
          timeout 60 $bin --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench |phases' >>"$OUT/ab.log"
        done
      done
    done
    # The median (of the two rounds: their mean) per case and side, and the ratios to the base.
    python3 - "$OUT/ab.log" <<'PY' | tee -a "$OUT/ab.log"
import re, sys, collections
t = collections.defaultdict(list)
sides = []
side = case = None
for line in open(sys.argv[1]):
    m = re.match(r"== (\S+) (\S+)", line)
    if m:
        side, case = m.groups()
        if side not in sides:
            sides.append(side)
    m = re.match(r"bench \S+\s+T=\d+\s+([\d.]+) ms", line)
    if m and side:
        t[(case, side)].append(float(m.group(1)))
others = [s for s in sides if s != "base"]
head = f"{'case':10s} {'base ms':>9s}" + "".join(f" {s + ' ms':>9s}" for s in others)
print(head + "".join(f" {'base/' + s:>9s}" for s in others))
mean = lambda x: sum(x) / len(x)
for case in dict.fromkeys(c for c, _ in t):
    if not t[(case, "base")] or not all(t[(case, s)] for s in others):
        continue
    bm = mean(t[(case, "base")])
    ms = [mean(t[(case, s)]) for s in others]
    print(f"{case:10s} {bm:9.3f}" + "".join(f" {m:9.3f}" for m in ms) + "".join(f" {bm / m:9.3f}" for m in ms))
PY
    note "ab: ${revs}vs $GDN_COMMIT timed (ab.log)"
  else
    note "ab: a build FAILED (see ab.log)"
  fi
fi
echo "================ summary"
printf '%s\n' "${SUMMARY[@]}" | tee "$OUT/summary.txt"
