"""Per-op tests: a single-op ONNX model built with the onnx helper, evaluated by onnxruntime and by Convoy on every
path a model can take: the reference interpreter (import, with and without the optimization passes) and the real
kernel runtime (import, optimize, plan, run) on the CPU in NCHW, NHWC and the blocked NCHW8c (the CPU defaults are
NHWC with AVX-512 for models without grouped convolutions, NCHW8c otherwise) and on
the emulated GPU (the CUDA kernels on the CPU). Outputs must agree with onnxruntime to 1e-5 relative error (max |diff| / max |ref|): FP32 on
both sides, a different summation order at most. Fresh random inputs and weights each run.

Every run goes through a long-lived `convoy jobs` process per CLI binary (reference_engine.py), so the ~70 cases
pay the process start-up once.
"""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import built_binary
from reference_engine import cli_path, inspect_model, relative_error, run_model, run_on

RNG = np.random.default_rng()


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def make_model(nodes, inputs, output_names, initializers=(), opset=13, dynamic_batch=True):
    batch = lambda v: ["N"] if dynamic_batch else [v.shape[0]]
    graph = helper.make_graph(
        nodes, "op_test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, batch(v) + list(v.shape[1:])) for n, v in inputs.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in output_names],
        initializer=[numpy_helper.from_array(v, n) for n, v in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


# The kernel runtime's paths: (name, binary, flags).
KERNEL_PATHS = [("cpu nchw", cli_path, ["--device=cpu", "--layout=nchw"]),
                ("cpu nhwc", cli_path, ["--device=cpu", "--layout=nhwc"]),
                ("cpu nchw8c", cli_path, ["--device=cpu", "--layout=nchw8c"]),  # blocked
                ("emulated gpu", lambda: built_binary("server/tools/convoy_emulated_gpu"), ["--device=cuda"])]


def compare(what, actual, expected, tol):
    assert len(actual) == len(expected), (what, len(actual), len(expected))
    for a, e in zip(actual, expected):
        assert a.shape == e.shape, (what, a.shape, e.shape)
        err = relative_error(a, e)
        assert err <= tol, f"{what}: rel err {err} > {tol}"


def check(tmp_path, model, inputs, tol=1e-5, kernel_refusal=None):
    """`model` on onnxruntime vs the reference interpreter (optimized or not) and the kernel runtime (CPU NCHW, CPU
    NHWC, emulated GPU), all FP32. `kernel_refusal`: the kernel runtime has no kernel for this case; every kernel
    path must then refuse the model at load with this message (naming the node) instead of running it. When a
    kernel appears, the check fails and the case must be moved to the compared ones."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    expected = session.run(None, inputs)
    for optimize in (False, True):
        compare(f"reference optimize={optimize}", run_model(path, inputs, optimize=optimize), expected, tol)
    for name, binary, flags in KERNEL_PATHS:
        if kernel_refusal is None:
            compare(name, run_on(binary(), path, inputs, *flags, "--precision=fp32"), expected, tol)
            continue
        with pytest.raises(RuntimeError) as err:
            run_on(binary(), path, inputs, *flags, "--precision=fp32")
        assert kernel_refusal in str(err.value), f"{name}: {err.value}"


# Cases the kernel runtime refuses at load (no kernel yet); the reference interpreter runs them. Listed in
# docs/reliability.md ("Single-op ONNX tests") for the kernel library's owners.
BROADCAST_REFUSAL = ("cannot broadcast {} onto [N,6,5,5]: the kernel supports the same shape, [N,C,1,1], [1,C,1,1], "
                     "a scalar, and an operand whose axes other than ones are one block of the output's")


CONV_CASES = [
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[0, 1, 1, 0]),
    dict(kernel_shape=[3, 3], dilations=[2, 2], pads=[2, 2, 2, 2]),
    dict(kernel_shape=[3, 3], group=4),
    dict(kernel_shape=[5, 5], strides=[2, 2], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[4, 4], strides=[3, 3], auto_pad="SAME_LOWER"),
    dict(kernel_shape=[1, 1], auto_pad="VALID"),
]


@pytest.mark.parametrize("attrs", CONV_CASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv(tmp_path, attrs, bias):
    group = attrs.get("group", 1)
    w = rand(8, 8 // group, *attrs["kernel_shape"])
    inits = [("w", w)] + ([("b", rand(8))] if bias else [])
    node = helper.make_node("Conv", ["x", "w"] + (["b"] if bias else []), ["y"], **attrs)
    x = {"x": rand(2, 8, 11, 10)}
    check(tmp_path, make_model([node], x, ["y"], inits), x)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("MaxPool", dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)),
    ("MaxPool", dict(kernel_shape=[2, 2], dilations=[2, 2])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])),
    ("AveragePool", dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER")),
    ("GlobalAveragePool", {}),
    ("GlobalMaxPool", {}),
])
def test_pool(tmp_path, op, attrs):
    x = {"x": rand(2, 3, 9, 11)}
    check(tmp_path, make_model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], x, ["y"]), x)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", dict(kernel_shape=[3, 3], dilations=[2, 3], pads=[2, 1, 1, 2], strides=[2, 1], ceil_mode=1)),
    ("AveragePool", dict(kernel_shape=[2, 3], dilations=[3, 2], pads=[1, 1, 1, 1], strides=[2, 2],
                         count_include_pad=1)),
    ("AveragePool", dict(kernel_shape=[3, 2], dilations=[2, 2], strides=[1, 3], ceil_mode=1)),
])
def test_dilated_pool_in_every_layout(tmp_path, op, attrs):
    """Dilated windows on every kernel path; 16 channels, so the blocked NCHW8c plan pools in the blocked layout."""
    x = {"x": rand(2, 16, 10, 11)}
    check(tmp_path, make_model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], x, ["y"], opset=19), x)


@pytest.mark.parametrize("op,shape,attrs", [
    ("MaxPool", (3, 12), dict(kernel_shape=[3], strides=[2], pads=[1, 1])),
    ("AveragePool", (3, 12), dict(kernel_shape=[4], strides=[3], ceil_mode=1)),
    ("AveragePool", (3, 11), dict(kernel_shape=[3], auto_pad="SAME_UPPER", count_include_pad=1)),
    ("MaxPool", (2, 5, 6, 7), dict(kernel_shape=[2, 3, 3], strides=[2, 1, 2], pads=[0, 1, 1, 1, 1, 0])),
    ("AveragePool", (2, 5, 6, 7), dict(kernel_shape=[3, 2, 3], strides=[2, 2, 2], ceil_mode=1)),
    ("AveragePool", (2, 5, 6, 7), dict(kernel_shape=[3, 3, 3], pads=[1, 1, 1, 1, 1, 1], count_include_pad=1)),
])
def test_pool_1d_and_3d(tmp_path, op, shape, attrs):
    """1-D pooling as 2-D with H = 1, 3-D as a pooling over H,W then one over D (the window is a box)."""
    x = {"x": rand(2, *shape)}
    check(tmp_path, make_model([helper.make_node(op, ["x"], ["y"], name="pool", **attrs)], x, ["y"]), x)


@pytest.mark.parametrize("op,attrs", [
    ("Relu", {}), ("Sigmoid", {}), ("Tanh", {}), ("LeakyRelu", dict(alpha=0.2)), ("HardSigmoid", {}),
    ("HardSigmoid", dict(alpha=0.3, beta=0.4)), ("HardSwish", {}), ("Softmax", dict(axis=1)), ("Identity", {}),
])
def test_unary(tmp_path, op, attrs):
    x = {"x": rand(2, 6, 4, 4, low=-4, high=4)}
    opset = 14 if op == "HardSwish" else 13
    check(tmp_path, make_model([helper.make_node(op, ["x"], ["y"], **attrs)], x, ["y"], opset=opset), x)


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_clip_attrs_and_inputs(tmp_path, opset):
    x = {"x": rand(2, 3, 4, 4, low=-8, high=8)}
    if opset < 11:
        node = helper.make_node("Clip", ["x"], ["y"], min=0.0, max=6.0)
        inits = []
    else:
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
        inits = [("lo", np.array(0.0, np.float32)), ("hi", np.array(6.0, np.float32))]
    check(tmp_path, make_model([node], x, ["y"], inits, opset=opset), x)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("other_shape", [(1, 6, 1, 1), (6, 1, 1), (1,), (1, 6, 5, 5), (5,), (1, 1, 5), (5, 1),
                                         (6, 1, 5)])
def test_binary_broadcast(tmp_path, op, other_shape):
    # (1,6,5,5): a whole map shared by the batch; (5,) and (1,1,5): along the last axis; (5,1): along H. Axes C and W
    # (6,1,5) are not one block of the output's axes: no kernel form.
    other = rand(*other_shape, low=0.5, high=2.0)
    x = {"x": rand(2, 6, 5, 5)}
    refusal = None
    if other_shape == (6, 1, 5):
        refusal = BROADCAST_REFUSAL.format("[" + ",".join(map(str, other_shape)) + "]")
    check(tmp_path, make_model([helper.make_node(op, ["x", "c"], ["y"])], x, ["y"], [("c", other)]), x,
          kernel_refusal=refusal)


def test_batch_norm_after_conv_and_alone(tmp_path):
    c = 6
    bn = lambda p: [(f"{p}s", rand(c, low=0.5, high=1.5)), (f"{p}b", rand(c)), (f"{p}m", rand(c)),
                    (f"{p}v", rand(c, low=0.2, high=2.0))]
    inits = [("w", rand(c, 3, 3, 3))] + bn("a") + bn("b")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "as", "ab", "am", "av"], ["y"], epsilon=1e-3),
             helper.make_node("Relu", ["y"], ["r"]),
             helper.make_node("BatchNormalization", ["r", "bs", "bb", "bm", "bv"], ["z"])]
    x = {"x": rand(2, 3, 7, 7)}
    check(tmp_path, make_model(nodes, x, ["z"], inits), x)


def test_concat_split(tmp_path):
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=1),
             helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Concat", ["b", "ra"], ["y"], axis=1)]
    x = {"x": rand(2, 6, 3, 3)}
    check(tmp_path, make_model(nodes, x, ["y"], [("sizes", np.array([2, 4], np.int64))]), x)


@pytest.mark.parametrize("shape,axis", [((2, 6, 4, 5), 2), ((2, 6, 4, 5), -1), ((2, 9, 4), 2), ((2, 9, 4), 1),
                                        ((3, 8), 1)])
def test_concat_split_along_any_axis(tmp_path, shape, axis):
    """Split into uneven parts and Concat back with a constant part, along spatial and last axes and on 3-D and 2-D
    tensors: on the kernels, the channel problem over [outer, extent, inner] of the NCHW-order tensors."""
    extent = shape[axis]
    sizes = np.array([1, extent - 1], np.int64)
    constant_shape = list(shape[1:])
    constant_shape[axis - 1 if axis > 0 else axis] = 2
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b"], axis=axis),
             helper.make_node("Relu", ["a"], ["ra"]),
             helper.make_node("Concat", ["b", "ra"], ["y"], axis=axis)]
    x = {"x": rand(*shape)}
    check(tmp_path, make_model(nodes, x, ["y"], [("sizes", sizes)]), x)
    # A constant part (no batch axis: the model's batch is fixed).
    nodes = [helper.make_node("Concat", ["x", "c"], ["y"], axis=axis)]
    fixed_constant = rand(shape[0], *constant_shape)
    check(tmp_path, make_model(nodes, x, ["y"], [("c", fixed_constant)], dynamic_batch=False), x)


def test_split_opset11_equal_parts(tmp_path):
    nodes = [helper.make_node("Split", ["x"], ["a", "b", "c"], axis=1)]
    x = {"x": rand(2, 6, 3, 3)}
    check(tmp_path, make_model(nodes, x, ["a", "b", "c"], opset=11), x)


def test_flatten_gemm_matmul_softmax(tmp_path):
    inits = [("w", rand(10, 48)), ("b", rand(10)), ("m", rand(10, 7))]
    nodes = [helper.make_node("Flatten", ["x"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w", "b"], ["g"], transB=1, alpha=0.5, beta=2.0),
             helper.make_node("MatMul", ["g", "m"], ["mm"]),
             helper.make_node("Softmax", ["mm"], ["y"], axis=-1)]
    x = {"x": rand(3, 3, 4, 4)}
    check(tmp_path, make_model(nodes, x, ["y"], inits), x)


@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("c_shape", [(5, 6), (5, 1), (1, 6)])
def test_gemm_trans_a_and_a_bias_varying_along_m(tmp_path, trans_a, c_shape):
    """transA (a Transpose step on the kernels) and C of [M,N] or [M,1] (the GEMM epilogue's residual): A's 5 rows
    are static, so the model has no dynamic batch."""
    inits = [("w", rand(6, 7)), ("c", rand(*c_shape))]
    node = helper.make_node("Gemm", ["a", "w", "c"], ["y"], transA=trans_a, transB=1, alpha=0.75, beta=1.5)
    x = {"a": rand(7, 5) if trans_a else rand(5, 7)}
    check(tmp_path, make_model([node], x, ["y"], inits, dynamic_batch=False), x)


@pytest.mark.parametrize("shape,pads,mode", [
    ((2, 3, 8, 6), [0, 0, 1, 2, 0, 0, 2, -1], "constant"),  # [N,C,H,W] padded on its last two axes, from opset 13
    ((2, 5, 9), [0, 0, 2, 0, 0, 3], "reflect"),               # rank 3, the last axis
    ((2, 3, 4, 5, 6), [0, 0, 1, 0, 0, 0, 0, 2, 0, 0], "edge"),  # rank 5, the depth axis (whole H*W planes)
    ((2, 6, 4, 4), [0, 2, 0, 0, 0, 1, 0, 0], "constant"),     # an image's channels
])
def test_pad_of_any_rank(tmp_path, shape, pads, mode):
    inits = [("pads", I64(*pads)), ("v", np.array(0.25, np.float32))]
    node = helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)
    x = {"x": rand(*shape)}
    check(tmp_path, make_model([node], x, ["y"], inits, opset=13), x)


def test_reduce_mean_keepdims(tmp_path):
    nodes = [helper.make_node("ReduceMean", ["x"], ["k"], axes=[2, 3], keepdims=1),
             helper.make_node("ReduceMean", ["x"], ["d"], axes=[-1, -2], keepdims=0)]
    x = {"x": rand(2, 5, 4, 6)}
    check(tmp_path, make_model(nodes, x, ["k", "d"]), x)


@pytest.mark.parametrize("axes", [[1], [-1], [1, 3], [3, 1, 2], [2]])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_mean_other_axes(tmp_path, axes, keepdims):
    """A mean over axes other than H,W (the channels, the last axis, several): a Transpose bringing them last, a
    GEMM by a column of 1/R, and Reshapes, on every path."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["y"], axes=axes, keepdims=keepdims)]
    x = {"x": rand(2, 6, 5, 4, low=-1.0, high=3.0)}
    check(tmp_path, make_model(nodes, x, ["y"]), x)


def test_binary_of_runtime_means(tmp_path):
    """Runtime operands broadcast per row of the leading axes ([N,6,5,1] onto [N,6,5,5]: x minus its mean over the
    last axis) and per image channel ([N,6,1,1])."""
    nodes = [helper.make_node("ReduceMean", ["x"], ["row_mean"], axes=[3]),
             helper.make_node("Sub", ["x", "row_mean"], ["d"]),
             helper.make_node("ReduceMean", ["x"], ["map_mean"], axes=[2, 3]),
             helper.make_node("Div", ["d", "map_mean"], ["y"])]
    x = {"x": rand(2, 6, 5, 5, low=1.0, high=3.0)}
    check(tmp_path, make_model(nodes, x, ["y"]), x)


@pytest.mark.parametrize("a_shape,b_shape", [((3, 5, 7), (7, 4)), ((4, 5, 6, 8), (8, 3)), ((2, 3, 4, 5), (1, 3, 5, 6))])
def test_matmul_of_nd_tensors(tmp_path, a_shape, b_shape):
    """MatMul of an N-D tensor by a 2-D weight (a Linear layer on [N,H,W,C]) and, with a static batch, by a weight
    with the same leading dims (one matrix each)."""
    inits = [("b", rand(*b_shape))]
    x = {"a": rand(*a_shape)}
    dynamic = len(b_shape) == 2
    if not dynamic:
        inits = [("b", rand(a_shape[0], *b_shape[1:]))]
    check(tmp_path, make_model([helper.make_node("MatMul", ["a", "b"], ["y"])], x, ["y"], inits,
                               dynamic_batch=dynamic), x)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad(tmp_path, mode):
    nodes = [helper.make_node("Pad", ["x", "pads", "v"], ["y"], mode=mode)]
    inits = [("pads", np.array([0, 0, 1, 2, 0, 0, 2, 1], np.int64)), ("v", np.array(0.5, np.float32))]
    x = {"x": rand(2, 3, 4, 5)}
    check(tmp_path, make_model(nodes, x, ["y"], inits), x)


def test_exporter_shape_chain_reshape_and_channel_shuffle(tmp_path):
    # What exporters emit for x.view(n, g, c // g, h, w).transpose(1, 2).reshape(n, -1, h, w) with n dynamic.
    i64 = lambda *v: np.array(v, np.int64)
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"]),
        helper.make_node("Concat", ["n1", "mid"], ["shape5"], axis=0),
        helper.make_node("Reshape", ["x", "shape5"], ["v"]),
        helper.make_node("Transpose", ["v"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Slice", ["s", "start", "end"], ["hw"]),
        helper.make_node("Concat", ["n1", "minus1", "hw"], ["shape4"], axis=0),
        helper.make_node("Cast", ["shape4"], ["shape4i"], to=TensorProto.INT64),
        helper.make_node("Reshape", ["t", "shape4i"], ["y"]),
    ]
    inits = [("zero", np.array(0, np.int64)), ("axes0", i64(0)), ("mid", i64(3, 2, 4, 5)), ("start", i64(2)),
             ("end", i64(4)), ("minus1", i64(-1))]
    x = {"x": rand(2, 6, 4, 5)}
    model = make_model(nodes, x, ["y"], inits)
    check(tmp_path, model, x)
    rc, text = inspect_model(tmp_path / "model.onnx")
    assert rc == 0 and "ChannelShuffle" in text and "Transpose" not in text, text


def check_runtime(tmp_path, model, inputs, cases=(("fp32", 1e-5), ("fp16", 1e-2))):
    """The kernels' plan on the CPU in NCHW and NHWC at each (precision, tolerance) vs onnxruntime (check() covers
    FP32 everywhere; this adds reduced precisions)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, inputs)
    for layout in ("nchw", "nhwc"):
        for precision, tol in cases:
            compare(f"cpu {layout} {precision}", run_on(cli_path(), path, inputs, "--device=cpu", f"--layout={layout}",
                                                       f"--precision={precision}"), expected, tol)


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("shape,perm", [
    ((12,), [0, 1]),                  # rank 2: the identity (a copy)
    ((5, 7), [0, 2, 1]),
    ((6, 5, 3), [0, 3, 1, 2]),        # NHWC -> NCHW
    ((3, 6, 5), [0, 2, 3, 1]),        # NCHW -> NHWC
    ((4, 6, 5), [0, 1, 3, 2]),        # H <-> W
    ((4, 6, 5), [0, 3, 2, 1]),
    ((2, 3, 4, 5), [0, 2, 4, 1, 3]),  # rank 5
], ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple) else ("reverse" if v is None else "p" + "".join(map(str, v))))
def test_transpose(tmp_path, batch, shape, perm):
    attrs = {} if perm is None else dict(perm=perm)
    x = {"x": rand(batch, *shape)}
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)], x, ["y"])
    check(tmp_path, model, x)
    # Data movement is exact in FP32; FP16 rounds each element once on the way in.
    check_runtime(tmp_path, model, x, cases=(("fp32", 0.0), ("fp16", 1e-3)))


@pytest.mark.parametrize("shape,perm", [((3, 12), [1, 0]), ((2, 3, 4), [2, 0, 1]), ((2, 3, 4, 5), [3, 2, 0, 1]),
                                        ((2, 3, 4, 5), None)])  # no perm: the reverse
def test_transpose_of_the_batch_axis_with_a_fixed_batch(tmp_path, shape, perm):
    x = {"x": rand(*shape)}
    attrs = {} if perm is None else dict(perm=perm)
    model = make_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)], x, ["y"], dynamic_batch=False)
    check(tmp_path, model, x)
    check_runtime(tmp_path, model, x, cases=(("fp32", 0.0),))


def test_transpose_of_the_dynamic_batch_axis_fails_the_load_naming_the_node(tmp_path):
    x = {"x": rand(2, 12)}
    path = tmp_path / "model.onnx"
    onnx.save(make_model([helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0], name="t")], x, ["y"]), str(path))
    with pytest.raises(RuntimeError) as err:
        run_on(cli_path(), path, x, "--device=cpu")
    assert "node 't' (Transpose): perm [1,0] moves the dynamic batch axis 0" in str(err.value), err.value


def nhwc_converted_cnn():
    """What TF -> ONNX converters emit: an NHWC input transposed to NCHW for the convs, and the features transposed
    back to NHWC before the flatten that feeds the classifier; a second output is the NHWC feature map itself."""
    inits = [("w1", rand(8, 3, 3, 3)), ("b1", rand(8)), ("w2", rand(6, 8, 1, 1)), ("fc", rand(6 * 4 * 5, 10)),
             ("fcb", rand(10)), ("flat", np.array([-1, 6 * 4 * 5], np.int64))]
    nodes = [helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["nchw", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Transpose", ["c2"], ["features_nhwc"], perm=[0, 2, 3, 1]),
             helper.make_node("Reshape", ["features_nhwc", "flat"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["m"]),
             helper.make_node("Add", ["m", "fcb"], ["logits"])]
    return nodes, inits


@pytest.mark.parametrize("batch", [1, 3])
def test_transpose_feeding_conv_in_an_nhwc_converted_model(tmp_path, batch):
    nodes, inits = nhwc_converted_cnn()
    x = {"x": rand(batch, 8, 10, 3)}
    model = make_model(nodes, x, ["logits", "features_nhwc"], inits)
    check(tmp_path, model, x)
    check_runtime(tmp_path, model, x)


def test_transpose_of_a_constant_folds_away(tmp_path):
    nodes = [helper.make_node("Transpose", ["c"], ["ct"], perm=[0, 3, 1, 2]),
             helper.make_node("Add", ["x", "ct"], ["y"])]
    x = {"x": rand(2, 4, 3, 5)}
    model = make_model(nodes, x, ["y"], [("c", rand(1, 1, 1, 4))])  # -> [1, 4, 1, 1]: per channel
    check(tmp_path, model, x)
    check_runtime(tmp_path, model, x)
    rc, text = inspect_model(tmp_path / "model.onnx")
    assert rc == 0 and "Transpose" not in text, text


def test_constant_and_dropout(tmp_path):
    nodes = [helper.make_node("Constant", [], ["c"], value=numpy_helper.from_array(rand(1, 4, 1, 1))),
             helper.make_node("Mul", ["x", "c"], ["m"]),
             helper.make_node("Dropout", ["m"], ["y"])]
    x = {"x": rand(2, 4, 3, 3)}
    check(tmp_path, make_model(nodes, x, ["y"]), x)


@pytest.mark.parametrize("nodes,message", [
    ([helper.make_node("LRN", ["x"], ["y"], size=3)], "op 'LRN' is not supported"),
    ([helper.make_node("Relu", ["x"], ["y"], bogus=1)], "attribute 'bogus' is not supported"),
    ([helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="WHATEVER")], "auto_pad"),
])
def test_unsupported_fails_naming_node_op_attribute(tmp_path, nodes, message):
    x = {"x": rand(1, 3, 4, 4)}
    path = tmp_path / "model.onnx"
    onnx.save(make_model(nodes, x, ["y"]), str(path))
    rc, text = inspect_model(path)
    assert rc != 0 and message in text, text


# ---- Opsets 18 to 21: what current exporters write --------------------------------------------------------------

I64 = lambda *v: np.array(v, np.int64)


@pytest.mark.parametrize("opset", [18, 19, 20, 21])
def test_reduce_axes_as_input_from_opset_18(tmp_path, opset):
    nodes = [helper.make_node("ReduceMean", ["x", "hw"], ["mean"], keepdims=1),
             helper.make_node("ReduceMean", ["x", "hw_neg"], ["mean_flat"], keepdims=0),
             helper.make_node("ReduceMax", ["x", "hw"], ["max"], keepdims=1)]
    x = {"x": rand(2, 5, 4, 6)}
    model = make_model(nodes, x, ["mean", "mean_flat", "max"], [("hw", I64(2, 3)), ("hw_neg", I64(-1, -2))],
                       opset=opset)
    check(tmp_path, model, x)


@pytest.mark.parametrize("opset", [18, 21])
def test_reduce_axes_from_a_constant_node(tmp_path, opset):
    nodes = [helper.make_node("Constant", [], ["axes"], value=numpy_helper.from_array(I64(2, 3))),
             helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=0)]
    x = {"x": rand(3, 4, 5, 5)}
    check(tmp_path, make_model(nodes, x, ["y"], opset=opset), x)


@pytest.mark.parametrize("opset,extent,parts", [(18, 6, 3), (18, 7, 3), (21, 8, 3), (18, 5, 2)])
def test_split_num_outputs_from_opset_18(tmp_path, opset, extent, parts):
    outputs = [f"y{i}" for i in range(parts)]
    nodes = [helper.make_node("Split", ["x"], outputs, axis=1, num_outputs=parts)]
    x = {"x": rand(2, extent, 3, 3)}
    check(tmp_path, make_model(nodes, x, outputs, opset=opset), x)


@pytest.mark.parametrize("opset", [13, 18, 21])
def test_split_sizes_input(tmp_path, opset):
    nodes = [helper.make_node("Split", ["x", "sizes"], ["a", "b", "c"], axis=-3)]
    x = {"x": rand(2, 7, 3, 3)}
    check(tmp_path, make_model(nodes, x, ["a", "b", "c"], [("sizes", I64(1, 4, 2))], opset=opset), x)


@pytest.mark.parametrize("opset", [18, 19, 21])
@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_axes_input_from_opset_18(tmp_path, opset, mode):
    nodes = [helper.make_node("Pad", ["x", "pads", "v", "axes"], ["y"], mode=mode)]
    inits = [("pads", I64(1, 2, 2, 1)), ("v", np.array(0.5, np.float32)), ("axes", I64(-1, 2))]
    x = {"x": rand(2, 3, 4, 5)}
    check(tmp_path, make_model(nodes, x, ["y"], inits, opset=opset), x)


@pytest.mark.parametrize("opset", [19, 21])
def test_average_pool_dilations_from_opset_19(tmp_path, opset):
    x = {"x": rand(2, 3, 9, 11)}
    node = helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 3], dilations=[2, 2],
                            pads=[1, 1, 1, 1], strides=[1, 2])
    check(tmp_path, make_model([node], x, ["y"], opset=opset), x)


@pytest.mark.parametrize("opset", [19, 21])
def test_average_pool_undilated_at_opset_19_runs_on_the_kernels(tmp_path, opset):
    x = {"x": rand(2, 3, 9, 11)}
    node = helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[3, 3], dilations=[1, 1], strides=[2, 2],
                            pads=[1, 1, 1, 1], count_include_pad=1)
    check(tmp_path, make_model([node], x, ["y"], opset=opset), x)


@pytest.mark.parametrize("opset", [18, 21])
def test_exporter_classifier_head_at_new_opsets(tmp_path, opset):
    # What torch.onnx writes at opset 18+: Conv, Clip with constant bounds, ReduceMean with an axes input,
    # Squeeze/Unsqueeze with axes inputs, Reshape, Gemm, Softmax.
    inits = [("w", rand(8, 3, 3, 3)), ("b", rand(8)), ("lo", np.array(0.0, np.float32)),
             ("hi", np.array(6.0, np.float32)), ("hw", I64(2, 3)), ("sq", I64(3)), ("usq", I64(3)),
             ("flat", I64(-1, 8)), ("fc", rand(5, 8)), ("fcb", rand(5))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["r"]),
             helper.make_node("ReduceMean", ["r", "hw"], ["gap"], keepdims=1),
             helper.make_node("Squeeze", ["gap", "sq"], ["s"]),
             helper.make_node("Unsqueeze", ["s", "usq"], ["u"]),
             helper.make_node("Reshape", ["u", "flat"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["g"], transB=1),
             helper.make_node("Softmax", ["g"], ["y"])]
    x = {"x": rand(2, 3, 8, 8)}
    model = make_model(nodes, x, ["y"], inits, opset=opset)
    check(tmp_path, model, x)
    check_runtime(tmp_path, model, x)


def refusal(tmp_path, model, x):
    """The message `convoy run --engine=reference` refuses `model` with (it must refuse it)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    with pytest.raises(RuntimeError) as err:
        run_on(cli_path(), path, x, "--engine=reference")
    return str(err.value)


def refusal_text(tmp_path, nodes, inputs, inits, opset, extra_inputs=()):
    model = make_model(nodes, inputs, ["y"], inits, opset=opset)
    for name, shape in extra_inputs:
        model.graph.input.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    rc, text = inspect_model(path)
    assert rc != 0, text
    return text


@pytest.mark.parametrize("nodes,inits,opset,message", [
    ([helper.make_node("ReduceMean", ["x"], ["y"], name="gap", axes=[2, 3])], [], 18,
     "node 'gap' (ReduceMean): attribute 'axes' is not part of ReduceMean at opset 18 (from opset 18 the axes are "
     "input 1)"),
    ([helper.make_node("ReduceMax", ["x", "hw"], ["y"], name="gmp")], [("hw", I64(1, 2))], 18,
     "node 'gmp' (ReduceMax): only a max over axes [2,3] of [N,C,H,W] is supported, got axes [1,2] of [N,3,4,4]"),
    ([helper.make_node("ReduceMean", ["x", "nc"], ["y"], name="gap")], [("nc", I64(0, 1))], 18,
     "node 'gap' (ReduceMean): a mean over axis 0 of [N,3,4,4] reduces the dynamic batch, which a served model keeps"),
    ([helper.make_node("Pad", ["x", "pads"], ["y"], name="pad", mode="wrap")], [("pads", I64(0, 0, 1, 1, 0, 0, 1, 1))],
     19, "node 'pad' (Pad): attribute 'mode' value 'wrap' (opset 19) is not supported"),
    ([helper.make_node("Split", ["x"], ["y", "z"], name="split", axis=1, num_outputs=2)], [], 17,
     "node 'split' (Split): attribute 'num_outputs' is not supported"),
    ([helper.make_node("AveragePool", ["x"], ["y"], name="pool", kernel_shape=[2, 2], dilations=[2, 2])], [], 18,
     "node 'pool' (AveragePool): attribute 'dilations' is not supported"),
    ([helper.make_node("Unsqueeze", ["x"], ["y"], name="unsq", axes=[0])], [], 21,
     "node 'unsq' (Unsqueeze): expected 2-2 inputs, got 1"),
])
def test_opset_forms_refused_naming_node_op_opset(tmp_path, nodes, inits, opset, message):
    assert message in refusal_text(tmp_path, nodes, {"x": rand(1, 3, 4, 4)}, inits, opset)


@pytest.mark.parametrize("op,opset,extra", [("ReduceMean", 18, []), ("ReduceMax", 20, []), ("Squeeze", 13, []),
                                             ("Unsqueeze", 21, []), ("Pad", 18, ["pads"])])
def test_axes_computed_at_run_time_fail_naming_node_op_opset_and_input(tmp_path, op, opset, extra):
    # The axes come from a graph input: a tensor only known at run time.
    if op == "Pad":
        node = helper.make_node("Pad", ["x", "p", "", "runtime_axes"], ["y"], name="n")
        inits = [("p", I64(1, 1, 1, 1))]
    else:
        node = helper.make_node(op, ["x", "runtime_axes"], ["y"], name="n")
        inits = []
    text = refusal_text(tmp_path, [node], {"x": rand(1, 3, 4, 4)}, inits, opset, [("runtime_axes", [2])])
    input_index = 3 if op == "Pad" else 1
    assert (f"node 'n' ({op}): input {input_index} ('runtime_axes', the axes) is computed at run time; at opset "
            f"{opset} {op} takes its axes as an input") in text, text
