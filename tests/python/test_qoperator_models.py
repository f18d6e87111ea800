"""Whole-model tests of QOperator models: torchvision ResNet-18 and MobileNetV2 (random weights, 64x64;
tools/models/export_torchvision.py) quantized by onnxruntime's quantize_static in its QOperator form (QLinearConv,
com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm on 8-bit tensors, MaxPool and Flatten on 8-bit data;
INT8 per-channel weights, UINT8 activations, INT32 biases; tools/models/quantize_qdq.py --format qoperator). Convoy
reads them as the QDQ models they are equivalent to (server/repository/onnx_qoperator.h), so every convolution and
residual add runs as an INT8 step, and is compared with onnxruntime running the same QOperator file, on fresh random
batches, with the INT8 bounds of test_quantized_models.py: at least 99.9 % of the logits within one quantization step,
at least 99 % identical, none more than one step off, top-1 equal where the lead is more than two steps."""
import re

import numpy as np
import onnx
import pytest

from test_quantized_models import (compare_int8_with_onnxruntime, onnxruntime_int8, quantize_exported, quantized_file,
                                   run_convoy)

MODELS = ["resnet18", "mobilenet_v2"]


@pytest.fixture(scope="module")
def qoperator(tmp_path_factory):
    return quantize_exported(tmp_path_factory, MODELS, quant_format="qoperator", suffix="qop")


def qoperator_model(folder, name):
    return quantized_file(folder, name, suffix="qop")


@pytest.mark.parametrize("name", MODELS)
def test_qoperator_file_is_what_the_test_claims(qoperator, name):
    """The file really is in QOperator form: no DequantizeLinear but the last one, QLinear nodes throughout."""
    ops = [(n.domain, n.op_type) for n in onnx.load(str(qoperator_model(qoperator, name))).graph.node]
    assert ("", "QLinearConv") in ops and ("com.microsoft", "QLinearAdd") in ops, ops
    assert ("com.microsoft", "QGemm") in ops and ("com.microsoft", "QLinearGlobalAveragePool") in ops, ops
    assert [op for _, op in ops].count("DequantizeLinear") == 1, ops


@pytest.mark.parametrize("layout", ["nchw8c", "nhwc"])
@pytest.mark.parametrize("name", MODELS)
def test_qoperator_model_runs_int8_within_one_step_of_onnxruntime(qoperator, tmp_path, name, layout):
    model = qoperator_model(qoperator, name)
    x = np.random.default_rng().uniform(-1, 1, size=(32, 3, 64, 64)).astype(np.float32)
    actual, log = run_convoy(model, x, tmp_path, f"--layout={layout}")
    folded = re.search(r"(\d+) of (\d+) quantized convolutions and (\d+) of (\d+) quantized adds run INT8", log)
    assert folded and folded.group(1) == folded.group(2) and int(folded.group(1)) > 0, log[-3000:]
    assert folded.group(3) == folded.group(4), log[-3000:]
    compare_int8_with_onnxruntime(name, f"qoperator {layout}", actual, onnxruntime_int8(model, x))
