"""Whole-model tests of Convoy's runtime: torchvision architectures with random weights and non-trivial batch-norm
statistics (exported by tools/models/export_torchvision.py with Debian's torch) run through `convoy run` on the CPU
backend (import, passes, planner, real CPU kernels, executor) and compared with onnxruntime on fresh random inputs,
batch 2, 64x64, in NCHW plans, NHWC plans (the CPU default with AVX-512 for models without grouped convolutions other
than depthwise, where oneDNN's brgconv kernels run NHWC and take the residual as a sum post-op; what the CUDA
tensor-core kernels use) and blocked NCHW8c plans (the CPU default otherwise: oneDNN convolutions and pooling keep
activations in nChw8c between steps):
  FP32 within 1e-4 relative error (max |diff| / max |ref|), measured 2e-7 to 1.4e-6;
  FP16 within 1e-2: every layer rounds its activations to 11 significant bits (2^-11 ~ 5e-4 each); measured
  2.5e-4 to 1.7e-3 over the nine families;
  BF16 within 3e-2: 8 significant bits (2^-8 ~ 4e-3 each); measured 2.4e-3 to 9.9e-3.

Set CONVOY_TORCHVISION_MODELS="resnet18 mobilenet_v2" to run a subset (the export takes a minute or so on 2 cores, and
is shared with test_torchvision_models.py through torchvision_export.py, so it runs once per session).
"""
import pathlib
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from test_cli import cli_path, relative_error
from torchvision_export import MODELS, exported_models

CASES = [("fp32", "nchw", 1e-4), ("fp32", "nhwc", 1e-4), ("fp32", "nchw8c", 1e-4), ("fp16", "nchw", 1e-2),
         ("bf16", "nhwc", 3e-2)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return exported_models(tmp_path_factory)


@pytest.mark.parametrize("precision,layout,tolerance", CASES)
@pytest.mark.parametrize("name", MODELS)
def test_runtime_matches_onnxruntime(exported, tmp_path, name, precision, layout, tolerance):
    model = pathlib.Path(exported) / f"{name}.onnx"
    x = np.random.default_rng().uniform(-1, 1, size=(2, 3, 64, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    np.save(tmp_path / "x.npy", x)
    proc = subprocess.run([cli_path(), "run", f"--model={model}", f"--input={tmp_path / 'x.npy'}",
                           f"--output={tmp_path / 'y.npy'}", f"--precision={precision}", f"--layout={layout}", "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    actual = np.load(tmp_path / "y.npy")
    assert actual.shape == expected.shape
    err = relative_error(actual, expected)
    assert err <= tolerance, f"{name} {precision} {layout}: relative error {err}"
