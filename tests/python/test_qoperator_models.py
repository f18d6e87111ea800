"""Whole-model tests of QOperator models: torchvision ResNet-18 and MobileNetV2 (random weights, 64x64;
tools/models/export_torchvision.py) quantized by onnxruntime's quantize_static in its QOperator form (QLinearConv,
com.microsoft QLinearAdd, QLinearGlobalAveragePool and QGemm on 8-bit tensors, MaxPool and Flatten on 8-bit data;
INT8 per-channel weights, UINT8 activations, INT32 biases; tools/models/quantize_qdq.py --format qoperator). Convoy
reads them as the QDQ models they are equivalent to (server/repository/onnx_qoperator.h), so every convolution and
residual add runs as an INT8 step, and is compared with onnxruntime running the same QOperator file, on fresh random
batches, with the INT8 bounds of test_quantized_models.py: at least 99.9 % of the logits within one quantization step,
at least 99 % identical, none more than one step off, top-1 equal where the lead is more than two steps."""
import onnx
import pytest

from conftest import requires_vnni_cpu
from test_quantized_models import check_all_int8_within_one_step_of_onnxruntime, quantize_exported, quantized_file

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


@requires_vnni_cpu
@pytest.mark.parametrize("layout", ["nchw8c", "nhwc"])
@pytest.mark.parametrize("name", MODELS)
def test_qoperator_model_runs_int8_within_one_step_of_onnxruntime(qoperator, tmp_path, name, layout):
    check_all_int8_within_one_step_of_onnxruntime(qoperator_model(qoperator, name), tmp_path, name, layout,
                                                  f"qoperator {layout}")
