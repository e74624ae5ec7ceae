# The pieces every prepared device script shares (sourced: `source docs/prepared/ab_lib.sh` after
# the script's default of GDN_BUDGET_S, its arguments in place: $1, the commit sent). Sides: base,
# v1, v2, ... (.ab's revisions, scripts/ab_base.sh) and new (this tree); each side's check binary is
# bin_of <side>. Results go to $OUT (summary.txt = $R, ab.log).
set -u
OUT=${OUT:-/tmp/gdn-out}
export GDN_COMMIT=${1:-${GDN_COMMIT:-unknown}}
R=$OUT/summary.txt

# This tree and .ab's revisions built (scripts/device.sh's build and ab steps, no timing).
ab_build() {
  GDN_AB_CASES=none scripts/device.sh build,ab > /dev/null 2>&1
  cut -c1-200 "$OUT/summary.txt" 2>/dev/null
}

# A prepared patch PATCH on this tree, unless the tree sent already has it (MARKER found in FILE;
# apply it here before the call where the device's copy has neither git nor patch, and revert
# after): its state on one line, and a non-zero status when it is not in the tree.
apply_prepared_patch() {
  local patch=$1 file=$2 marker=$3
  if grep -q "$marker" "$file"; then
    echo "$(basename "$patch"): in the tree"
  elif (git apply "$patch" 2>/dev/null || patch -p1 <"$patch" >/dev/null 2>&1) && grep -q "$marker" "$file"; then
    echo "$(basename "$patch"): applied"
  else
    echo "$(basename "$patch"): FAILED, nothing run"
    return 1
  fi
}

# A prepared patch (apply_prepared_patch's PATCH FILE MARKER) in this tree, then scripts/device.sh's
# STEPS (default build,ab: this tree and .ab's revisions built, no timing); the script stops
# where the patch is not in the tree.
ab_patch_build() {
  local patch=$1 file=$2 marker=$3 steps=${4:-build,ab}
  apply_prepared_patch "$patch" "$file" "$marker" | tee -a "$R"
  grep -q "$marker" "$file" || exit 1
  GDN_AB_CASES=none bash scripts/device.sh "$steps" >"$OUT/device.txt" 2>&1
  grep -E 'build:|ab:' "$OUT/device.txt" | tail -2 | tee -a "$R"
}

# Seconds left of the call's budget, GDN_BUDGET_S (a script sets its default before sourcing this).
left() { echo $((GDN_BUDGET_S - SECONDS)); }

bin_of() {
  if [[ $1 == new ]]; then echo build-device/tools/cuda_check/gdn_cuda_check; else echo "/tmp/ab-$1/build/tools/cuda_check/gdn_cuda_check"; fi
}

# OK = the sides of SIDES whose check runs each case given (20 s each: a barrier mistake hangs);
# its lines go to stdout and $R. Call it bare, never in a pipe: a pipe runs it in a subshell, and OK
# set there is lost (session 49: `ab_smoke ... | tee -a $R` left OK empty, so no line or timing ran).
ab_smoke() {
  OK=()
  local side c good
  for side in "${SIDES[@]}"; do
    good=1
    for c in "$@"; do
      timeout 20 "$(bin_of "$side")" --bench --no-check --case "$c" > "/tmp/smoke_$side.log" 2>&1 || { good=0; break; }
    done
    if [[ $good == 1 ]]; then OK+=("$side"); else { echo "[$SECONDS s] smoke $side FAILED on $c:"; tail -3 "/tmp/smoke_$side.log"; } | tee -a "$R"; fi
  done
  echo "[$SECONDS s] smoke passed: ${OK[*]}" | tee -a "$R"
}

# This tree's check (bin_of new) on each case with --profile, one line a case into $OUT/LOG (and
# its first 150 characters on stdout), while more than MARGIN seconds of the budget are left.
profile_cases() {
  local margin=$1 log=$2 c
  shift 2
  for c in "$@"; do
    [[ $(left) -gt $margin ]] || break
    echo "$c $(timeout 20 "$(bin_of new)" --bench --no-check --profile --case "$c" 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" |
      tee -a "$OUT/$log" | cut -c1-150
  done
}

has_side() { [[ " ${OK[*]} " == *" $1 "* ]]; }

# Two rounds over the cases, the sides of OK in turn, into $OUT/ab.log; stops once $SECONDS passes
# STOP. AB_PHASES=1: round 1 with the phases (--profile). AB_SKIP: a side not timed.
ab_time() {
  local stop=$1 round c side prof
  shift
  for round in 1 2; do
    prof=
    [[ ${AB_PHASES:-0} == 1 && $round == 1 ]] && prof=--profile
    for c in "$@"; do for side in "${OK[@]}"; do
      [[ $side == "${AB_SKIP:-}" ]] && continue
      [[ $SECONDS -gt $stop ]] && return
      echo "$side $c $(timeout 30 "$(bin_of "$side")" --bench --no-check $prof --case "$c" 2>&1 | grep -E '^bench |phases' | tr '\n' ' ')" >> "$OUT/ab.log"
    done; done
  done
}

# The mean ms per case and side, base over each side, and the extra ratios "a/b" (a's ms over b's).
ab_table() {
  python3 - "$OUT/ab.log" "$@" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys, collections
t = collections.defaultdict(list); sides = []; cases = []
for line in open(sys.argv[1]):
    w = line.split()
    m = re.search(r"bench \S+\s+T=\d+\s+([\d.]+) ms", line)
    if len(w) > 1 and m:
        t[(w[1], w[0])].append(float(m.group(1)))
        if w[0] not in sides: sides.append(w[0])
        if w[1] not in cases: cases.append(w[1])
pairs = [p.split("/") for p in sys.argv[2:]]
print(f"{'case':13s}" + "".join(f" {s:>8s}" for s in sides) + "".join(f" {'base/' + s:>9s}" for s in sides[1:]) +
      "".join(f" {a + '/' + b:>9s}" for a, b in pairs))
for c in cases:
    ms = {s: sum(t[(c, s)]) / len(t[(c, s)]) for s in sides if t[(c, s)]}
    r = lambda a, b: f" {ms[a] / ms[b]:9.3f}" if a in ms and b in ms else f" {'-':>9s}"
    print(f"{c:13s}" + "".join(f" {ms.get(s, 0):8.3f}" for s in sides) + "".join(r("base", s) for s in sides[1:]) +
          "".join(r(a, b) for a, b in pairs))
PY
}

# The correctness cases named ONLY (--only; "" for the whole quick set) of each side given (LIMIT s
# each; /tmp/q_<side>.log, all of them in $OUT/lines_all.log), then the FAIL count of each and every
# line whose err_o or err_state moved from one side to the next (err_state unmoved where a change
# touches o alone).
ab_lines() {
  local only=$1 limit=$2 side
  shift 2
  for side in "$@"; do
    has_side "$side" || continue
    if [[ -n $only ]]; then
      timeout "$limit" "$(bin_of "$side")" --quick --only "$only" > "/tmp/q_$side.log" 2>&1
    else
      timeout "$limit" "$(bin_of "$side")" --quick > "/tmp/q_$side.log" 2>&1
    fi
  done
  for side in "$@"; do echo "== $side"; cat "/tmp/q_$side.log" 2>/dev/null; done > "$OUT/lines_all.log"
  python3 - "$@" <<'PY' | tee -a "$OUT/summary.txt"
import re, sys
def read(side):
    d = {}
    try:
        for line in open(f"/tmp/q_{side}.log"):
            m = re.match(r"(ok|FAIL)\s+(.*?)\s+T=.*?err_o=([\d.e+-]+)(?:.*?err_state=([\d.e+-]+))?", line)
            if m: d[m.group(2)] = (m.group(1), float(m.group(3)), m.group(4))
    except OSError:
        pass
    return d
sides = sys.argv[1:]
ds = [read(s) for s in sides]
for name, d in zip(sides, ds):
    print(f"lines {name}: {sum(x[0] == 'FAIL' for x in d.values())} FAIL of {len(d)} lines with err_o")
print(f"lines whose err_o or err_state moved ({' -> '.join(sides)}):")
for k in ds[-1]:
    vals = [d.get(k) for d in ds]
    if None not in vals and len({x[1:] for x in vals}) > 1:
        print(f"  {k:36s} " + " -> ".join(f"{x[0]} {x[1]:.3e} / {x[2]}" for x in vals))
PY
}

