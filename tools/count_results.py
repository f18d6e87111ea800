#!/usr/bin/env python3
"""Counts the test cases of one tools/test.sh run, so that its closing line means what it says.

tools/test.sh runs its steps (Bazel test passes, pytest, extra steps) and records each step's results in one
results folder, one sub-folder per pass:

    count_results.py collect-bazel --results DIR --pass NAME [--sanitizer "ASan+UBSan"] --log LOG --testlogs PATH
        After a `bazel test`: reads the per-target summary lines of LOG (every Bazel status), copies each target's
        test.xml, or every shard_N_of_M / run_N_of_M test.xml of a sharded or repeated target, from the testlogs
        folder into DIR/NAME/, and writes DIR/NAME/pass.json.
    count_results.py record-pytest --results DIR --pass NAME --exit-code RC --xml FILE
        After pytest: records its exit code next to its JUnit XML (exit 2 with partial results, 5: nothing
        collected, 3/4: pytest itself failed; each is a failed case).
    count_results.py record-failure --results DIR --name STEP --message TEXT
        A step that failed without test results (a build error, a missing virtualenv): one failed case.
    count_results.py record-step --results DIR --name STEP --outcome passed|skipped|failed --message TEXT
        A step that is one test case of its own (the container image check): passed, skipped with its reason
        (counted in K, never as passed) or failed.
    count_results.py failure-table DIR
        After a stress run (tools/test.sh with CONVOY_TEST_STRESS=N: the same steps in several passes): how often
        each case failed, "F/R" (failed in F of the R passes that ran it), worst first, with the passes and the
        first message, then how many cases ran and how many failed at least once.
    count_results.py DIR
        Prints one line per pass, the skipped cases with their reasons, the failed cases, the test targets whose
        results were cached (an earlier run's, never counted), and the closing line
        "N passed, M failed, K skipped".

What the closing line counts: the distinct test cases of this run. A case is one JUnit <testcase> of one Bazel
target (all its shards together) or of pytest. A sanitizer pass re-runs cases of the default pass: it gets its own
line, and a case that fails there counts once in M (not in N) however many passes ran it. A target Bazel reports as
FAILED, TIMEOUT, INCOMPLETE, NO STATUS, FAILED TO BUILD, FLAKY (failed, then passed on a retry) or with a status
this script does not know, and whose XML shows no failed case, adds one failed case named after the target; a
PASSED target whose XML holds no case fails too (it tested nothing). SKIPPED targets and skipped cases are listed
with their reason and counted in K, never as passed. Any other JUnit XML file in DIR (an extra step's) is counted as
a pass of its own.

The exit status is 0 when counting worked (the closing line says whether tests failed), 2 on bad usage.
"""
import argparse
import json
import os
import re
import shutil
import sys
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape, quoteattr

# Bazel's per-target summary line: "//pkg:name   (cached) PASSED in 1.2s", "//pkg:name   FAILED TO BUILD",
# "//pkg:name   FLAKY, failed in 1 out of 2 in 3.4s", "//pkg:name   NO STATUS".
SUMMARY_LINE = re.compile(r"^(//[^\s]+)\s+(\(cached\)\s+)?([A-Z][A-Z ]*[A-Z])(\b.*)?$")
KNOWN_STATUSES = {"PASSED", "FAILED", "TIMEOUT", "FLAKY", "INCOMPLETE", "NO STATUS", "FAILED TO BUILD",
                  "SKIPPED", "REMOTE FAILURE", "BUILD HALTED", "BLAZE HALTED", "FAILED TO RUN"}
EXECUTED_LINE = re.compile(r"^Executed (\d+) out of (\d+) tests?")
RESULT_DIR = re.compile(r"^(shard_\d+_of_\d+|run_\d+_of_\d+|shard_\d+_of_\d+_run_\d+_of_\d+)$")


# ---------------------------------------------------------------------------------------------------------------
# Reading Bazel's output


