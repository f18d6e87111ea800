"""tools/count_results.py on crafted Bazel logs, testlogs folders and JUnit files: every Bazel status is accounted
for, shards are read, cached results are listed and never counted, sanitizer re-runs count each case once (a failure
there still counts), pytest's exit codes 2/3/4/5 are failures, skipped cases come with their reason."""
import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "tools" / "count_results.py"
spec = importlib.util.spec_from_file_location("count_results", SCRIPT)
count_results = importlib.util.module_from_spec(spec)
spec.loader.exec_module(count_results)


def junit(path, cases):
    """cases: [(name, outcome, message)] with outcome passed | failed | error | skipped | notrun | gtest_skipped."""
    body = []
    for name, outcome, message in cases:
        inner, attrs = "", ""
        if outcome == "failed":
            inner = f'<failure message="{message}">{message}</failure>'
        elif outcome == "error":
            inner = f'<error message="{message}"/>'
        elif outcome == "skipped":
            inner = f'<skipped message="{message}"/>'
        elif outcome == "notrun":
            attrs = ' status="notrun"'
        elif outcome == "gtest_skipped":
            attrs = ' status="run" result="skipped"'
            inner = f'<skipped message="{message}"/>'
        body.append(f'<testcase classname="Suite" name="{name}"{attrs}>{inner}</testcase>')
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'<?xml version="1.0"?><testsuites><testsuite name="Suite">{"".join(body)}</testsuite>'
                    f'</testsuites>\n')


def bazel_log(lines, executed=None):
    total = executed if executed is not None else len(lines)
    return ("INFO: Analyzed 9 targets (0 packages loaded).\n"
            "==================== Test output for //noise:test:\n"
            "//not/a:summary_line   FAILED in a test log printed before the summary\n"
            "INFO: Build completed, 1 test FAILED, 12 total actions\n"
            + "".join(f"{line}\n" for line in lines)
            + f"\nExecuted {total} out of {total} tests: see above.\n"
            "INFO: Build completed, 1 test FAILED, 12 total actions\n")


def collect(tmp_path, name, lines, sanitizer=None, executed=None):
    log = tmp_path / f"{name}.log"
    log.write_text(bazel_log(lines, executed))
    return count_results.collect_bazel(str(tmp_path / "results"), name, str(log), str(tmp_path / f"testlogs-{name}"),
                                       sanitizer)


def run_count(tmp_path):
    lines = []

    class Out:
        def write(self, text):
            lines.append(text)

    totals = count_results.count(str(tmp_path / "results"), out=Out())
    return totals, "".join(lines)


def test_summary_lines_with_every_status():
    text = bazel_log([
        "//a:pass                                                     PASSED in 0.3s",
        "//a:cached                                          (cached) PASSED in 0.1s",
        "//a:fail                                                     FAILED in 2 out of 4 in 3.4s",
        "//a:slow                                                    TIMEOUT in 300.0s",
        "//a:flaky                                                     FLAKY, failed in 1 out of 2 in 1.0s",
        "//a:nostatus                                              NO STATUS",
        "//a:nobuild                                         FAILED TO BUILD",
        "//a:incomplete                                           INCOMPLETE",
        "//a:skip                                                    SKIPPED",
        "//a:odd                                                 WEIRD STATE",
    ])
    parsed = {t["label"]: (t["status"], t["cached"]) for t in count_results.parse_bazel_summary(text)}
    assert parsed == {
        "//a:pass": ("PASSED", False), "//a:cached": ("PASSED", True), "//a:fail": ("FAILED", False),
        "//a:slow": ("TIMEOUT", False), "//a:flaky": ("FLAKY", False), "//a:nostatus": ("NO STATUS", False),
        "//a:nobuild": ("FAILED TO BUILD", False), "//a:incomplete": ("INCOMPLETE", False),
        "//a:skip": ("SKIPPED", False), "//a:odd": ("WEIRD STATE", False),
    }
    assert count_results.executed_total(text) == (10, 10)


def test_shards_are_read_and_a_missing_shard_fails(tmp_path):
    logs = tmp_path / "testlogs-bazel"
    junit(logs / "a/sharded/shard_1_of_3/test.xml", [("t1", "passed", ""), ("t2", "passed", "")])
    junit(logs / "a/sharded/shard_2_of_3/test.xml", [("t3", "passed", ""), ("t4", "passed", ""),
                                                      ("t5", "passed", "")])
    (logs / "a/sharded/shard_3_of_3").mkdir(parents=True)  # ran, wrote no XML
    junit(logs / "a/plain/test.xml", [("p1", "passed", "")])
    collect(tmp_path, "bazel", ["//a:sharded   PASSED in 1.0s", "//a:plain   PASSED in 0.1s"])
    (passed, failed, skipped), text = run_count(tmp_path)
    assert (passed, failed, skipped) == (6, 1, 0), text
    assert "shard_3_of_3 wrote no test.xml" in text


