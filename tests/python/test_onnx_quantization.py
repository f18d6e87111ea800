"""QuantizeLinear / DequantizeLinear (the QDQ form of quantized ONNX models) on every path a model can take: the
reference interpreter and the kernel runtime (CPU NCHW, NHWC, NCHW8c and the emulated GPU), against onnxruntime.

Tolerances, in quantization steps of the output's scale:
- QDQ of a graph input, no arithmetic before it: the same FP32 quotient, rounding and saturation on both sides, so the
  outputs are equal (0 steps).
- A quantized Conv or Gemm (DQ(x), DQ(W) per channel, DQ(int32 bias), then Q -> DQ of the output): onnxruntime fuses
  the pattern into an integer QLinearConv / QLinearMatMul whose requantization rounds acc * (sx * sw / sy); Convoy
  computes the FP32 convolution of the dequantized values and rounds its quotient by sy. The two products differ in
  the last bits only, so an output may land one step apart where the exact value lies at a rounding tie: at most one
  step anywhere, and on at most 2 % of the outputs (measured: 0 to 0.3 %).
Fresh random inputs, weights and scales each run.
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from reference_engine import inspect_model, run_model, run_on
from test_onnx_ops import KERNEL_PATHS, make_model

RNG = np.random.default_rng()


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def every_path(path, inputs):
    """(name, outputs) for the reference interpreter (optimized or not) and each kernel path, FP32."""
    for optimize in (False, True):
        yield f"reference optimize={optimize}", run_model(path, inputs, optimize=optimize)
    for name, binary, flags in KERNEL_PATHS:
        yield name, run_on(binary(), path, inputs, *flags, "--precision=fp32")


def check_steps(tmp_path, model, inputs, step, max_steps, max_fraction_off=0.0):
    """Every output within `max_steps` quantization steps of onnxruntime's, and at most `max_fraction_off` of them
    differing at all."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    for name, actual in every_path(path, inputs):
        for a, e in zip(actual, expected):
            assert a.shape == e.shape, (name, a.shape, e.shape)
            steps = np.abs(a.astype(np.float64) - e) / step
            assert steps.max() <= max_steps + 1e-3, f"{name}: {steps.max()} steps apart (allowed {max_steps})"
            off = float(np.mean(steps > 1e-3))
            assert off <= max_fraction_off, f"{name}: {off:.4f} of the outputs differ (allowed {max_fraction_off})"


def scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype=dtype), name)


@pytest.mark.parametrize("opset", [10, 13, 19, 21])
@pytest.mark.parametrize("qtype", [np.uint8, np.int8])
def test_qdq_of_an_input_rounds_half_to_even_and_saturates(tmp_path, opset, qtype):
    scale = np.float32(RNG.uniform(0.004, 0.02))
    zero_point = 0 if qtype == np.int8 and opset < 13 else int(RNG.integers(10, 100))
    zero_point = zero_point if qtype == np.uint8 else zero_point - 60
    x = rand(2, 3, 6, 5, low=-3, high=3)  # beyond the range: both ends saturate
    x.flat[:8] = (np.arange(8) - 4 + 0.5) * scale  # exact ties: round half to even
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"], opset=opset)
    model.graph.initializer.extend([scalar("s", scale, np.float32), scalar("z", zero_point, qtype)])
    check_steps(tmp_path, model, {"x": x}, scale, max_steps=0)


def quantize_per_channel(w, axis=0):
    """Symmetric INT8 per-channel quantization of w along `axis`, as onnxruntime's quantizer writes weights."""
    reduce_axes = tuple(a for a in range(w.ndim) if a != axis)
    scales = (np.abs(w).max(axis=reduce_axes) / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    q = np.clip(np.round(w / scales.reshape(shape)), -127, 127).astype(np.int8)
    return q, scales


def quantized_layer(op, x, out_scale, out_zero_point, with_relu):
    """DQ(Q(x)) -> op(DQ(int8 W per channel), DQ(int32 bias)) [-> Relu] -> Q -> DQ, onnxruntime's QDQ layer."""
    x_scale, x_zero_point = np.float32(2.0 / 255), np.uint8(128)
    if op == "Conv":
        w = rand(6, x.shape[1], 3, 3)
        attrs = dict(pads=[1, 1, 1, 1], strides=[2, 1])
    else:
        w = rand(7, x.shape[1])  # Gemm transB=1: [N, K], channels on axis 0
        attrs = dict(transB=1)
    wq, w_scales = quantize_per_channel(w)
    bias_scales = (x_scale * w_scales).astype(np.float32)
    bias_q = RNG.integers(-3000, 3000, size=w.shape[0]).astype(np.int32)
    inits = [numpy_helper.from_array(wq, "wq"), numpy_helper.from_array(w_scales, "ws"),
             numpy_helper.from_array(np.zeros(w.shape[0], np.int8), "wz"),
             numpy_helper.from_array(bias_q, "bq"), numpy_helper.from_array(bias_scales, "bs"),
             numpy_helper.from_array(np.zeros(w.shape[0], np.int32), "bz"),
             scalar("xs", x_scale, np.float32), scalar("xz", x_zero_point, np.uint8),
             scalar("ys", out_scale, np.float32), scalar("yz", out_zero_point, np.uint8)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
             helper.make_node("DequantizeLinear", ["wq", "ws", "wz"], ["wd"], axis=0),
             helper.make_node("DequantizeLinear", ["bq", "bs", "bz"], ["bd"], axis=0),
             helper.make_node(op, ["xd", "wd", "bd"], ["acc"], **attrs)]
    last = "acc"
    if with_relu:
        nodes.append(helper.make_node("Relu", ["acc"], ["act"]))
        last = "act"
    nodes += [helper.make_node("QuantizeLinear", [last, "ys", "yz"], ["yq"]),
              helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])]
    model = make_model(nodes, {"x": x}, ["y"])
    model.graph.initializer.extend(inits)
    return model


