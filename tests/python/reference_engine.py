"""Runs Convoy's reference path (import, optimize, reference interpreter) on a model through the convoy_model_tool
binary, so Python tests can compare Convoy with onnxruntime.

The binary is looked up in $CONVOY_MODEL_TOOL, then bazel-bin/ (tools/test.sh builds it before running pytest).
"""
import os
import pathlib
import subprocess
import tempfile

import numpy as np

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]


def tool_path():
    candidates = [os.environ.get("CONVOY_MODEL_TOOL", ""),
                  str(REPO_ROOT / "bazel-bin/server/repository/convoy_model_tool")]
    for c in candidates:
        if c and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError("convoy_model_tool not built: run `bazel build //server/repository:convoy_model_tool` "
                            "or set CONVOY_MODEL_TOOL")


def run_model(model_path, inputs, optimize=True):
    """Evaluates `model_path` on {name: float32 array}; returns the outputs as a list in graph output order."""
    with tempfile.TemporaryDirectory() as tmp:
        args = [tool_path(), "run", str(model_path), "--output_dir", tmp]
        if not optimize:
            args.append("--no-optimize")
        for i, (name, value) in enumerate(inputs.items()):
            path = os.path.join(tmp, f"input{i}.raw")
            np.ascontiguousarray(value, dtype=np.float32).tofile(path)
            args += ["--input", f"{name}={path}:{'x'.join(str(d) for d in value.shape)}"]
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            raise RuntimeError(f"convoy_model_tool failed: {proc.stderr.strip()}")
        outputs = []
        for line in pathlib.Path(tmp, "outputs.txt").read_text().splitlines():
            index, _name, *dims = line.split()
            data = np.fromfile(os.path.join(tmp, f"{index}.bin"), dtype=np.float32)
            outputs.append(data.reshape([int(d) for d in dims]))
        return outputs


def inspect_model(model_path, optimize=True):
    args = [tool_path(), "inspect", str(model_path)] + ([] if optimize else ["--no-optimize"])
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout + proc.stderr


def relative_error(actual, expected):
    """max |a - e| / max |e| (a per-tensor relative error that stays meaningful near zeros)."""
    scale = max(float(np.max(np.abs(expected))), 1e-30)
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale
