"""Dense outputs: a segmentation-shaped model (Conv -> ReLU -> 1x1 Conv to 6 class scores -> 2x bilinear Resize)
served three ways from the same model.onnx: the full FP32 scores [6, 16, 16], and with `class_map: true` the
per-pixel class map [16, 16] as UINT8 and as INT32. The served class maps must equal the argmax over the channels
of the served scores, element for element, and onnxruntime's argmax wherever its top two scores are not within
1e-4 (relative) of each other. A config asking for a class map of a type other than UINT8/INT32 fails to load, naming
the field."""
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
from onnx import TensorProto, helper, numpy_helper

from conftest import ConvoyServer, stop_and_check

RNG = np.random.default_rng()
CLASSES, H, W = 6, 8, 8


def segmentation_onnx(path):
    init = {"w1": RNG.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32),
            "b1": RNG.uniform(-0.2, 0.2, 8).astype(np.float32),
            "w2": RNG.uniform(-0.5, 0.5, (CLASSES, 8, 1, 1)).astype(np.float32),
            "scales": np.array([1, 1, 2, 2], np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["logits"]),
             helper.make_node("Resize", ["logits", "", "scales"], ["scores"], mode="linear")]
    graph = helper.make_graph(
        nodes, "segmentation", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, H, W])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N", CLASSES, 2 * H, 2 * W])],
        initializer=[numpy_helper.from_array(v, n) for n, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def config(name, datatype, dims, class_map):
    return f"""name: {name}
format: onnx
max_batch_size: 4
inputs:
  - name: x
    datatype: FP32
    dims: [3, {H}, {W}]
outputs:
  - name: scores
    datatype: {datatype}
    dims: [{', '.join(map(str, dims))}]
{"    class_map: true" if class_map else ""}
"""


MODELS = {"seg_scores": ("FP32", (CLASSES, 2 * H, 2 * W), False),
          "seg_classes_u8": ("UINT8", (2 * H, 2 * W), True),
          "seg_classes_i32": ("INT32", (2 * H, 2 * W), True)}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("class_map")
    model_path = base / "model.onnx"
    segmentation_onnx(model_path)
    for name, (datatype, dims, class_map) in MODELS.items():
        folder = base / "repo" / name
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.onnx").write_bytes(model_path.read_bytes())
        (folder / "config.yaml").write_text(config(name, datatype, dims, class_map))
    server = ConvoyServer(base / "repo", base / "server.log")
    server.start()
    client = server.client()
    yield client, ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    client.close()
    stop_and_check(server)


def infer(client, model, x, output="scores"):
    t = grpcclient.InferInput("x", list(x.shape), "FP32")
    t.set_data_from_numpy(x)
    return client.infer(model, [t]).as_numpy(output)


@pytest.mark.parametrize("batch", [1, 3])
def test_class_map_is_the_argmax_of_the_scores(served, batch):
    client, session = served
    x = RNG.uniform(-1, 1, (batch, 3, H, W)).astype(np.float32)
    scores = infer(client, "seg_scores", x)
    assert scores.shape == (batch, CLASSES, 2 * H, 2 * W) and scores.dtype == np.float32
    expected = np.argmax(scores, axis=1)
    reference = session.run(None, {"x": x})[0]
    top2 = np.sort(reference, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > 1e-4 * np.abs(top2[:, 1]).max()
    for model, dtype in (("seg_classes_u8", np.uint8), ("seg_classes_i32", np.int32)):
        classes = infer(client, model, x)
        assert classes.shape == (batch, 2 * H, 2 * W) and classes.dtype == dtype, (model, classes.shape, classes.dtype)
        np.testing.assert_array_equal(classes, expected, err_msg=model)
        np.testing.assert_array_equal(classes[clear], np.argmax(reference, axis=1)[clear], err_msg=model)
        assert len(np.unique(classes)) > 1, "a class map of one class cannot tell argmax from a constant"


def test_class_map_metadata(served):
    client, _ = served
    meta = client.get_model_metadata("seg_classes_u8")
    assert [(o.name, o.datatype, list(o.shape)) for o in meta.outputs] == [("scores", "UINT8", [-1, 2 * H, 2 * W])]
