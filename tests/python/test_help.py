"""Every tool answers `--help` with its usage on stdout and exit code 0, and does nothing else.

The tools are found, not listed: every script with a `#!` line under tools/, deploy/ and bench/, the GPU check's
entry scripts (tests/gpu/run_gpu_check.sh, prepare.sh), and the built binaries (convoy_server, convoy,
convoy_health_probe, the emulated GPU check). A tool that ignored --help and started its real work (a build, a test
run, a server) would run into the timeout and fail. Python scripts run with this interpreter (the .venv) unless
they import Debian's torch, which only /usr/bin/python3 has.
"""
import pathlib
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, built_binary

SCRIPT_GLOBS = ["tools/**/*.sh", "tools/**/*.py", "deploy/**/*.sh", "deploy/**/*.py", "bench/**/*.py", "bench/**/*.sh",
                "tests/gpu/run_gpu_check.sh", "tests/gpu/prepare.sh"]

def needs_debian_python(script):
    """Scripts that import Debian's torch (python3-torch) at the top run with /usr/bin/python3: the .venv has none."""
    return re.search(r"^(import|from) torch", (REPO_ROOT / script).read_text(), re.M) is not None

BINARIES = ["server/convoy_server", "server/tools/convoy", "deploy/convoy_health_probe",
            "tests/gpu/gpu_check_emulated"]
TIMEOUT_S = 60


def entry_scripts():
    found = set()
    for pattern in SCRIPT_GLOBS:
        for path in REPO_ROOT.glob(pattern):
            if path.is_file() and path.read_bytes()[:2] == b"#!":
                found.add(str(path.relative_to(REPO_ROOT)))
    return sorted(found)


def run_help(command):
    try:
        run = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{' '.join(command)} did not return within {TIMEOUT_S} s: it does not handle --help")
    return run


def check_usage(run, name):
    assert run.returncode == 0, f"{name}: exit code {run.returncode}\n{run.stdout[-800:]}\n{run.stderr[-800:]}"
    lines = [l for l in run.stdout.splitlines() if l.strip()]
    assert len(lines) >= 2, f"{name}: --help printed {len(lines)} lines on stdout\n{run.stdout}\n{run.stderr[-800:]}"
    text = run.stdout.lower()
    assert "usage" in text or pathlib.Path(name).name.lower() in text, \
        f"{name}: --help output neither says 'usage' nor names the tool\n{run.stdout}"


def test_the_tools_are_found():
    scripts = entry_scripts()
    for expected in ["tools/setup.sh", "tools/test.sh", "tools/run_server.sh", "deploy/test_image.sh",
                     "bench/serving_benchmark.py", "tests/gpu/run_gpu_check.sh"]:
        assert expected in scripts, f"{expected} not found among {scripts}"


@pytest.mark.parametrize("script", entry_scripts())
def test_script_help(script):
    if script.endswith(".py"):
        command = ["/usr/bin/python3" if needs_debian_python(script) else sys.executable, script, "--help"]
    else:
        command = ["bash", script, "--help"]
    check_usage(run_help(command), script)


@pytest.mark.parametrize("binary", BINARIES)
def test_binary_help(binary):
    check_usage(run_help([built_binary(binary), "--help"]), binary)


@pytest.mark.parametrize("args", [["help"], ["run", "--help"], ["-h"]])
def test_cli_help_forms(args):
    check_usage(run_help([built_binary("server/tools/convoy"), *args]), "convoy")
