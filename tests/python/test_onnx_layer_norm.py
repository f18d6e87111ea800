"""LayerNormalization (opset 17) as single-op ONNX models, Convoy against onnxruntime on every path
test_onnx_ops.check runs (the reference interpreter with and without the passes, the CPU kernels in NCHW, NHWC and
NCHW8c, the CUDA kernels on the emulated GPU), FP32, 1e-5 relative error: the last axis (ConvNeXt's channels-last
form), several trailing axes, the channel axis of an NCHW image written as ConvNeXt's LayerNorm2d exports it
(Transpose, LayerNormalization over the last axis, Transpose back), epsilon, with and without a bias, and the
optional Mean and InvStdDev outputs; and the decomposed form exporters write before opset 17 (ReduceMean, Sub, Pow,
ReduceMean, Add, Sqrt, Div, Mul, Add), which the importer reads as one LayerNorm. Fresh random inputs (offset from
zero, so the centering matters) and weights each run. The refusals name the node and the opset or tensor."""
import numpy as np
import onnx
import pytest
from onnx import helper

from reference_engine import inspect_model
from test_onnx_ops import check, make_model, rand, refusal


def layer_norm_model(x_shape, axis, bias=True, stats=False, epsilon=None, opset=17):
    rank = len(x_shape)
    normalized = x_shape[axis % rank:]
    inits = [("scale", rand(*normalized, low=0.5, high=1.5))]
    inputs = ["x", "scale"]
    if bias:
        inits.append(("bias", rand(*normalized)))
        inputs.append("bias")
    outputs = ["y", "mean", "inv_std_dev"] if stats else ["y"]
    attrs = {"axis": axis}
    if epsilon is not None:
        attrs["epsilon"] = epsilon
    node = helper.make_node("LayerNormalization", inputs, outputs, name="ln", **attrs)
    x = {"x": rand(*x_shape, low=1.0, high=4.0)}
    return make_model([node], x, outputs, inits, opset=opset), x


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("shape,axis", [((2, 6, 5), -1), ((2, 3, 4, 5), 1), ((2, 3, 4, 5), 2), ((3, 7, 7, 24), -1),
                                        ((4, 40), 1)])
def test_layer_norm(tmp_path, shape, axis, bias):
    model, x = layer_norm_model(shape, axis, bias=bias)
    check(tmp_path, model, x)


@pytest.mark.parametrize("shape,axis", [((2, 6, 5), -1), ((2, 3, 4, 5), 2)])
def test_layer_norm_statistics_outputs(tmp_path, shape, axis):
    model, x = layer_norm_model(shape, axis, stats=True, epsilon=0.1)
    check(tmp_path, model, x)


def test_layer_norm_over_the_channels_of_an_image(tmp_path):
    """ConvNeXt's LayerNorm2d as torch.onnx writes it at opset 17: NCHW -> NHWC, LayerNormalization over C, back."""
    c = 12
    nodes = [helper.make_node("Transpose", ["x"], ["nhwc"], perm=[0, 2, 3, 1]),
             helper.make_node("LayerNormalization", ["nhwc", "scale", "bias"], ["normalized"], name="ln", axis=-1,
                              epsilon=1e-6),
             helper.make_node("Transpose", ["normalized"], ["y"], perm=[0, 3, 1, 2])]
    inits = [("scale", rand(c, low=0.5, high=1.5)), ("bias", rand(c))]
    x = {"x": rand(2, c, 5, 6, low=-2.0, high=3.0)}
    check(tmp_path, make_model(nodes, x, ["y"], inits, opset=17), x)


def test_layer_norm_refusals(tmp_path):
    model, x = layer_norm_model((2, 6, 5), -1, opset=16)
    message = refusal(tmp_path, model, x)
    assert ("node 'ln' (LayerNormalization): LayerNormalization is not part of ONNX opset 16 (it appears at opset 17)"
            in message), message
    # A scale computed at run time.
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("LayerNormalization", ["x", "r"], ["y"], name="ln", axis=1)]
    x = {"x": rand(2, 5)}
    message = refusal(tmp_path, make_model(nodes, x, ["y"], opset=17), x)
    assert "node 'ln' (LayerNormalization): input 1 ('r', the Scale) is computed at run time" in message, message
    # Normalizing over the dynamic batch axis.
    model, x = layer_norm_model((2, 6, 5), 0)
    message = refusal(tmp_path, model, x)
    assert ("node 'ln' (LayerNormalization): axis 0 normalizes over the dynamic batch dimension of input 'x' "
            "[N,6,5]" in message), message