def test_cached_results_are_listed_and_not_counted(tmp_path):
    logs = tmp_path / "testlogs-bazel"
    junit(logs / "a/cached/test.xml", [("old", "passed", "")])
    junit(logs / "a/fresh/test.xml", [("new", "passed", "")])
    collect(tmp_path, "bazel", ["//a:cached   (cached) PASSED in 0.1s", "//a:fresh   PASSED in 0.1s"])
    (passed, failed, skipped), text = run_count(tmp_path)
    assert (passed, failed, skipped) == (1, 0, 0), text
    assert "CACHED (not run, not counted): [bazel] //a:cached" in text
    assert "1 cached targets not counted" in text


@pytest.mark.parametrize("status", ["TIMEOUT in 300.0s", "NO STATUS", "FAILED TO BUILD", "INCOMPLETE",
                                    "FAILED in 1.0s", "FLAKY, failed in 1 out of 2 in 1.0s", "BRAND NEW STATUS"])
def test_every_non_passing_status_is_a_failure(tmp_path, status):
    logs = tmp_path / "testlogs-bazel"
    junit(logs / "a/t/test.xml", [("case", "passed", "")])  # the XML shows no failure: the status still counts
    collect(tmp_path, "bazel", [f"//a:t   {status}"])
    (passed, failed, _), text = run_count(tmp_path)
    assert failed == 1, text
    assert "FAILED: [bazel] //a:t" in text


def test_failed_cases_in_xml_count_once_not_again_for_the_target(tmp_path):
    logs = tmp_path / "testlogs-bazel"
    junit(logs / "a/t/test.xml", [("good", "passed", ""), ("bad", "failed", "expected 1, got 2"),
                                  ("worse", "error", "crashed")])
    collect(tmp_path, "bazel", ["//a:t   FAILED in 1.0s"])
    (passed, failed, _), text = run_count(tmp_path)
    assert (passed, failed) == (1, 2), text
    assert "Suite.bad: expected 1, got 2" in text


def test_a_passed_target_without_cases_fails(tmp_path):
    junit(tmp_path / "testlogs-bazel/a/empty/test.xml", [])
    collect(tmp_path, "bazel", ["//a:empty   PASSED in 0.1s"])
    (passed, failed, _), text = run_count(tmp_path)
    assert (passed, failed) == (0, 1) and "holds no test case" in text, text


def test_skipped_targets_and_cases_are_listed_with_their_reason(tmp_path):
    junit(tmp_path / "testlogs-bazel/a/t/test.xml", [("ok", "passed", ""), ("gpu", "gtest_skipped", "a.cc:9&#x0A;needs a GPU"),
                                                     ("DISABLED_x", "notrun", "")])
    collect(tmp_path, "bazel", ["//a:t   PASSED in 0.1s", "//a:incompatible   SKIPPED"])
    (passed, failed, skipped), text = run_count(tmp_path)
    assert (passed, failed, skipped) == (1, 0, 3), text
    assert "SKIPPED: //a:t Suite.gpu: a.cc:9: needs a GPU" in text
    assert "SKIPPED: //a:t Suite.DISABLED_x: disabled (not run)" in text
    assert "SKIPPED: //a:incompatible <target>: Bazel SKIPPED the target" in text


def test_sanitizer_reruns_count_each_case_once_and_their_failures_count(tmp_path):
    for name in ("bazel", "asan"):
        logs = tmp_path / f"testlogs-{name}"
        junit(logs / "a/t/test.xml", [("same", "passed", ""),
                                      ("racy", "failed" if name == "asan" else "passed", "heap-use-after-free")])
        junit(logs / "a/u/test.xml", [("only", "passed", "")])
    collect(tmp_path, "bazel", ["//a:t   PASSED in 0.1s", "//a:u   PASSED in 0.1s"])
    collect(tmp_path, "asan", ["//a:t   FAILED in 0.1s", "//a:u   PASSED in 0.1s"], sanitizer="ASan+UBSan")
    (passed, failed, skipped), text = run_count(tmp_path)
    assert (passed, failed, skipped) == (2, 1, 0), text
    assert "[count] asan (ASan+UBSan re-run): 2 targets, 2 passed, 1 failed" in text
    assert "FAILED: [asan] //a:t Suite.racy: heap-use-after-free" in text


def test_summary_count_mismatch_and_empty_pass_fail(tmp_path):
    junit(tmp_path / "testlogs-bazel/a/t/test.xml", [("ok", "passed", "")])
    collect(tmp_path, "bazel", ["//a:t   PASSED in 0.1s"], executed=3)
    collect(tmp_path, "tsan", [], sanitizer="TSan")
    (passed, failed, _), text = run_count(tmp_path)
    assert (passed, failed) == (1, 2), text
    assert "Bazel reports 3 test targets, its summary lines list 1" in text
    assert "bazel test ran no test" in text


def write_pytest(tmp_path, rc, cases):
    xml = tmp_path / "results/pytest/results.xml"
    if cases is not None:
        junit(xml, cases)
    subprocess.run([sys.executable, str(SCRIPT), "record-pytest", "--results", str(tmp_path / "results"), "--pass",
                    "pytest", "--exit-code", str(rc), "--xml", str(xml)], check=True)