# One CUDA suite of this tree's tests (FILTER: its gtest filter, e.g. 'CUDA*:Heuristics*'; LIMIT s)
# into /tmp/TEST.log, its exit status as the log's last line.
ab_run_suite() {
  timeout "$2" "build-device/tests/$3" --gdn_gpu_suite --gtest_filter="$1" > "/tmp/$3.log" 2>&1
  echo "rc=$?" >> "/tmp/$3.log"
}

# Each suite's exit status, PASSED / FAILED lines and first failures (ab_run_suite's logs) into
# summary.txt.
ab_suite_report() {
  local t
  for t in "$@"; do
    echo "$t $(tail -1 "/tmp/$t.log") $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "/tmp/$t.log" | tr '\n' ' ' | cut -c1-120)" | tee -a "$OUT/summary.txt"
    grep -E '^\[  FAILED  \] [A-Z]' "/tmp/$t.log" | head -6 | cut -c1-150 | tee -a "$OUT/summary.txt"
  done
}

# The suites given (test_forward ...), FILTER and LIMIT s each, all at once in the background
# (they only check; `wait`, then ab_suite_report).
ab_gpu_suites_started() {
  local filter=$1 limit=$2 t
  shift 2
  for t in "$@"; do ab_run_suite "$filter" "$limit" "$t" & done
}

# compute-sanitizer TOOL on the quick cases named ONLY of SIDE, if it passed its smoke run and more
# than 15 s are left before DEADLINE; its output's tail into $OUT/sanitize.log.
ab_sanitize() {
  local side=$1 tool=$2 only=$3 left=$(($4 - SECONDS)) rc
  [[ $left -lt 15 ]] && return
  has_side "$side" || return
  timeout $left compute-sanitizer --tool "$tool" --error-exitcode 9 "$(bin_of "$side")" --quick --only "$only" > /tmp/san.log 2>&1
  rc=$?
  { echo "== $side $tool ($only): rc=$rc"; tail -40 /tmp/san.log; } >> "$OUT/sanitize.log"
  echo "[$SECONDS s] $side $tool rc=$rc $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' /tmp/san.log | tail -1)" | tee -a "$OUT/summary.txt"
}

# SIDE's quick set (TIMEOUT s) into $OUT/quick_SIDE.log, compared with main's committed quick lines
# (session 32, `ce87fc0`: 146 lines with the serial ones): its FAIL lines, then how many of main's lines differ (the extra
# lines a side lists after main's are not compared), the differing ones into summary.txt.
AB_QUICK_REF=bench/results/h200_s32_call3_quick.log
ab_quick() {
  local side=$1 limit=$2 log="$OUT/quick_$1.log" n
  has_side "$side" || return
  n=$(grep -cE '^(ok|FAIL)' "$AB_QUICK_REF")
  timeout "$limit" "$(bin_of "$side")" --quick > "$log" 2>&1
  local diffs
  diffs=$(diff <(grep -E '^(ok|FAIL)' "$AB_QUICK_REF") <(grep -E '^(ok|FAIL)' "$log" | head -"$n"))
  echo "[$SECONDS s] quick $side: $(grep -c '^FAIL ' "$log") FAIL of $(grep -cE '^(ok|FAIL)' "$log") lines; of $n reference lines $(grep -c '^[<>]' <<<"$diffs") differ" | tee -a "$OUT/summary.txt"
  head -20 <<<"$diffs" >> "$OUT/summary.txt"
}
