#!/usr/bin/env bash
# Builds everything and runs every test: the C++ unit and integration tests (Bazel), the fast unit tests again under
# AddressSanitizer+UBSan (tag "asan") and the concurrency tests under ThreadSanitizer (tag "tsan"), a CPU-only build
# with CUDA hidden, and the Python client tests (pytest, .venv).
# Ends with one line "N passed, M failed, K skipped" counted from the JUnit results of this run.
#
#   tools/test.sh               # everything
#   CONVOY_TEST_QUICK=1 ...     # skip the sanitizer pass and the CUDA-hidden build
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
results="$(mktemp -d /tmp/convoy-test-results.XXXXXX)"
export CONVOY_TEST_RESULTS="$results"
venv="${CONVOY_VENV:-$repo_root/.venv}"
bazel_flags=(--keep_going --color=no --curses=no --test_summary=short)

say() { printf '\n[test] %s\n' "$*"; }

# A step that fails without producing test results (a build error) is recorded as one failed case.
record_failure() {  # name, message
  local f="$results/step-$1.xml"
  python3 - "$1" "$2" "$f" <<'PY'
import sys
from xml.sax.saxutils import escape, quoteattr
name, msg, out = sys.argv[1:]
open(out, "w").write(f'<testsuite name="tools/test.sh"><testcase classname="step" name={quoteattr(name)}>'
                     f'<failure message={quoteattr(msg)}>{escape(msg)}</failure></testcase></testsuite>\n')
PY
}

# Copies the test.xml of each test target of the last `bazel test` into $results/<label>/ and records targets that
# Bazel failed but whose XML shows no failure (a crash at exit, a sanitizer report after the last test).
collect_bazel_results() {  # prefix, log file
  local prefix="$1" log="$2" testlogs
  testlogs="$(bazel info "${@:3}" bazel-testlogs 2>/dev/null)"
  grep -E '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|FLAKY)' "$log" | while read -r label rest; do
    local rel="${label#//}"; rel="${rel/://}"
    local xml="$testlogs/$rel/test.xml" dest="$results/$prefix/$rel"
    mkdir -p "$dest"
    if [ -f "$xml" ]; then cp "$xml" "$dest/test.xml"; fi
    case "$rest" in
      *PASSED*) ;;
      *)
        if [ ! -f "$dest/test.xml" ] || ! grep -q '<failure' "$dest/test.xml"; then
          record_failure "$prefix-${rel//\//_}" "$label: $rest (see $testlogs/$rel/test.log)"
        fi
        ;;
    esac
  done
}

run_bazel_tests() {  # prefix, extra bazel flags...
  local prefix="$1"; shift
  local log="$results/$prefix.log"
  say "bazel test $* //..."
  bazel test "${bazel_flags[@]}" "$@" //... 2>&1 | tee "$log" | grep -vE '^(INFO|Loading|Analyzing|\[)' || true
  if ! grep -qE '^//[^ ]+ +(\(cached\) )?(PASSED|FAILED|TIMEOUT|NO STATUS|FLAKY)' "$log"; then
    record_failure "$prefix" "bazel test $* ran no test; see $log"
  fi
  grep -qE '^ERROR: ' "$log" && record_failure "$prefix-build" "bazel reported errors: $(grep -m1 '^ERROR: ' "$log")"
  collect_bazel_results "$prefix" "$log" "$@"
}

if [ "${CONVOY_TEST_QUICK:-0}" != 1 ]; then
  say "CPU-only build (CUDA hidden): bazel build --config=nocuda //..."
  if ! bazel build "${bazel_flags[@]}" --config=nocuda //... >"$results/nocuda.log" 2>&1; then
    tail -30 "$results/nocuda.log"
    record_failure "build-without-cuda" "bazel build --config=nocuda //... failed; see $results/nocuda.log"
  else
    echo "CPU-only build OK"
  fi
fi

run_bazel_tests bazel

if [ "${CONVOY_TEST_QUICK:-0}" != 1 ]; then
  # Fast unit tests (emulated CUDA kernels included) again under AddressSanitizer + UBSan (tag "asan"),
  # and the concurrency tests under ThreadSanitizer (tag "tsan").
  run_bazel_tests asan --config=asan --test_tag_filters=asan --build_tag_filters=asan
  run_bazel_tests tsan --config=tsan --test_tag_filters=tsan --build_tag_filters=tsan
fi

if [ -d tests/python ] && ls tests/python/test_*.py >/dev/null 2>&1; then
  say "pytest tests/python"
  # The binaries of the default (optimized) build, wherever the bazel-* convenience links point after other runs.
  bin_dir="$(bazel info bazel-bin 2>/dev/null)"
  export CONVOY_BAZEL_BIN="${CONVOY_BAZEL_BIN:-$bin_dir}"
  export CONVOY_SERVER="${CONVOY_SERVER:-$bin_dir/server/convoy_server}"
  export CONVOY_CLI="${CONVOY_CLI:-$bin_dir/server/tools/convoy}"
  if [ -x "$venv/bin/python" ]; then
    "$venv/bin/python" -m pytest -q tests/python --junitxml="$results/pytest/results.xml" -p no:cacheprovider
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -ne 1 ] && [ ! -s "$results/pytest/results.xml" ]; then
      record_failure "pytest" "pytest exited $rc without results"
    fi
  else
    record_failure "pytest" "no virtualenv at $venv: run tools/setup.sh first"
  fi
fi

say "results in $results"
summary="$(python3 tools/count_results.py "$results" | tee /dev/stderr | tail -1)"
echo "$summary" >"$results/summary.txt"
echo "$summary"
case "$summary" in
  *" 0 failed"*) exit 0 ;;
  *) exit 1 ;;
esac