def parse_bazel_summary(text):
    """The per-target lines of a `bazel test` log: [{"label", "status", "cached", "detail"}], in log order (a label
    seen twice keeps its last line). Unknown upper-case words after a label are kept as the status (and later count
    as a failure), so a new Bazel status never drops out of the count."""
    targets = {}
    lines = text.splitlines()
    # The summary follows Bazel's first "Build completed" line (it prints another after the summary); test logs
    # printed earlier (--test_output=errors) may hold anything, so they are not read when that line is there.
    for i, line in enumerate(lines):
        if re.match(r"^(INFO|ERROR|FAILED): Build (completed|did NOT complete)", line):
            lines = lines[i + 1:]
            break
    for line in lines:
        m = SUMMARY_LINE.match(line.rstrip())
        if not m:
            continue
        label, cached, words, rest = m.group(1), bool(m.group(2)), m.group(3), (m.group(4) or "")
        status = words
        for known in sorted(KNOWN_STATUSES, key=len, reverse=True):
            if words == known or words.startswith(known + " "):
                status = known
                rest = words[len(known):] + rest
                break
        if status not in KNOWN_STATUSES and not re.fullmatch(r"[A-Z]+( [A-Z]+)*", status):
            continue
        targets[label] = {"label": label, "status": status, "cached": cached, "detail": rest.strip(" ,")}
    return list(targets.values())


def executed_total(text):
    """(executed, total) from Bazel's "Executed N out of M tests" line, or None when the log has none."""
    found = None
    for line in text.splitlines():
        m = EXECUTED_LINE.match(line.strip())
        if m:
            found = (int(m.group(1)), int(m.group(2)))
    return found


def target_xml_files(testlogs, label):
    """The JUnit files of one target under a testlogs folder, relative to it: test.xml, or one per shard / run."""
    rel = label[2:].replace(":", "/")
    folder = os.path.join(testlogs, rel)
    files = []
    if os.path.isfile(os.path.join(folder, "test.xml")):
        files.append(os.path.join(rel, "test.xml"))
    if os.path.isdir(folder):
        for entry in sorted(os.listdir(folder)):
            if RESULT_DIR.match(entry) and os.path.isfile(os.path.join(folder, entry, "test.xml")):
                files.append(os.path.join(rel, entry, "test.xml"))
    return files


def expected_result_dirs(testlogs, label):
    """The shard / run folders Bazel created for a target (each must hold a test.xml)."""
    folder = os.path.join(testlogs, label[2:].replace(":", "/"))
    if not os.path.isdir(folder):
        return []
    return sorted(e for e in os.listdir(folder) if RESULT_DIR.match(e) and os.path.isdir(os.path.join(folder, e)))


def collect_bazel(results, pass_name, log_path, testlogs, sanitizer=None):
    with open(log_path, errors="replace") as f:
        text = f.read()
    dest = os.path.join(results, pass_name)
    os.makedirs(dest, exist_ok=True)
    record = {"kind": "bazel", "name": pass_name, "sanitizer": sanitizer, "log": os.path.abspath(log_path),
              "testlogs": testlogs, "targets": [], "errors": [], "executed": executed_total(text)}
    for target in parse_bazel_summary(text):
        target["xml"] = []
        target["missing"] = []
        # A cached target's files are copied too (for the record: they are an earlier run's and never counted).
        for rel in target_xml_files(testlogs, target["label"]):
            os.makedirs(os.path.join(dest, os.path.dirname(rel)), exist_ok=True)
            shutil.copyfile(os.path.join(testlogs, rel), os.path.join(dest, rel))
            target["xml"].append(rel)
        if not target["cached"]:
            have = {os.path.basename(os.path.dirname(x)) for x in target["xml"]}
            target["missing"] = [d for d in expected_result_dirs(testlogs, target["label"]) if d not in have]
        record["targets"].append(target)
    record["errors"] = [line for line in text.splitlines() if line.startswith("ERROR: ")][:20]
    with open(os.path.join(dest, "pass.json"), "w") as f:
        json.dump(record, f, indent=1)
    return record


