"""Runs Convoy's reference path (import, optimize, FP32 reference interpreter) on a model through
`convoy run|inspect --engine=reference`, so Python tests can compare Convoy with onnxruntime op by op.

The CLI is looked up as test_cli.cli_path() does: $CONVOY_CLI, then bazel-bin/server/tools/convoy.
"""
import pathlib
import subprocess
import tempfile

import numpy as np

from test_cli import cli_path, relative_error  # noqa: F401 (relative_error is re-exported for the op tests)


def run_model(model_path, inputs, optimize=True):
    """Evaluates `model_path` on {name: float32 array}; returns the outputs as a list in graph output order."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [cli_path(), "run", "--engine=reference", f"--model={model_path}", f"--output_dir={tmp}",
                f"--optimize={str(optimize).lower()}"]
        for i, (name, value) in enumerate(inputs.items()):
            path = pathlib.Path(tmp, f"input{i}.npy")
            np.save(path, np.ascontiguousarray(value, dtype=np.float32))
            args.append(f"--input={name}={path}")
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"convoy run --engine=reference failed: {proc.stderr.strip()}")
        count = sum(1 for line in proc.stdout.splitlines() if line.startswith("wrote "))
        return [np.load(pathlib.Path(tmp, f"{i}.npy")) for i in range(count)]


def inspect_model(model_path, optimize=True):
    args = [cli_path(), "inspect", "--engine=reference", f"--model={model_path}", f"--optimize={str(optimize).lower()}"]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr
