"""ArgMax (opsets 11, 12, 13) as single-op ONNX models, Convoy against onnxruntime on every path test_onnx_ops.check
runs (reference interpreter, CPU kernels in NCHW/NHWC/NCHW8c, emulated GPU). ONNX's ArgMax returns INT64; run
without a config Convoy returns the indices as FP32 (a served model gets UINT8/INT32 class maps through the config,
tests/python/test_server_class_map.py), compared exactly. Ties: integer-valued inputs, first or last index."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from test_onnx_ops import check, make_model, rand

RNG = np.random.default_rng()


def argmax_model(x, opset=13, **attrs):
    node = helper.make_node("ArgMax", ["x"], ["y"], name="argmax", **attrs)
    model = make_model([node], {"x": x}, ["y"], opset=opset)
    model.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    return model


@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("shape,axis", [((2, 21, 9, 7), 1), ((3, 10), 1), ((3, 10), -1), ((2, 4, 5, 6), 2),
                                        ((2, 70, 3, 3), -3)])
def test_argmax(tmp_path, shape, axis, keepdims):
    x = rand(*shape)
    check(tmp_path, argmax_model(x, axis=axis, keepdims=keepdims), {"x": x}, tol=0)


@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("opset", [12, 13])
def test_argmax_ties(tmp_path, opset, select_last_index):
    x = RNG.integers(0, 3, size=(2, 8, 5, 4)).astype(np.float32)  # ties everywhere
    model = argmax_model(x, opset=opset, axis=1, keepdims=0, select_last_index=select_last_index)
    check(tmp_path, model, {"x": x}, tol=0)


def test_argmax_opset11_first_index(tmp_path):
    x = RNG.integers(0, 2, size=(3, 6, 4, 4)).astype(np.float32)
    check(tmp_path, argmax_model(x, opset=11, axis=1), {"x": x}, tol=0)
