"""ConvTranspose (opsets 11 and 13) as single-op ONNX models, Convoy against onnxruntime (or, for auto_pad and
output_shape, against ONNX's reference implementation, which generated ONNX's conformance data and which
onnxruntime does not follow in every padding rule) on every path test_onnx_ops.check runs (the reference
interpreter with and without the passes, the CPU kernels in NCHW, NHWC and NCHW8c, the CUDA kernels on the emulated
GPU), FP32, 1e-5 relative error: strides (equal and not), pads (symmetric and not), output_padding, dilations,
groups (and depthwise), bias, auto_pad SAME_UPPER / SAME_LOWER / VALID and output_shape. Fresh random inputs and
weights each run. A 1-D transposed convolution runs as 2-D with H = 1 (same checks); a 3-D one is refused naming the
node."""
import onnx
import pytest
from onnx import helper

from reference_engine import cli_path, run_on
from test_onnx_ops import check, make_model, rand
from test_onnx_resize import check_onnx_reference


def conv_transpose_model(c, k, hw, kernel, attrs, bias=True, groups=1, opset=13):
    inits = [("w", rand(c, k // groups, *kernel))]
    inputs = ["x", "w"]
    if bias:
        inits.append(("b", rand(k)))
        inputs.append("b")
    if groups != 1:
        attrs = dict(attrs, group=groups)
    node = helper.make_node("ConvTranspose", inputs, ["y"], name="up", **attrs)
    x = {"x": rand(2, c, *hw)}
    return make_model([node], x, ["y"], inits, opset=opset), x


CASES = [
    (3, 4, (5, 6), (3, 3), {}, 1),                                                   # stride 1: a full correlation
    (8, 6, (7, 7), (4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1]), 1),              # FCN-style 2x upsampling
    (4, 5, (4, 5), (3, 3), dict(strides=[3, 2], output_padding=[1, 1]), 1),
    (4, 5, (4, 5), (3, 3), dict(strides=[3, 2], pads=[1, 2, 0, 1]), 1),              # asymmetric pads
    (6, 4, (5, 5), (3, 2), dict(strides=[2, 2], dilations=[2, 2], output_padding=[1, 0]), 2),
    (6, 6, (6, 5), (4, 4), dict(strides=[2, 2], pads=[1, 1, 1, 1]), 6),              # depthwise
    (5, 3, (4, 4), (2, 2), dict(strides=[2, 2], auto_pad="VALID"), 1),
]


@pytest.mark.parametrize("opset", [11, 13])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("c,k,hw,kernel,attrs,groups", CASES)
def test_conv_transpose(tmp_path, c, k, hw, kernel, attrs, groups, bias, opset):
    model, x = conv_transpose_model(c, k, hw, kernel, attrs, bias=bias, groups=groups, opset=opset)
    check(tmp_path, model, x)


@pytest.mark.parametrize("attrs", [dict(strides=[2, 2], auto_pad="SAME_UPPER"),
                                   dict(strides=[2, 2], auto_pad="SAME_LOWER"),
                                   dict(strides=[3, 2], auto_pad="SAME_UPPER", output_shape=[7, 6]),
                                   dict(strides=[3, 2], output_shape=[10, 8]),
                                   dict(strides=[3, 2], output_shape=[10, 8], output_padding=[1, 1])])
def test_conv_transpose_output_shape_and_auto_pad(tmp_path, attrs):
    model, x = conv_transpose_model(2, 3, (3, 3), (3, 3), attrs)
    check_onnx_reference(tmp_path, model, x)


@pytest.mark.parametrize("attrs,groups", [({}, 1), (dict(strides=[2], pads=[1, 0], output_padding=[1]), 1),
                                          (dict(strides=[3], dilations=[2]), 2),
                                          (dict(strides=[2], auto_pad="VALID"), 1)])
def test_conv_transpose_one_d(tmp_path, attrs, groups):
    model, x = conv_transpose_model(4, 6, (7,), (3,), attrs, groups=groups)
    check(tmp_path, model, x)


def test_conv_transpose_three_d_is_refused(tmp_path):
    model, x = conv_transpose_model(2, 3, (4, 4, 4), (3, 3, 3), {})
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    with pytest.raises(RuntimeError) as err:
        run_on(cli_path(), path, x, "--engine=reference")
    assert "node 'up' (ConvTranspose): only 2-D transposed convolution is supported" in str(err.value), err.value
