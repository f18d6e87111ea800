"""Whole-model test of torchvision's ConvNeXt-Tiny (random weights, random layer scales and LayerNorm parameters;
exported by tools/models/export_torchvision_convnext.py with Debian's torch at opset 13). What the export asks of
Convoy: its channels-last LayerNorms written decomposed (ReduceMean over the last axis of the [N,H,W,C] tensor a
Transpose makes, Sub, Pow, Sqrt, Div, Mul, Add: read as one LayerNorm), its Linear layers as MatMul of that 4-D tensor
by a 2-D weight plus an Add of the bias along the last axis (one GEMM with the bias in its epilogue), and GELU in its
Erf form (folded into the same epilogue).

Convoy's reference interpreter and its CPU kernels (NCHW, NHWC, the blocked NCHW8c) against onnxruntime on fresh
random inputs, batch 2, 64x64, FP32: within 1e-4 relative error (max |diff| / max |ref|), the bound of the other
torchvision tests. The CUDA kernels on the emulated GPU at FP16 and BF16, batch 1, 32x32 (the emulation runs every
GPU thread as a fiber: the smallest input ConvNeXt takes, 1x1 after its last downsampling) within 1e-2 and 3e-2, the
FP16 and BF16 bounds of test_whole_models.py. The optimized graph is checked to hold one LayerNorm per LayerNorm layer, one GEMM per
Linear layer with its bias and GELU fused, and no Erf or ReduceMean left."""
import pathlib
import re
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

from conftest import built_binary
from reference_engine import cli_path, inspect_model, relative_error, run_model, run_on

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "convnext_tiny"
CPU_PATHS = [("cpu nchw", ["--layout=nchw"]), ("cpu nhwc", ["--layout=nhwc"]), ("cpu nchw8c", ["--layout=nchw8c"])]


def export(tmp_path_factory, size):
    out = tmp_path_factory.mktemp(f"convnext{size}")
    subprocess.run(["/usr/bin/python3", str(REPO_ROOT / "tools/models/export_torchvision_convnext.py"), "--out",
                    str(out), "--size", str(size)], check=True, capture_output=True, timeout=900)
    return out / f"{NAME}.onnx"


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export(tmp_path_factory, 64)


def onnxruntime_logits(path, x):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]


def test_convnext_tiny_matches_onnxruntime(exported):
    x = np.random.default_rng().uniform(-1, 1, size=(2, 3, 64, 64)).astype(np.float32)
    expected = onnxruntime_logits(exported, x)
    assert expected.shape == (2, 10)
    actual = run_model(exported, {"images": x})[0]
    assert relative_error(actual, expected) <= 1e-4, f"reference: {relative_error(actual, expected)}"
    for what, flags in CPU_PATHS:
        actual = run_on(cli_path(), exported, {"images": x}, "--device=cpu", "--precision=fp32", *flags)[0]
        err = relative_error(actual, expected)
        assert err <= 1e-4, f"{what}: relative error {err}"


def test_convnext_tiny_optimized_graph(exported):
    rc, text = inspect_model(exported)
    assert rc == 0, text
    graph = text.split("optimizations:")[0]
    ops = re.findall(r"^\s*node\s+\S+ = (\w+)\(", graph, flags=re.M)
    # The stem's and 3 downsamplings' LayerNorm2d, one per block (18), the classifier's: 23 LayerNorms.
    assert ops.count("LayerNorm") == 23, ops
    # Two Linear layers per block (bias and, for the first, GELU fused) and the classifier.
    assert ops.count("Gemm") == 37, ops
    assert len(re.findall(r"Gemm\(.*act=gelu", graph)) == 18, graph
    assert "Unary" not in ops and "Binary" in ops, ops  # the layer scales and residual adds remain


@pytest.fixture(scope="module")
def exported_32(tmp_path_factory):
    return export(tmp_path_factory, 32)


# (precision, tolerance): the FP16 and BF16 bounds of test_whole_models.py.
EMULATED_GPU_PRECISIONS = [("fp16", 1e-2), ("bf16", 3e-2)]


@pytest.mark.parametrize("precision,tolerance", EMULATED_GPU_PRECISIONS)
def test_convnext_tiny_emulated_gpu(exported_32, precision, tolerance):
    x = np.random.default_rng().uniform(-1, 1, size=(1, 3, 32, 32)).astype(np.float32)
    expected = onnxruntime_logits(exported_32, x)
    actual = run_on(built_binary("server/tools/convoy_emulated_gpu"), exported_32, {"images": x}, "--device=cuda",
                    f"--precision={precision}")[0]
    err = relative_error(actual, expected)
    assert err <= tolerance, f"emulated gpu {precision}: relative error {err}"
