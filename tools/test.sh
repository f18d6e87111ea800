#!/usr/bin/env bash
# Builds everything and runs every test, one function per step: a CPU-only build with CUDA hidden, the C++ unit and
# integration tests (Bazel), the fast unit tests again under AddressSanitizer+UBSan (tag "asan") and the concurrency
# tests under ThreadSanitizer (tag "tsan"), the Python client tests (pytest, .venv), and the container image built
# from those binaries, started and queried (deploy/test_image.sh --fast; skipped, with the reason, where Docker cannot
# run). Every test runs: Bazel's
# cached test results are not reused (--nocache_test_results; the build cache is kept).
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
pass_order=0

say() { printf '\n[test] %s\n' "$*"; }

# A step that failed without producing test results (a build error): one failed case.
record_failure() {  # name, message
  python3 "$counter" record-failure --results "$results" --name "$1" --message "$2"
}

# Runs `bazel test <flags> //...` and records every target's status and JUnit files as pass `name`.
bazel_pass() {  # name, sanitizer ("" for none), extra bazel flags...
  local name="$1" sanitizer="$2"; shift 2
  local log="$results/$name.log" testlogs
  say "bazel test $* //..."
  bazel test "${bazel_flags[@]}" "$@" //... 2>&1 | tee "$log" | grep -vE '^(INFO|Loading|Analyzing|\[)' || true
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

step_bazel() { bazel_pass bazel ""; }

# Fast unit tests (emulated CUDA kernels included) again under AddressSanitizer + UBSan (tag "asan").
step_asan() { bazel_pass asan "ASan+UBSan" --config=asan --test_tag_filters=asan --build_tag_filters=asan; }

# The concurrency tests under ThreadSanitizer (tag "tsan").
step_tsan() { bazel_pass tsan "TSan" --config=tsan --test_tag_filters=tsan --build_tag_filters=tsan; }

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
  say "pytest tests/python"
  local rc xml="$results/pytest/results.xml"
  export_binaries
  if [ ! -x "$venv/bin/python" ]; then
    record_failure "pytest" "no virtualenv at $venv: run tools/setup.sh first"
    return
  fi
  mkdir -p "$results/pytest"
  "$venv/bin/python" -m pytest -q -rs tests/python --junitxml="$xml" -p no:cacheprovider
  rc=$?
  record_pytest pytest "$rc" "$xml"
}

# The runtime image from the binaries built above (no Bazel inside Docker): built, started with model_repo/, healthy,
# queried, drained by docker stop. Exit 77 = Docker cannot run here (the reason is in the log): skipped, not passed.
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
}

selected=("${STEPS[@]}")
if [ -n "${CONVOY_TEST_STEPS:-}" ]; then
  read -r -a selected <<<"$CONVOY_TEST_STEPS"
fi
for step in "${selected[@]}"; do
  if [ "${CONVOY_TEST_QUICK:-0}" = 1 ] && [[ " ${QUICK_SKIPS[*]} " == *" $step "* ]]; then
    continue
  fi
  if ! declare -F "step_$step" >/dev/null; then
    record_failure "$step" "tools/test.sh has no step '$step' (steps: ${STEPS[*]})"
    continue
  fi
  step_start=$SECONDS
  "step_$step"
  echo "[test] step $step took $(( SECONDS - step_start )) s"
done

say "results in $results"
python3 "$counter" "$results" >"$results/count.txt" 2>&1
cat "$results/count.txt"
summary="$(tail -1 "$results/count.txt")"
echo "$summary" >"$results/summary.txt"
case "$summary" in
  *" passed, 0 failed"*) exit 0 ;;
  *) exit 1 ;;
esac
