"""Whole-model tests: torchvision architectures with random weights (tools/models/export_torchvision.py, run with
Debian's torch) imported and optimized by Convoy and evaluated by its reference interpreter must match onnxruntime
within 1e-4 relative error (max |diff| / max |ref|), batch 2, 64x64 inputs. Fresh random inputs each run.

The export takes a minute or so on 2 cores; set CONVOY_TORCHVISION_MODELS="resnet18 mobilenet_v2" to run a subset.
"""
import os
import pathlib
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from convoy_model_tool import REPO_ROOT, inspect_model, relative_error, run_model

ALL_MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "efficientnet_b0", "googlenet",
              "shufflenet_v2_x0_5", "mnasnet0_5", "regnet_y_400mf"]
MODELS = os.environ.get("CONVOY_TORCHVISION_MODELS", " ".join(ALL_MODELS)).split()
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="session")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("torchvision")
    subprocess.run([SYSTEM_PYTHON, str(REPO_ROOT / "tools/models/export_torchvision.py"), "--out", str(out),
                    "--size", "64", "--models", *MODELS], check=True, capture_output=True, timeout=900)
    return out


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(exported, name):
    path = pathlib.Path(exported) / f"{name}.onnx"
    x = np.random.default_rng().uniform(-1, 1, size=(2, 3, 64, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    actual = run_model(path, {"images": x})[0]
    assert actual.shape == expected.shape
    err = relative_error(actual, expected)
    assert err <= 1e-4, f"{name}: relative error {err}"
    rc, text = inspect_model(path)
    assert rc == 0 and "BatchNorm(" not in text.split("optimizations:")[0] or name == "densenet121", text