@pytest.mark.parametrize("with_relu", [False, True])
@pytest.mark.parametrize("op", ["Conv", "Gemm"])
def test_quantized_conv_and_gemm_per_channel_weights_int32_bias(tmp_path, op, with_relu):
    x = rand(2, 5, 7, 6) if op == "Conv" else rand(3, 40)
    out_scale, out_zero_point = np.float32(RNG.uniform(0.01, 0.03)), np.uint8(0 if with_relu else 120)
    model = quantized_layer(op, x, out_scale, out_zero_point, with_relu)
    check_steps(tmp_path, model, {"x": x}, out_scale, max_steps=1, max_fraction_off=0.02)


def refused(tmp_path, model):
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    rc, text = inspect_model(path)
    assert rc != 0
    return text


def test_quantized_tensor_read_by_another_op_fails_naming_it(tmp_path):
    x = {"x": rand(1, 3, 4, 4)}
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant"),
             helper.make_node("Relu", ["q"], ["y"], name="relu")]
    model = make_model(nodes, x, ["y"])
    model.graph.initializer.extend([scalar("s", 0.1, np.float32), scalar("z", 3, np.uint8)])
    text = refused(tmp_path, model)
    assert "node 'relu' (Relu): tensor 'q' is the UINT8 per-tensor scale 0.1 zero point 3 output of" in text, text
    assert "node 'quant' (QuantizeLinear)" in text and "only through a DequantizeLinear" in text, text


@pytest.mark.parametrize("case,message", [
    ("per_axis_activation", "per-axis quantization of a tensor computed at run time is not supported"),
    ("mismatched_pair", "differ; Convoy folds only matching pairs"),
    ("int16", "quantized type INT16 is not supported"),
    ("block_size", "blocked quantization (block_size 2) is not supported"),
    ("runtime_scale", "the scale (input 1) must be a constant"),
])
def test_unsupported_quantization_fails_naming_node_and_what(tmp_path, case, message):
    x = {"x": rand(1, 4, 4, 4)}
    s, z, opset = scalar("s", 0.1, np.float32), scalar("z", 3, np.uint8), 13
    attrs, dq_inputs = {}, ["q", "s", "z"]
    extra = []
    if case == "per_axis_activation":
        s = numpy_helper.from_array(np.full(4, 0.1, np.float32), "s")
        z = numpy_helper.from_array(np.full(4, 3, np.uint8), "z")
        attrs = dict(axis=1)
    elif case == "mismatched_pair":
        extra = [scalar("s2", 0.2, np.float32)]
        dq_inputs = ["q", "s2", "z"]
    elif case == "int16":
        z, opset = scalar("z", 3, np.int16), 21
    elif case == "block_size":
        s = numpy_helper.from_array(np.full((1, 2, 4, 4), 0.1, np.float32), "s")
        z = numpy_helper.from_array(np.full((1, 2, 4, 4), 3, np.uint8), "z")
        attrs, opset = dict(axis=1, block_size=2), 21
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], name="quant", **attrs),
             helper.make_node("DequantizeLinear", dq_inputs, ["y"], name="dequant", **attrs)]
    if case == "runtime_scale":
        nodes = [helper.make_node("Relu", ["x"], ["s_rt"], name="relu"),
                 helper.make_node("QuantizeLinear", ["x", "s_rt", "z"], ["q"], name="quant"),
                 helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], name="dequant")]
    model = make_model(nodes, x, ["y"], opset=opset)
    model.graph.initializer.extend([s, z] + extra)
    text = refused(tmp_path, model)
    assert "(QuantizeLinear)" in text or "(DequantizeLinear)" in text or "(Relu)" in text, text
    assert message in text, text
