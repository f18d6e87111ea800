"""Whole-model tests of QDQ models: torchvision ResNet-18 and MobileNetV2 (random weights, non-trivial batch-norm
statistics, 64x64; tools/models/export_torchvision.py) quantized by onnxruntime's own quantize_static (QDQ format,
INT8 per-channel weights, UINT8 activations, INT32 biases, min-max calibration on 8 seeded random images;
tools/models/quantize_qdq.py), run by `convoy run` on the CPU (import, passes, planner, kernels) and compared with
onnxruntime's INT8 output (its default optimizations fuse the QDQ patterns into integer QLinearConv / QLinearAdd /
QLinearMatMul) on fresh random batches.

By default Convoy runs every convolution and residual add between quantize-dequantize steps as an INT8 step
(server/runtime/quantized_conv_folding.h): exact INT32 accumulation and the requantization onnxruntime's QLinearConv
computes (rounded half to even before the zero point is added), the adds as onnxruntime's x86 QLinearAdd computes
them (scale ratios and FMAs), 8-bit tensors from one such step to the next; the rest of the graph (max pooling,
global average pooling, the classifier) stays FP32 with its quantization simulated exactly. Both models fold every
convolution and add (the load log says so, and the test checks it). Against onnxruntime's INT8 logits (32 images x 10
logits per model and layout), measured on an AVX-512 VNNI Xeon over 3 runs: every logit identical, for both models
and both layouts (every quantized activation too: tools/models/compare_qdq_layers.py). Before the conv's explicit
round (oneDNN rounded v + zero point, not round(v) + zero point: a few outputs in 100000) MobileNetV2 was 0.997-1.000
and ResNet-18 0.93-0.975 within one step; with ONNX's own formula for the add (DequantizeLinear, Add, QuantizeLinear
in FP32, which onnxruntime's x86 QLinearAdd rounds differently for about 4 of 10^6 operand pairs) they stayed
identical, but ResNet-50 at 224x224 did not (78 % of its logits identical; now all). Asserted: the issue's bound, at
least 99.9 % of the logits within one step, at least 99 % identical, none more than one step off, and top-1 equal on
every image whose top-1 leads by more than two steps.

`--int8_residual_add=single_rounding` fuses each residual add into its convolution with one rounding at the end (the
conv's output is not rounded to 8 bits first), which is no longer onnxruntime's arithmetic: measured over 3 runs of 32
images, ResNet-18 0.71-0.76 of the logits within one step (23-29 % identical, at most 4 steps off), MobileNetV2
0.97 (50-54 % identical, at most 2 steps off). Asserted, per model: at least 0.5 (ResNet-18) and 0.9 (MobileNetV2)
within one step, at most 6 and 3 steps off, every add fused that way, and top-1 equal where the lead is more than
twice that many steps.

`--int8=false` simulates every quantization in FP32 (the path all QDQ models took before the INT8 steps). Where an
intermediate value lies at a rounding tie the simulation and onnxruntime's integers pick neighbouring steps, and the
step travels on through the layers (onnxruntime's own FP32-simulated run, optimizations off, differs from its INT8 run
by up to 4 steps on ResNet-18). Measured before the INT8 steps (80 logits, over 30 random batches): ResNet-18 2 to 5
steps at most, 75 to 97.5 % within one step; MobileNetV2 0 to 2 steps at most, 97.5 to 100 % within one step. The
simulated path keeps the old, looser bounds: every logit within 8 steps, at least 60 % within one step, and top-1
equal where the lead is more than 16 steps. One more test serves the QDQ ResNet-18 over gRPC (INT8 steps) and checks
the response with the INT8 bounds.

With both libraries' instruction sets lowered to AVX2 (ONEDNN_MAX_CPU_ISA, CONVOY_MAX_CPU_ISA; as on a CPU without
VNNI, where oneDNN's INT8 convolutions saturate and decline) both models run every convolution and add INT8 on
Convoy's own exact kernels, with the same bounds. The comparisons with onnxruntime need a VNNI CPU: without one,
onnxruntime's own INT8 sums saturate.
"""
import os
import pathlib
import re
import shutil
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from conftest import ConvoyServer, requires_vnni_cpu
from test_cli import cli_path
from torchvision_export import exported_models

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
QDQ_MODELS = ["resnet18", "mobilenet_v2"]


def quantize_exported(tmp_path_factory, names, quant_format="qdq", suffix="qdq"):
    """onnxruntime's quantize_static of the exported torchvision models `names` (tools/models/quantize_qdq.py) into a
    folder of NAME_SUFFIX.onnx files."""
    exported = pathlib.Path(exported_models(tmp_path_factory))
    out = tmp_path_factory.mktemp(suffix)
    sys.path.insert(0, str(REPO_ROOT / "tools/models"))
    from quantize_qdq import quantize
    for name in names:
        if (exported / f"{name}.onnx").exists():
            quantize(exported / f"{name}.onnx", out / f"{name}_{suffix}.onnx", size=64, quant_format=quant_format)
    return out


def quantized_file(folder, name, suffix="qdq"):
    model = folder / f"{name}_{suffix}.onnx"
    if not model.exists():
        pytest.fail(f"{name} was not exported (CONVOY_TORCHVISION_MODELS leaves it out?)")
    return model


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    return quantize_exported(tmp_path_factory, QDQ_MODELS)


def steps_from_onnxruntime(actual, expected):
    """|actual - expected| in units of the logits' quantization step: the smallest gap between distinct values
    onnxruntime wrote (its last Q -> DQ)."""
    assert actual.shape == expected.shape
    step = float(np.min(np.diff(np.unique(expected))))
    return step, np.abs(actual.astype(np.float64) - expected) / step


def top1_agrees_where_confident(actual, expected, step, lead_steps):
    ranked = np.sort(expected, axis=1)
    confident = (ranked[:, -1] - ranked[:, -2]) > lead_steps * step
    assert np.array_equal(actual.argmax(1)[confident], expected.argmax(1)[confident])


# INT8 bounds per model (module docstring): the fraction of logits within one step, and the most steps any may be off.
INT8_BOUNDS = {"mobilenet_v2": (0.999, 1), "resnet18": (0.999, 1)}
MIN_IDENTICAL = 0.99


def compare_int8_with_onnxruntime(name, what, actual, expected):
    """The INT8 bounds of the module docstring; prints the measured numbers."""
    step, steps = steps_from_onnxruntime(actual, expected)
    within_one = float(np.mean(steps <= 1.001))
    exact = float(np.mean(steps <= 0.001))
    print(f"{name} {what} INT8: step {step:.3g}, max {steps.max():.2f} steps, {within_one:.4f} within one step, "
          f"{exact:.4f} identical ({steps.size} logits)")
    min_within_one, max_steps = INT8_BOUNDS[name]
    assert within_one >= min_within_one, f"{name}: only {within_one:.4f} of the logits within one step"
    assert exact >= MIN_IDENTICAL, f"{name}: only {exact:.4f} of the logits identical"
    assert steps.max() <= max_steps + 0.001, f"{name}: a logit is {steps.max():.2f} steps from onnxruntime's"
    top1_agrees_where_confident(actual, expected, step, 2 * max_steps)


def compare_simulated_with_onnxruntime(name, what, actual, expected):
    """The looser bounds of the FP32-simulated path (--int8=false); prints the measured numbers."""
    step, steps = steps_from_onnxruntime(actual, expected)
    within_one = float(np.mean(steps <= 1.001))
    print(f"{name} {what} simulated: step {step:.3g}, max {steps.max():.2f} steps, {within_one:.3f} within one step")
    assert steps.max() <= 8.001, f"{name}: a logit is {steps.max():.2f} steps from onnxruntime's"
    assert within_one >= 0.6, f"{name}: only {within_one:.3f} of the logits within one step"
    top1_agrees_where_confident(actual, expected, step, 16)


def run_convoy(model, x, tmp_path, *flags, env=None):
    """`convoy run` of the QDQ model on x; returns its output and its load log."""
    np.save(tmp_path / "x.npy", x)
    proc = subprocess.run([cli_path(), "run", f"--model={model}", f"--input={tmp_path / 'x.npy'}",
                           f"--output={tmp_path / 'y.npy'}", f"--max_batch_size={len(x)}", *flags],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return np.load(tmp_path / "y.npy"), proc.stderr


def qdq_model(quantized, name):
    return quantized_file(quantized, name)


def onnxruntime_int8(model, x):
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]


def check_all_int8_within_one_step_of_onnxruntime(model, tmp_path, name, layout, what, env=None):
    """`convoy run` of a quantized file on 32 fresh random images: every quantized convolution and add runs INT8 (the
    load log), and the logits keep the INT8 bounds against onnxruntime's run of the same file."""
    x = np.random.default_rng().uniform(-1, 1, size=(32, 3, 64, 64)).astype(np.float32)
    actual, log = run_convoy(model, x, tmp_path, f"--layout={layout}", env=env)
    folded = re.search(r"(\d+) of (\d+) quantized convolutions and (\d+) of (\d+) quantized adds run INT8", log)
    assert folded and folded.group(1) == folded.group(2) and int(folded.group(1)) > 0, log[-3000:]
    assert folded.group(3) == folded.group(4), log[-3000:]
    compare_int8_with_onnxruntime(name, what, actual, onnxruntime_int8(model, x))


@requires_vnni_cpu
@pytest.mark.parametrize("layout", ["nchw8c", "nhwc"])
@pytest.mark.parametrize("name", QDQ_MODELS)
def test_qdq_model_runs_int8_within_one_step_of_onnxruntime(quantized, tmp_path, name, layout):
    check_all_int8_within_one_step_of_onnxruntime(qdq_model(quantized, name), tmp_path, name, layout, layout)


# --int8_residual_add=single_rounding bounds per model (module docstring): the fraction of logits within one step of
# onnxruntime's, and the most steps any may be off.
SINGLE_ROUNDING_BOUNDS = {"mobilenet_v2": (0.9, 3), "resnet18": (0.5, 6)}


@requires_vnni_cpu
@pytest.mark.parametrize("name", QDQ_MODELS)
def test_qdq_model_with_residual_adds_rounded_once_stays_close_to_onnxruntime(quantized, tmp_path, name):
    """The residual adds fused into their convolutions with one rounding (no longer onnxruntime's arithmetic bit for
    bit): every add is fused that way (the load log), and the logits stay near onnxruntime's."""
    model = qdq_model(quantized, name)
    x = np.random.default_rng().uniform(-1, 1, size=(32, 3, 64, 64)).astype(np.float32)
    actual, log = run_convoy(model, x, tmp_path, "--int8_residual_add=single_rounding")
    folded = re.search(r"(\d+) of (\d+) quantized adds run INT8 \((\d+) of the adds fused and rounded once", log)
    assert folded and folded.group(1) == folded.group(2) == folded.group(3), log[-3000:]
    step, steps = steps_from_onnxruntime(actual, onnxruntime_int8(model, x))
    within_one = float(np.mean(steps <= 1.001))
    print(f"{name} single_rounding: step {step:.3g}, max {steps.max():.2f} steps, {within_one:.4f} within one step, "
          f"{float(np.mean(steps <= 0.001)):.4f} identical ({steps.size} logits)")
    min_within_one, max_steps = SINGLE_ROUNDING_BOUNDS[name]
    assert within_one >= min_within_one, f"{name}: only {within_one:.4f} of the logits within one step"
    assert steps.max() <= max_steps + 0.001, f"{name}: a logit is {steps.max():.2f} steps from onnxruntime's"
    top1_agrees_where_confident(actual, onnxruntime_int8(model, x), step, 2 * max_steps)


@requires_vnni_cpu
@pytest.mark.parametrize("name", QDQ_MODELS)
def test_qdq_model_simulated_in_fp32_stays_close_to_onnxruntime(quantized, tmp_path, name):
    model = qdq_model(quantized, name)
    x = np.random.default_rng().uniform(-1, 1, size=(8, 3, 64, 64)).astype(np.float32)
    actual, log = run_convoy(model, x, tmp_path, "--int8=false")
    assert re.search(r"\b0 of \d+ quantized convolutions and 0 of \d+ quantized adds run INT8", log), log[-3000:]
    compare_simulated_with_onnxruntime(name, "nchw8c", actual, onnxruntime_int8(model, x))


@requires_vnni_cpu
@pytest.mark.parametrize("name", QDQ_MODELS)
def test_qdq_model_on_a_cpu_without_vnni_runs_int8_on_the_own_kernels(quantized, tmp_path, name):
    """Where oneDNN's INT8 convolutions would not be exact (a CPU without VNNI, such as an AVX2-only EPYC; here
    emulated with both libraries' instruction sets lowered to AVX2, ONEDNN_MAX_CPU_ISA and CONVOY_MAX_CPU_ISA, which
    also leaves out the AMX kernel such a CPU lacks), every quantized convolution and add still runs INT8, on
    Convoy's own exact kernels (`convoy inspect` names them), and the logits keep the INT8 bounds against
    onnxruntime's (exact on this VNNI CPU)."""
    model = qdq_model(quantized, name)
    env = {**os.environ, "ONEDNN_MAX_CPU_ISA": "AVX2", "CONVOY_MAX_CPU_ISA": "avx2"}
    check_all_int8_within_one_step_of_onnxruntime(model, tmp_path, name, "nhwc", "without VNNI", env=env)
    proc = subprocess.run([cli_path(), "inspect", f"--model={model}", "--max_batch_size=1"], capture_output=True,
                          text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    algorithms = set(re.findall(r"algorithm (cpu\.quantized_conv2d\.[\w.]+)", proc.stdout))
    assert algorithms and all(a.startswith("cpu.quantized_conv2d.gemm_nhwc") for a in algorithms), algorithms


CONFIG = """name: resnet18_qdq
format: onnx
max_batch_size: 8
inputs:
  - name: images
    datatype: FP32
    dims: [3, 64, 64]
outputs:
  - name: logits
    datatype: FP32
    dims: [10]
dynamic_batching:
  max_queue_delay_microseconds: 100
"""


@requires_vnni_cpu
def test_server_serves_a_qdq_model(quantized, tmp_path):
    """The QDQ ResNet-18 in a model repository, served over gRPC (KServe v2), batch 4."""
    import tritonclient.grpc as grpcclient
    model_dir = tmp_path / "repo" / "resnet18_qdq"
    (model_dir / "1").mkdir(parents=True)
    shutil.copy(quantized / "resnet18_qdq.onnx", model_dir / "1" / "model.onnx")
    (model_dir / "config.yaml").write_text(CONFIG)
    server = ConvoyServer(tmp_path / "repo", tmp_path / "server.log")
    server.start()
    try:
        x = np.random.default_rng().uniform(-1, 1, size=(4, 3, 64, 64)).astype(np.float32)
        client = server.client()
        request = grpcclient.InferInput("images", list(x.shape), "FP32")
        request.set_data_from_numpy(x)
        result = client.infer("resnet18_qdq", [request]).as_numpy("logits")
        client.close()
    finally:
        assert server.stop() == 0, server.log_tail()
    expected = ort.InferenceSession(str(quantized / "resnet18_qdq.onnx"),
                                    providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    compare_int8_with_onnxruntime("resnet18", "served", result, expected)
