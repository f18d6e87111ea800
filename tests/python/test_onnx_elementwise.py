"""Element-wise functions, PRelu, InstanceNormalization, GroupNormalization, DepthToSpace and SpaceToDepth as
single-op ONNX models, Convoy against onnxruntime (GroupNormalization against ONNX's reference implementation) on
every path test_onnx_ops.check runs (the reference interpreter with and without the passes, the CPU kernels in NCHW,
NHWC and NCHW8c, the CUDA kernels on the emulated GPU), FP32, 1e-5 relative error. Fresh random inputs each run
(positive for Log, Sqrt and Reciprocal). The refusals name the node and the opset."""
import numpy as np
import onnx
import pytest
from onnx import helper

from reference_engine import cli_path, run_on
from test_onnx_ops import check, make_model, rand
from test_onnx_resize import check_onnx_reference

UNARY = [
    ("Elu", {}, 13), ("Elu", dict(alpha=0.4), 13), ("Selu", {}, 13), ("Selu", dict(alpha=1.5, gamma=2.0), 13),
    ("Celu", dict(alpha=2.0), 13), ("Softplus", {}, 13), ("Softsign", {}, 13), ("Mish", {}, 18),
    ("ThresholdedRelu", dict(alpha=0.5), 13), ("Gelu", {}, 20), ("Gelu", dict(approximate="tanh"), 20),
    ("Erf", {}, 13), ("Exp", {}, 13), ("Log", {}, 13), ("Abs", {}, 13), ("Neg", {}, 13), ("Sqrt", {}, 13),
    ("Reciprocal", {}, 13), ("Floor", {}, 13), ("Ceil", {}, 13), ("Round", {}, 13), ("Sign", {}, 13),
]
POSITIVE = {"Log", "Sqrt", "Reciprocal"}


@pytest.mark.parametrize("op,attrs,opset", UNARY)
def test_unary(tmp_path, op, attrs, opset):
    low = 0.25 if op in POSITIVE else -4.0
    x = {"x": rand(2, 8, 5, 7, low=low, high=4.0)}
    if op in ("Round", "Floor", "Ceil", "Sign"):  # halves and zeros: the rounding ties and the sign of 0
        x["x"].flat[::7] = np.round(x["x"].flat[::7] * 2) / 2
    node = helper.make_node(op, ["x"], ["y"], name="f", **attrs)
    check(tmp_path, make_model([node], x, ["y"], opset=opset), x)


@pytest.mark.parametrize("slope_shape", [(6, 1, 1), (1,)])
def test_prelu(tmp_path, slope_shape):
    x = {"x": rand(2, 6, 5, 5)}
    node = helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")
    model = make_model([node], x, ["y"], [("slope", rand(*slope_shape))], opset=16)
    check(tmp_path, model, x)


@pytest.mark.parametrize("epsilon", [None, 0.01])
def test_instance_norm(tmp_path, epsilon):
    c = 6
    attrs = {} if epsilon is None else {"epsilon": epsilon}
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], name="norm", **attrs)
    x = {"x": rand(2, c, 5, 7, low=-1.0, high=3.0)}
    inits = [("s", rand(c, low=0.5, high=1.5)), ("b", rand(c))]
    check(tmp_path, make_model([node], x, ["y"], inits, opset=13), x)


@pytest.mark.parametrize("groups", [1, 3, 12])
def test_group_norm(tmp_path, groups):
    c = 12
    node = helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], name="norm", num_groups=groups,
                            epsilon=1e-3)
    x = {"x": rand(2, c, 4, 5, low=-1.0, high=3.0)}
    inits = [("s", rand(c, low=0.5, high=1.5)), ("b", rand(c))]
    check_onnx_reference(tmp_path, make_model([node], x, ["y"], inits, opset=21), x)


@pytest.mark.parametrize("op,attrs,shape", [("DepthToSpace", dict(blocksize=2), (2, 8, 3, 4)),
                                            ("DepthToSpace", dict(blocksize=2, mode="CRD"), (2, 8, 3, 4)),
                                            ("DepthToSpace", dict(blocksize=3, mode="DCR"), (1, 18, 2, 3)),
                                            ("SpaceToDepth", dict(blocksize=2), (2, 3, 6, 4))])
def test_depth_space(tmp_path, op, attrs, shape):
    x = {"x": rand(*shape)}
    node = helper.make_node(op, ["x"], ["y"], name="move", **attrs)
    check(tmp_path, make_model([node], x, ["y"], opset=13), x)


def test_refusals_name_node_and_opset(tmp_path):
    for op, opset, since in [("Mish", 17, 18), ("Celu", 11, 12)]:
        x = {"x": rand(2, 3)}
        model = make_model([helper.make_node(op, ["x"], ["y"], name="f")], x, ["y"], opset=opset)
        path = tmp_path / f"{op}.onnx"
        onnx.save(model, str(path))
        with pytest.raises(RuntimeError) as err:
            run_on(cli_path(), path, x, "--engine=reference")
        assert (f"node 'f' ({op}): {op} is not part of ONNX opset {opset} (it appears at opset {since})"
                in str(err.value)), err.value