def write_step_xml(path, name, outcome, message):
    """One JUnit case for a step: outcome passed, skipped (with the reason) or failed."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tag = {"passed": None, "skipped": "skipped", "failed": "failure"}[outcome]
    body = f"<{tag} message={quoteattr(message)}>{escape(message)}</{tag}>" if tag else ""
    with open(path, "w") as f:
        f.write(f'<testsuite name="tools/test.sh"><testcase classname="step" name={quoteattr(name)}>'
                f'{body}</testcase></testsuite>\n')


# ---------------------------------------------------------------------------------------------------------------
# Reading JUnit XML


def one_line(text, limit=300):
    """A JUnit message on one line ("file:line: reason" for gtest's two-line messages), cut at `limit`."""
    text = ": ".join(line.strip() for line in text.strip().splitlines() if line.strip())
    return text if len(text) <= limit else text[:limit] + "..."


def read_cases(path):
    """[(classname.name, outcome, message)] of one JUnit file; outcome is passed, failed or skipped. An unreadable
    file is one failed case."""
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError) as e:
        return [(f"<unreadable {os.path.basename(path)}>", "failed", f"unreadable result file {path}: {e}")]
    cases = []
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '')}.{case.get('name', '')}"
        bad = case.find("failure")
        if bad is None:
            bad = case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            message = one_line(bad.get("message") or bad.text or "")
            cases.append((name, "failed", message or bad.tag))
        elif skipped is not None or case.get("status") == "notrun" or case.get("result") == "skipped":
            reason = ""
            if skipped is not None:
                reason = one_line(skipped.get("message") or skipped.text or "")
            elif case.get("status") == "notrun":
                reason = "disabled (not run)"
            cases.append((name, "skipped", reason or "no reason given"))
        else:
            cases.append((name, "passed", ""))
    return cases


# ---------------------------------------------------------------------------------------------------------------
# Counting


class Tally:
    """Outcomes by case key over every pass; a case's final outcome is failed if any pass failed it."""

    def __init__(self):
        self.outcomes = {}  # key -> {"passed": [...], "failed": [...], "skipped": [...]} of (pass, message)
        self.order = []

    def add(self, key, outcome, pass_name, message=""):
        if key not in self.outcomes:
            self.outcomes[key] = {"passed": [], "failed": [], "skipped": []}
            self.order.append(key)
        self.outcomes[key][outcome].append((pass_name, message))

    def final(self, key):
        o = self.outcomes[key]
        return "failed" if o["failed"] else "passed" if o["passed"] else "skipped"


class PassSummary:
    def __init__(self, name, description):
        self.name, self.description = name, description
        self.counts = {"passed": 0, "failed": 0, "skipped": 0}
        self.targets = 0
        self.cached = []
        self.notes = []

    def line(self):
        c = self.counts
        what = f"{self.targets} targets, " if self.targets else ""
        extra = f", {len(self.cached)} cached targets not counted" if self.cached else ""
        return (f"[count] {self.name} ({self.description}): {what}{c['passed']} passed, {c['failed']} failed, "
                f"{c['skipped']} skipped{extra}")


def count_bazel_pass(folder, record, tally):
    sanitizer = record.get("sanitizer")
    summary = PassSummary(record["name"], f"{sanitizer} re-run" if sanitizer else "bazel test")
    name = record["name"]

    def add(key, outcome, message=""):
        tally.add(key, outcome, name, message)
        summary.counts[outcome] += 1

    for target in record["targets"]:
        label, status = target["label"], target["status"]
        if target["cached"]:
            summary.cached.append(f"{label} ({status}, cached)")
            continue
        summary.targets += 1
        cases = []
        for rel in target["xml"]:
            cases.extend(read_cases(os.path.join(folder, rel)))
        for case, outcome, message in cases:
            add(("bazel", label, case), outcome, message)
        any_failed = any(outcome == "failed" for _, outcome, _ in cases)
        where = f" (see {target_log(record, label)})"
        for shard in target.get("missing", []):
            add(("bazel", label, f"<{shard}>"), "failed", f"{shard} wrote no test.xml{where}")
        if status == "PASSED":
            if not cases:
                add(("bazel", label, "<target>"), "failed", f"PASSED but its XML holds no test case{where}")
        elif status == "SKIPPED":
            add(("bazel", label, "<target>"), "skipped", f"Bazel SKIPPED the target {target.get('detail', '')}".strip())
        elif status == "FLAKY":
            add(("bazel", label, "<flaky>"), "failed",
                f"FLAKY: failed at least once, then passed on a retry ({target.get('detail', '')}){where}")
        elif not any_failed:
            detail = f" {target['detail']}" if target.get("detail") else ""
            known = "" if status in KNOWN_STATUSES else " (a status count_results.py does not know)"
            add(("bazel", label, "<target>"), "failed", f"{status}{detail}{known}{where}")
    if not record["targets"]:
        add(("bazel", f"<pass {name}>", "<run>"), "failed", f"bazel test ran no test; see {record.get('log')}")
    executed = record.get("executed")
    if executed and executed[1] != len(record["targets"]):
        add(("bazel", f"<pass {name}>", "<summary>"), "failed",
            f"Bazel reports {executed[1]} test targets, its summary lines list {len(record['targets'])}")
    for error in record.get("errors", [])[:1]:
        add(("bazel", f"<pass {name}>", "<build>"), "failed", f"bazel reported errors: {error}")
    return summary


