"""The build reads no header from the host outside what it declares (bazel/cuda_configure.bzl, docs/building.md).

gcc searches /usr/local/include by default, and Bazel's header check trusts every file under the compiler's built-in
folders, so a header found there (some machines link the CUDA toolkit's headers into /usr/local/include) compiles
here and fails on an ordinary machine. The compiler's dependency files (.d, one per compiled source in bazel-out)
name every header each compile read: every one must be in the workspace, in an external repository (the CUDA
toolkit reaches the build only as @local_cuda), or in the Debian system folders (/usr/include, /usr/lib/gcc).
"""
import os
import pathlib
import re

import pytest

from conftest import REPO_ROOT

# Absolute header paths a compile may read: Debian's packages and gcc's own headers.
ALLOWED_ABSOLUTE = ("/usr/include/", "/usr/lib/gcc/")


def output_folder():
    """bazel-out/k8-opt/bin of the default build ($CONVOY_BAZEL_BIN when set, as tools/test.sh does)."""
    folder = os.environ.get("CONVOY_BAZEL_BIN") or str(REPO_ROOT / "bazel-out" / "k8-opt" / "bin")
    if not os.path.isdir(folder):
        pytest.fail(f"no build outputs at {folder}: build first (tools/test.sh does)", pytrace=False)
    return pathlib.Path(folder)


def dependency_files():
    return [pathlib.Path(root) / f for root, _, files in os.walk(output_folder(), followlinks=True)
            for f in files if f.endswith(".d") and "/_objs/" in root + "/"]


def test_compiles_read_no_header_outside_the_declared_inputs():
    files = dependency_files()
    # The server alone compiles a few hundred sources: a handful means the build was not found.
    assert len(files) > 50, f"only {len(files)} dependency files under {output_folder()}"
    leaks = {}
    for path in files:
        text = path.read_text(errors="replace").replace("\\\n", " ")
        for dep in re.split(r"\s+", text.partition(":")[2]):
            if dep.startswith("/") and not dep.startswith(ALLOWED_ABSOLUTE):
                leaks.setdefault(dep, str(path.relative_to(output_folder())))
    assert not leaks, ("compiles read headers from the host outside the declared inputs (header: first .d that "
                       "names it):\n" + "\n".join(f"  {h}  ({d})" for h, d in sorted(leaks.items())[:30]))