def decomposed_layer_norm(x_shape, axes, square="Pow", affine=True, opset=13):
    """The layer normalization exporters write before opset 17 (torch.onnx's F.layer_norm at opset 13):
    ReduceMean, Sub, Pow (or Mul), ReduceMean, Add(epsilon), Sqrt, Div, then Mul(scale) and Add(bias)."""
    axes_attr = {"axes": axes} if opset < 18 else {}
    axes_in = ["axes"] if opset >= 18 else []
    nodes = [helper.make_node("ReduceMean", ["x"] + axes_in, ["mean"], **axes_attr),
             helper.make_node("Sub", ["x", "mean"], ["d"]),
             (helper.make_node("Pow", ["d", "two"], ["sq"]) if square == "Pow"
              else helper.make_node("Mul", ["d", "d"], ["sq"])),
             helper.make_node("ReduceMean", ["sq"] + axes_in, ["var"], **axes_attr),
             helper.make_node("Constant", [], ["eps"], value=helper.make_tensor("eps", onnx.TensorProto.FLOAT, [],
                                                                                [1e-5])),
             helper.make_node("Add", ["var", "eps"], ["e"]),
             helper.make_node("Sqrt", ["e"], ["s"]),
             helper.make_node("Div", ["d", "s"], ["n" if affine else "y"])]
    inits = [("two", np.array(2.0, np.float32))] if square == "Pow" else []
    if opset >= 18:
        inits.append(("axes", np.array(axes, np.int64)))
    rank = len(x_shape)
    positive = sorted(a % rank for a in axes)
    if affine:
        if positive == [1]:  # the channels of NCHW: a [C,1,1] scale and bias
            shape = (x_shape[1], 1, 1)
        else:
            shape = tuple(x_shape[a] for a in positive)
        inits += [("scale", rand(*shape, low=0.5, high=1.5)), ("bias", rand(*shape))]
        nodes += [helper.make_node("Mul", ["n", "scale"], ["scaled"]), helper.make_node("Add", ["scaled", "bias"], ["y"])]
    x = {"x": rand(*x_shape, low=-1.0, high=3.0)}
    return make_model(nodes, x, ["y"], inits, opset=opset), x


@pytest.mark.parametrize("x_shape,axes,square,affine,opset", [
    ((2, 7, 7, 16), [-1], "Pow", True, 13),     # ConvNeXt's channels-last LayerNorm as torch.onnx writes it
    ((2, 16, 5, 6), [1], "Pow", True, 13),      # the channels of NCHW (ConvNeXt's LayerNorm2d written by hand)
    ((2, 6, 10), [-1], "Mul", False, 13),
    ((2, 3, 4, 5), [2, 3], "Pow", True, 18),    # axes as an input (opset 18)
])
def test_decomposed_layer_norm_is_one_step(tmp_path, x_shape, axes, square, affine, opset):
    model, x = decomposed_layer_norm(x_shape, axes, square, affine, opset)
    check(tmp_path, model, x)
    rc, text = inspect_model(tmp_path / "model.onnx")
    assert rc == 0, text
    assert "LayerNorm(" in text and "ReduceMean" not in text and "Sqrt" not in text, text


def test_decomposed_layer_norm_read_elsewhere_is_not_folded(tmp_path):
    """When an intermediate (the deviation) is also a graph output the pattern is not folded: its ReduceMeans import
    as means, and the Pow of runtime data (an op Convoy evaluates only at load time) is refused, naming it."""
    model, x = decomposed_layer_norm((2, 6, 10), [-1], affine=False)
    model.graph.output.append(helper.make_tensor_value_info("d", onnx.TensorProto.FLOAT, None))
    message = refusal(tmp_path, model, x)
    assert "ReduceMean" not in message and "Convoy evaluates Pow only at load time" in message, message