@pytest.mark.parametrize("rc,cases,expected,message", [
    (0, [("a", "passed", ""), ("b", "skipped", "no GPU here")], (1, 0, 1), None),
    (1, [("a", "passed", ""), ("b", "failed", "boom")], (1, 1, 0), None),
    (1, [("a", "passed", "")], (1, 1, 0), "exited 1 but its XML shows no failed case"),
    (2, [("a", "passed", "")], (1, 1, 0), "exited 2: interrupted"),
    (5, [], (0, 1, 0), "exited 5: collected no test"),
    (3, None, (0, 1, 0), "exited 3: internal error"),
    (0, None, (0, 1, 0), "without writing"),
])
def test_pytest_exit_codes(tmp_path, rc, cases, expected, message):
    write_pytest(tmp_path, rc, cases)
    totals, text = run_count(tmp_path)
    assert totals == expected, text
    if message:
        assert message in text, text
    if cases and any(o == "skipped" for _, o, _ in cases):
        assert "SKIPPED: pytest Suite.b: no GPU here" in text


def test_step_failures_and_extra_step_xml_count(tmp_path):
    results = tmp_path / "results"
    subprocess.run([sys.executable, str(SCRIPT), "record-failure", "--results", str(results), "--name",
                    "build-without-cuda", "--message", "bazel build failed"], check=True)
    junit(results / "docker_smoke/results.xml", [("image_serves", "passed", ""), ("image_health", "passed", "")])
    (passed, failed, _), text = run_count(tmp_path)
    assert (passed, failed) == (2, 1), text
    assert "build-without-cuda: bazel build failed" in text


@pytest.mark.parametrize("outcome,expected", [("passed", (1, 0, 0)), ("skipped", (0, 0, 1)), ("failed", (0, 1, 0))])
def test_a_step_recorded_as_one_case(tmp_path, outcome, expected):
    subprocess.run([sys.executable, str(SCRIPT), "record-step", "--results", str(tmp_path / "results"), "--name",
                    "test-image-fast", "--outcome", outcome, "--message", "docker cannot run here"], check=True)
    totals, text = run_count(tmp_path)
    assert totals == expected, text
    if outcome != "passed":
        assert "test-image-fast: docker cannot run here" in text, text


def test_command_line_closing_line(tmp_path):
    logs = tmp_path / "testlogs-bazel"
    junit(logs / "a/t/test.xml", [("ok", "passed", "")])
    log = tmp_path / "bazel.log"
    log.write_text(bazel_log(["//a:t   PASSED in 0.1s"]))
    subprocess.run([sys.executable, str(SCRIPT), "collect-bazel", "--results", str(tmp_path / "results"), "--pass",
                    "bazel", "--log", str(log), "--testlogs", str(logs)], check=True)
    record = json.loads((tmp_path / "results/bazel/pass.json").read_text())
    assert record["targets"][0]["xml"] == ["a/t/test.xml"]
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "results")], capture_output=True, text=True,
                         check=True).stdout
    assert out.splitlines()[-1] == "1 passed, 0 failed, 0 skipped", out


def test_stress_passes_give_a_failure_table_and_count_each_case_once(tmp_path):
    flaky_in = {"bazel-2", "bazel-3"}
    for name in ("bazel-1", "bazel-2", "bazel-3"):
        junit(tmp_path / f"testlogs-{name}/a/t/test.xml",
              [("steady", "passed", ""), ("racy", "failed" if name in flaky_in else "passed", "deadline exceeded")])
        status = "FAILED" if name in flaky_in else "PASSED"
        collect(tmp_path, name, [f"//a:t   {status} in 0.1s"])
    for rc, name in ((1, "pytest-1"), (0, "pytest-2")):
        xml = tmp_path / f"results/{name}/results.xml"
        junit(xml, [("served", "failed" if rc else "passed", "one batch went as full")])
        subprocess.run([sys.executable, str(SCRIPT), "record-pytest", "--results", str(tmp_path / "results"),
                        "--pass", name, "--exit-code", str(rc), "--xml", str(xml)], check=True)
    out = subprocess.run([sys.executable, str(SCRIPT), "failure-table", str(tmp_path / "results")],
                         capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("[stress] failures per case over 5 passes (bazel-1, bazel-2, bazel-3, pytest-1, "), out
    # Worst first: 2 of 3 runs, then 1 of 2; the steady case is not listed.
    assert lines[1] == "  2/3  //a:t Suite.racy  [bazel-2, bazel-3]: deadline exceeded", out
    assert lines[2] == "  1/2  pytest Suite.served  [pytest-1]: one batch went as full", out
    assert lines[3] == "[stress] 3 cases ran, 2 failed at least once", out
    (passed, failed, skipped), text = run_count(tmp_path)
    assert (passed, failed, skipped) == (1, 2, 0), text
