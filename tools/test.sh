#!/usr/bin/env bash
# Installs whatever is still missing (tools/setup.sh: Debian packages, Bazel, the Python test tools, the sample model;
# about a second when nothing is; CONVOY_SKIP_SETUP=1 skips it), then builds everything and runs every test, one
# function per step: a CPU-only build with CUDA hidden, the C++ unit and
# integration tests (Bazel), the fast unit tests again under AddressSanitizer+UBSan (tag "asan") and the concurrency
# tests under ThreadSanitizer (tag "tsan"), the Python client tests (pytest, .venv), and the container image built
# from those binaries, started and queried (deploy/test_image.sh --fast), then two replicas of it restarted in turn
# behind HAProxy under load (deploy/test_scale_out.sh); both skipped, with the reason, where Docker cannot run.
# Every test runs: Bazel's cached test results are not reused (--nocache_test_results; the build cache is kept).
#
# Each step records its results in $CONVOY_TEST_RESULTS (one folder per pass, see tools/count_results.py); the run
# ends with one line "N passed, M failed, K skipped" counting the distinct test cases of this run (sanitizer re-runs
# are reported on their own lines, and a failure there counts in M).
#
#   tools/test.sh                     # every step
#   CONVOY_TEST_QUICK=1 ...           # skip the sanitizer passes and the CUDA-hidden build
#   CONVOY_TEST_STEPS="bazel pytest"  # only these steps (names as in STEPS below)
#   CONVOY_TEST_CACHED=1 ...          # let Bazel reuse cached test results (local iteration; they are listed, and
#                                     # not counted)
#   CONVOY_TEST_STRESS=5 ...          # stress mode: the bazel and pytest steps (or those of CONVOY_TEST_STEPS among
#                                     # bazel, asan, tsan, pytest) 5 times each while one busy loop per CPU burns it,
#                                     # then a table of how often each test failed; a case that failed in any pass
#                                     # counts as failed in the closing line
#   CONVOY_TEST_STRESS_CPUS=0 ...     # in stress mode, also pin the tests to these CPUs (taskset -c; Bazel's
#                                     # --run_under), where they share a core with a busy loop
#   CONVOY_TEST_STRESS_BURNERS=N ...  # in stress mode, N busy loops instead of one per CPU
#
# To add a step: write step_<name> (run it; record its outcome with `bazel_pass`, `record_pytest`, `record_failure`
# or JUnit XML files under "$results/<name>/"), and add <name> to STEPS.
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
results="$(mktemp -d /tmp/convoy-test-results.XXXXXX)"
export CONVOY_TEST_RESULTS="$results"
venv="${CONVOY_VENV:-$repo_root/.venv}"
counter="$repo_root/tools/count_results.py"
bazel_flags=(--keep_going --color=no --curses=no --test_summary=short)
if [ "${CONVOY_TEST_CACHED:-0}" != 1 ]; then
  bazel_flags+=(--nocache_test_results)
fi
STEPS=(nocuda_build bazel asan tsan pytest image)
QUICK_SKIPS=(nocuda_build asan tsan)
STRESS_STEPS=(bazel asan tsan pytest)  # the steps stress mode may repeat (it repeats bazel and pytest by default)
pass_order=0
pass_suffix=""     # "-K" for the K-th pass of stress mode: each pass records its results under its own name
stress_cpus=""     # stress mode: the CPUs the tests are pinned to (empty: not pinned)

say() { printf '\n[test] %s\n' "$*"; }

# A step that failed without producing test results (a build error): one failed case.
record_failure() {  # name, message
  python3 "$counter" record-failure --results "$results" --name "$1" --message "$2"
}

# Runs `bazel test <flags> //...` and records every target's status and JUnit files as pass `name`.
bazel_pass() {  # name, sanitizer ("" for none), extra bazel flags...
  local name="$1" sanitizer="$2"; shift 2
  local log="$results/$name.log" testlogs
  local pinned=()
  if [ -n "$stress_cpus" ]; then pinned=(--run_under="taskset -c $stress_cpus"); fi
  say "bazel test $* ${pinned[*]} //..."
  bazel test "${bazel_flags[@]}" "$@" "${pinned[@]}" //... 2>&1 | tee "$log" |
    grep -vE '^(INFO|Loading|Analyzing|\[)' || true
  testlogs="$(bazel info "$@" bazel-testlogs 2>/dev/null)"
  pass_order=$((pass_order + 1))
  python3 "$counter" collect-bazel --results "$results" --pass "$name" --order "$pass_order" \
    ${sanitizer:+--sanitizer "$sanitizer"} --log "$log" --testlogs "$testlogs" ||
    record_failure "$name-collect" "count_results.py collect-bazel failed for pass $name"
}