def target_log(record, label):
    return os.path.join(record.get("testlogs", "bazel-testlogs"), label[2:].replace(":", "/"), "test.log")


PYTEST_EXITS = {2: "interrupted (collection errors or a crash): its results are incomplete",
                3: "internal error", 4: "usage error", 5: "collected no test"}


def count_pytest_pass(folder, record, tally):
    name = record["name"]
    summary = PassSummary(name, f"pytest, exit {record.get('exit_code')}")
    cases = []
    xml = os.path.join(folder, record.get("xml", "results.xml"))
    have_xml = os.path.isfile(xml) and os.path.getsize(xml) > 0
    if have_xml:
        cases = read_cases(xml)
    for case, outcome, message in cases:
        tally.add(("pytest", case), outcome, name, message)
        summary.counts[outcome] += 1
    rc = record.get("exit_code")
    problem = None
    if rc in PYTEST_EXITS:
        problem = f"pytest exited {rc}: {PYTEST_EXITS[rc]}"
    elif rc == 1 and not any(o == "failed" for _, o, _ in cases):
        problem = "pytest exited 1 but its XML shows no failed case"
    elif rc not in (0, 1):
        problem = f"pytest exited {rc}"
    if not have_xml and problem is None:
        problem = f"pytest exited {rc} without writing {xml}"
    if problem:
        tally.add(("pytest", "<run>"), "failed", name, problem)
        summary.counts["failed"] += 1
    return summary


def count_loose_xml(results, claimed, tally):
    """JUnit files outside the recorded passes (step failures, extra steps): one pass per top-level folder."""
    summaries = {}
    for root, dirs, files in os.walk(results):
        if os.path.abspath(root) in claimed:
            dirs[:] = []
            continue
        for f in sorted(files):
            if not f.endswith(".xml"):
                continue
            path = os.path.join(root, f)
            rel = os.path.relpath(path, results)
            group = rel.split(os.sep)[0] if os.sep in rel else "steps"
            summary = summaries.setdefault(group, PassSummary(group, "JUnit results"))
            for case, outcome, message in read_cases(path):
                tally.add(("xml", rel, case), outcome, group, message)
                summary.counts[outcome] += 1
    return list(summaries.values())


def load_passes(results):
    passes = []
    for root, dirs, files in os.walk(results):
        if "pass.json" in files:
            with open(os.path.join(root, "pass.json")) as f:
                passes.append((root, json.load(f)))
            dirs[:] = []
    passes.sort(key=lambda p: (p[1].get("order", 0), p[0]))
    return passes


def count(results, out=sys.stdout):
    """Prints the report; returns (passed, failed, skipped)."""
    tally = Tally()
    summaries = []
    passes = load_passes(results) if os.path.isdir(results) else []
    for folder, record in passes:
        if record.get("kind") == "bazel":
            summaries.append(count_bazel_pass(folder, record, tally))
        elif record.get("kind") == "pytest":
            summaries.append(count_pytest_pass(folder, record, tally))
    claimed = {os.path.abspath(folder) for folder, _ in passes}
    if os.path.isfile(results):
        for case, outcome, message in read_cases(results):
            tally.add(("xml", results, case), outcome, "xml", message)
    else:
        summaries.extend(count_loose_xml(results, claimed, tally))
    for s in summaries:
        print(s.line(), file=out)
    finals = {key: tally.final(key) for key in tally.order}
    for key in tally.order:
        if finals[key] == "skipped":
            pass_name, reason = tally.outcomes[key]["skipped"][0]
            print(f"SKIPPED: {describe(key)}: {reason}", file=out)
    for s in summaries:
        for c in s.cached:
            print(f"CACHED (not run, not counted): [{s.name}] {c}", file=out)
    for key in tally.order:
        if finals[key] == "failed":
            for pass_name, message in tally.outcomes[key]["failed"]:
                print(f"FAILED: [{pass_name}] {describe(key)}" + (f": {message}" if message else ""), file=out)
    passed = sum(1 for v in finals.values() if v == "passed")
    failed = sum(1 for v in finals.values() if v == "failed")
    skipped = sum(1 for v in finals.values() if v == "skipped")
    print(f"{passed} passed, {failed} failed, {skipped} skipped", file=out)
    return passed, failed, skipped


def collect_tally(results):
    """The outcomes of every recorded pass (Bazel and pytest) of a results folder, by case."""
    tally = Tally()
    for folder, record in load_passes(results) if os.path.isdir(results) else []:
        if record.get("kind") == "bazel":
            count_bazel_pass(folder, record, tally)
        elif record.get("kind") == "pytest":
            count_pytest_pass(folder, record, tally)
    return tally


def failure_table(results, out=sys.stdout):
    """Prints how often each case failed over the passes of a stress run; returns the number of cases that failed
    at least once."""
    tally = collect_tally(results)
    rows = []
    for key in tally.order:
        o = tally.outcomes[key]
        failed, ran = len(o["failed"]), len(o["failed"]) + len(o["passed"])
        if failed:
            passes = ", ".join(p for p, _ in o["failed"])
            rows.append((failed / max(ran, 1), failed, ran, describe(key), passes, o["failed"][0][1]))
    rows.sort(key=lambda r: (-r[0], -r[1], r[3]))
    passes = sorted({p for key in tally.order for outcome in ("passed", "failed")
                     for p, _ in tally.outcomes[key][outcome]},
                    key=lambda name: [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)])
    print(f"[stress] failures per case over {len(passes)} passes ({', '.join(passes)}):", file=out)
    for _, failed, ran, what, where, message in rows:
        print(f"  {failed}/{ran}  {what}  [{where}]" + (f": {one_line(message, 200)}" if message else ""), file=out)
    ran_cases = sum(1 for key in tally.order if tally.outcomes[key]["passed"] or tally.outcomes[key]["failed"])
    print(f"[stress] {ran_cases} cases ran, {len(rows)} failed at least once", file=out)
    return len(rows)


def describe(key):
    if key[0] == "pytest":
        return f"pytest {key[1]}"
    return f"{key[1]} {key[2]}"


# ---------------------------------------------------------------------------------------------------------------


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    if argv[1] in ("collect-bazel", "record-pytest", "record-failure", "record-step"):
        p = argparse.ArgumentParser(prog="count_results.py " + argv[1])
        p.add_argument("--results", required=True)
        if argv[1] == "collect-bazel":
            p.add_argument("--pass", dest="pass_name", required=True)
            p.add_argument("--sanitizer")
            p.add_argument("--log", required=True)
            p.add_argument("--testlogs", required=True)
            p.add_argument("--order", type=int, default=0)
        elif argv[1] == "record-pytest":
            p.add_argument("--pass", dest="pass_name", required=True)
            p.add_argument("--exit-code", type=int, required=True)
            p.add_argument("--xml", required=True)
            p.add_argument("--order", type=int, default=0)
        else:
            p.add_argument("--name", required=True)
            p.add_argument("--message", required=True)
            if argv[1] == "record-step":
                p.add_argument("--outcome", required=True, choices=["passed", "skipped", "failed"])
            else:
                p.set_defaults(outcome="failed")
        args = p.parse_args(argv[2:])
        if argv[1] == "collect-bazel":
            record = collect_bazel(args.results, args.pass_name, args.log, args.testlogs, args.sanitizer)
            record["order"] = args.order
            with open(os.path.join(args.results, args.pass_name, "pass.json"), "w") as f:
                json.dump(record, f, indent=1)
        elif argv[1] == "record-pytest":
            folder = os.path.join(args.results, args.pass_name)
            os.makedirs(folder, exist_ok=True)
            xml = os.path.relpath(os.path.abspath(args.xml), os.path.abspath(folder))
            with open(os.path.join(folder, "pass.json"), "w") as f:
                json.dump({"kind": "pytest", "name": args.pass_name, "exit_code": args.exit_code, "xml": xml,
                           "order": args.order}, f, indent=1)
        else:
            safe = re.sub(r"[^A-Za-z0-9_.-]", "_", args.name)
            write_step_xml(os.path.join(args.results, "steps", f"{safe}.xml"), args.name, args.outcome, args.message)
        return 0
    if argv[1] == "failure-table":
        if len(argv) != 3:
            print("usage: count_results.py failure-table DIR", file=sys.stderr)
            return 2
        failure_table(argv[2])
        return 0
    if argv[1].startswith("-"):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    passed = failed = skipped = 0
    for path in argv[1:]:
        p, f, s = count(path)
        passed, failed, skipped = passed + p, failed + f, skipped + s
    if len(argv) > 2:
        print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
