#!/usr/bin/env python3
"""Counts test cases in JUnit XML files (what gtest under Bazel and pytest write).

    count_results.py DIR_OR_FILE... -> prints "N passed, M failed, K skipped" and lists the failed cases.

A test binary that crashed before writing XML is counted by Bazel's own test.xml, which records it as one failure.
Skipped cases are reported but never counted as passed.
"""
import os
import sys
import xml.etree.ElementTree as ET


def xml_files(paths):
    for path in paths:
        if os.path.isfile(path):
            yield path
        for root, _, files in os.walk(path, followlinks=True):
            for f in files:
                if f.endswith(".xml"):
                    yield os.path.join(root, f)


def main(argv):
    if len(argv) < 2 or any(a in ("-h", "--help") for a in argv[1:]):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    passed = failed = skipped = 0
    failures = []
    for path in sorted(set(xml_files(argv[1:]))):
        try:
            tree = ET.parse(path)
        except (ET.ParseError, OSError) as e:
            failed += 1
            failures.append(f"{path}: unreadable result file ({e})")
            continue
        cases = tree.getroot().iter("testcase")
        for case in cases:
            name = f"{case.get('classname', '')}.{case.get('name', '')}"
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(name)
            elif case.find("skipped") is not None or case.get("status") == "notrun":
                skipped += 1
            else:
                passed += 1
    for f in failures:
        print(f"FAILED: {f}")
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