# Records a pytest run (its exit code next to its JUnit XML) as pass `name`.
record_pytest() {  # name, exit code, xml
  pass_order=$((pass_order + 1))
  python3 "$counter" record-pytest --results "$results" --pass "$1" --exit-code "$2" --xml "$3" --order "$pass_order"
}

step_nocuda_build() {
  say "CPU-only build (CUDA hidden): bazel build --config=nocuda //..."
  if ! bazel build "${bazel_flags[@]}" --config=nocuda //... >"$results/nocuda.log" 2>&1; then
    tail -30 "$results/nocuda.log"
    record_failure "build-without-cuda" "bazel build --config=nocuda //... failed; see $results/nocuda.log"
  else
    echo "CPU-only build OK"
  fi
}

step_bazel() { bazel_pass "bazel$pass_suffix" ""; }

# Fast unit tests (emulated CUDA kernels included) again under AddressSanitizer + UBSan (tag "asan").
step_asan() {
  bazel_pass "asan$pass_suffix" "ASan+UBSan" --config=asan --test_tag_filters=asan --build_tag_filters=asan
}

# The concurrency tests under ThreadSanitizer (tag "tsan").
step_tsan() { bazel_pass "tsan$pass_suffix" "TSan" --config=tsan --test_tag_filters=tsan --build_tag_filters=tsan; }

# The binaries of the default (optimized) build, wherever the bazel-* convenience links point after other runs, for
# the steps that run them (pytest, image); a caller's own CONVOY_* paths win.
export_binaries() {
  local bin_dir
  bin_dir="$(bazel info --color=no bazel-bin 2>/dev/null)"
  export CONVOY_BAZEL_BIN="${CONVOY_BAZEL_BIN:-$bin_dir}"
  export CONVOY_SERVER="${CONVOY_SERVER:-$bin_dir/server/convoy_server}"
  export CONVOY_CLI="${CONVOY_CLI:-$bin_dir/server/tools/convoy}"
}

step_pytest() {
  if ! ls tests/python/test_*.py >/dev/null 2>&1; then return; fi
  local name="pytest$pass_suffix" rc pinned=()
  local xml="$results/$name/results.xml"
  if [ -n "$stress_cpus" ]; then pinned=(taskset -c "$stress_cpus"); fi
  say "${pinned[*]}${pinned[*]:+ }pytest tests/python"
  export_binaries
  if [ ! -x "$venv/bin/python" ]; then
    record_failure "$name" "no virtualenv at $venv: run tools/setup.sh first"
    return
  fi
  mkdir -p "$results/$name"
  "${pinned[@]}" "$venv/bin/python" -m pytest -q -rs tests/python --junitxml="$xml" -p no:cacheprovider
  rc=$?
  record_pytest "$name" "$rc" "$xml"
}

# The runtime image from the binaries built above (no Bazel inside Docker): built, started with model_repo/, healthy,
# queried, drained by docker stop; then two replicas of it behind the balancer through a rolling restart under load
# (deploy/test_scale_out.sh). Exit 77 = Docker cannot run here (the reason is in the log): skipped, not passed.
step_image() {
  say "deploy/test_image.sh --fast"
  local log="$results/test_image.log" rc outcome message=""
  export_binaries
  CONVOY_VENV="$venv" bash deploy/test_image.sh --fast 2>&1 | tee "$log"
  rc="${PIPESTATUS[0]}"
  case "$rc" in
    0) outcome=passed ;;
    77) outcome=skipped; message="$(grep -m1 '^test_image: SKIPPED' "$log")" ;;
    *) outcome=failed; message="deploy/test_image.sh --fast failed (exit $rc): $(grep -m1 '^test_image: ' "$log"); see $log" ;;
  esac
  python3 "$counter" record-step --results "$results" --name test-image-fast --outcome "$outcome" --message "$message"

  # Two replicas of that image behind HAProxy, each restarted in turn under perf_analyzer: no request may fail
  # (about 80 s).
  say "deploy/test_scale_out.sh"
  log="$results/test_scale_out.log"
  message=""
  CONVOY_VENV="$venv" bash deploy/test_scale_out.sh 2>&1 | tee "$log"
  rc="${PIPESTATUS[0]}"
  case "$rc" in
    0) outcome=passed ;;
    77) outcome=skipped; message="$(grep -m1 '^test_scale_out: SKIPPED' "$log")" ;;
    *) outcome=failed; message="deploy/test_scale_out.sh failed (exit $rc): $(grep -m1 '^test_scale_out: ' "$log"); see $log" ;;
  esac
  python3 "$counter" record-step --results "$results" --name test-scale-out-restart --outcome "$outcome" \
    --message "$message"
}

# ---- stress mode: busy loops, one per CPU, each pinned to its CPU, at the tests' own priority --------------------
burner_pids=()
start_burners() {  # count
  local cpus i
  cpus="$(nproc)"
  for ((i = 0; i < $1; i++)); do
    taskset -c $((i % cpus)) bash -c 'while :; do :; done' &
    burner_pids+=("$!")
  done
  say "stress: $1 busy loops running (pids ${burner_pids[*]})"
}
stop_burners() {
  if [ ${#burner_pids[@]} -gt 0 ]; then kill "${burner_pids[@]}" 2>/dev/null; wait "${burner_pids[@]}" 2>/dev/null; fi
  burner_pids=()
}
trap stop_burners EXIT INT TERM

run_step() {  # step
  local step="$1" step_start=$SECONDS
  if ! declare -F "step_$step" >/dev/null; then
    record_failure "$step" "tools/test.sh has no step '$step' (steps: ${STEPS[*]})"
    return
  fi
  "step_$step"
  echo "[test] step $step${pass_suffix} took $(( SECONDS - step_start )) s"
}

stress_passes="${CONVOY_TEST_STRESS:-0}"
if ! [[ "$stress_passes" =~ ^[0-9]+$ ]]; then
  echo "tools/test.sh: CONVOY_TEST_STRESS must be a number of passes, got '$stress_passes'" >&2
  exit 2
fi
if [ "${CONVOY_SKIP_SETUP:-0}" != 1 ]; then
  setup_start=$SECONDS
  if ! bash tools/setup.sh; then
    echo "[test] tools/setup.sh failed: nothing was built or tested"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
  fi
  echo "[test] step setup took $(( SECONDS - setup_start )) s"
fi

selected=("${STEPS[@]}")
if [ -n "${CONVOY_TEST_STEPS:-}" ]; then
  read -r -a selected <<<"$CONVOY_TEST_STEPS"
elif [ "$stress_passes" -gt 0 ]; then
  selected=(bazel pytest)
fi
if [ "$stress_passes" -gt 0 ]; then
  for step in "${selected[@]}"; do
    if [[ " ${STRESS_STEPS[*]} " != *" $step "* ]]; then
      echo "tools/test.sh: stress mode repeats only the steps ${STRESS_STEPS[*]}, not '$step'" >&2
      exit 2
    fi
  done
  stress_cpus="${CONVOY_TEST_STRESS_CPUS:-}"
  # The tests' own binaries first, unloaded: the passes then measure the tests, not the build.
  say "stress: building the tests of ${selected[*]} before the burners start"
  for step in "${selected[@]}"; do
    case "$step" in
      bazel|pytest) bazel build "${bazel_flags[@]}" //... >"$results/stress-build-$step.log" 2>&1 ;;
      asan) bazel build "${bazel_flags[@]}" --config=asan --build_tag_filters=asan //... \
              >"$results/stress-build-asan.log" 2>&1 ;;
      tsan) bazel build "${bazel_flags[@]}" --config=tsan --build_tag_filters=tsan //... \
              >"$results/stress-build-tsan.log" 2>&1 ;;
    esac || record_failure "stress-build-$step" "building the tests of step $step failed; see $results/stress-build-$step.log"
  done
  start_burners "${CONVOY_TEST_STRESS_BURNERS:-$(nproc)}"
  for ((round = 1; round <= stress_passes; round++)); do
    pass_suffix="-$round"
    for step in "${selected[@]}"; do run_step "$step"; done
  done
  stop_burners
  pass_suffix=""
else
  for step in "${selected[@]}"; do
    if [ "${CONVOY_TEST_QUICK:-0}" = 1 ] && [[ " ${QUICK_SKIPS[*]} " == *" $step "* ]]; then
      continue
    fi
    run_step "$step"
  done
fi

say "results in $results"
python3 "$counter" "$results" >"$results/count.txt" 2>&1
if [ "$stress_passes" -gt 0 ]; then
  python3 "$counter" failure-table "$results" | tee "$results/failure-table.txt"
fi
cat "$results/count.txt"
summary="$(tail -1 "$results/count.txt")"
echo "$summary" >"$results/summary.txt"
case "$summary" in
  *" passed, 0 failed"*) exit 0 ;;
  *) exit 1 ;;
esac
