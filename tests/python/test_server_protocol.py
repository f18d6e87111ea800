"""Every non-inference RPC of the KServe v2 / Triton gRPC protocol through tritonclient.grpc against one real server
(control mode none) over simple_cnn, resnet_classifier and the tiny generated models (conftest.py): liveness,
readiness, metadata, config, statistics and the repository index. Explicit load/unload: test_server_repository.py.
"""
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2
from tritonclient.utils import InferenceServerException

ALL_MODELS = ["simple_cnn", "resnet_classifier", "tiny_onnx", "tiny_fp16", "tiny_uint8"]


def test_server_live_and_ready(client):
    assert client.is_server_live()
    assert client.is_server_ready()


def test_model_ready(client):
    for name in ALL_MODELS:
        assert client.is_model_ready(name), name
        assert client.is_model_ready(name, "1"), name
    assert not client.is_model_ready("no_such_model")
    assert not client.is_model_ready("simple_cnn", "7")


def test_server_metadata(client):
    meta = client.get_server_metadata()
    assert meta.name == "convoy"
    assert meta.version
    assert {"classification", "model_configuration", "model_repository", "statistics"} <= set(meta.extensions)


@pytest.mark.parametrize("name,inputs,outputs", [
    ("simple_cnn", [("images", "FP32", [-1, 3, 32, 32])], [("probabilities", "FP32", [-1, 10])]),
    ("resnet_classifier", [("images", "FP32", [-1, 3, 224, 224])], [("logits", "FP32", [-1, 1000])]),
    ("tiny_fp16", [("x", "FP16", [-1, 3, 8, 8])], [("logits", "FP16", [-1, 5]), ("embedding", "FP16", [-1, 8])]),
    ("tiny_uint8", [("x", "UINT8", [-1, 8, 8, 3])], [("logits", "FP32", [-1, 5]), ("embedding", "FP32", [-1, 8])]),
])
def test_model_metadata(client, name, inputs, outputs):
    meta = client.get_model_metadata(name)
    assert meta.name == name
    assert "1" in list(meta.versions)
    assert [(t.name, t.datatype, list(t.shape)) for t in meta.inputs] == inputs
    assert [(t.name, t.datatype, list(t.shape)) for t in meta.outputs] == outputs
    as_json = client.get_model_metadata(name, as_json=True)
    assert as_json["inputs"][0]["shape"][0] in (-1, "-1")


def test_model_metadata_unknown_model_is_not_found(client):
    with pytest.raises(InferenceServerException) as err:
        client.get_model_metadata("no_such_model")
    assert "NOT_FOUND" in str(err.value.status())
    assert "no_such_model" in err.value.message()


def test_model_config_simple_cnn(client):
    config = client.get_model_config("simple_cnn").config
    assert config.name == "simple_cnn"
    assert config.max_batch_size == 32
    assert [(i.name, list(i.dims)) for i in config.input] == [("images", [3, 32, 32])]
    assert config.input[0].data_type == model_config_pb2.TYPE_FP32
    assert [(o.name, list(o.dims)) for o in config.output] == [("probabilities", [10])]
    assert config.HasField("dynamic_batching")
    assert list(config.dynamic_batching.preferred_batch_size) == [8, 16, 32]
    assert config.dynamic_batching.max_queue_delay_microseconds == 500


def test_model_config_resnet_queue_policy_and_labels(client):
    config = client.get_model_config("resnet_classifier", as_json=True)["config"]
    assert config["max_batch_size"] == 16
    batching = config["dynamic_batching"]
    assert [int(b) for b in batching["preferred_batch_size"]] == [4, 8, 16]
    assert int(batching["max_queue_delay_microseconds"]) == 2000
    assert int(batching["priority_levels"]) == 2
    assert int(batching["default_queue_policy"]["max_queue_size"]) == 64
    assert config["output"][0]["label_filename"] == "labels.txt"


def test_model_config_unknown_model_is_not_found(client):
    with pytest.raises(InferenceServerException) as err:
        client.get_model_config("no_such_model")
    assert "NOT_FOUND" in str(err.value.status())


def test_inference_statistics_count_requests(client):
    def stats():
        s = client.get_inference_statistics("tiny_onnx").model_stats
        assert len(s) == 1 and s[0].name == "tiny_onnx" and s[0].version == "1"
        return s[0]

    before = stats()
    batches = [int(b) for b in np.random.default_rng().integers(1, 5, size=3)]
    for b in batches:
        x = grpcclient.InferInput("x", [b, 3, 8, 8], "FP32")
        x.set_data_from_numpy(np.random.default_rng().standard_normal((b, 3, 8, 8), dtype=np.float32))
        client.infer("tiny_onnx", [x])
    after = stats()
    assert after.inference_stats.success.count - before.inference_stats.success.count == len(batches)
    assert after.inference_count - before.inference_count == sum(batches)
    assert 1 <= after.execution_count - before.execution_count <= len(batches)
    assert after.inference_stats.success.ns > before.inference_stats.success.ns
    assert after.last_inference > 0 and after.last_inference >= before.last_inference
    everything = client.get_inference_statistics().model_stats
    assert {s.name for s in everything} >= set(ALL_MODELS)


def test_inference_statistics_unknown_model_is_not_found(client):
    with pytest.raises(InferenceServerException) as err:
        client.get_inference_statistics("no_such_model")
    assert "NOT_FOUND" in str(err.value.status())


def test_repository_index(client):
    index = client.get_model_repository_index().models
    by_name = {m.name: m for m in index}
    assert set(by_name) == set(ALL_MODELS)
    for m in index:
        assert m.state == "READY", (m.name, m.state, m.reason)
        assert m.version == "1"
    ready_only = client.get_model_repository_index(as_json=True)
    assert len(ready_only["models"]) == len(ALL_MODELS)


def test_load_unload_refused_outside_explicit_mode(client):
    with pytest.raises(InferenceServerException):
        client.unload_model("simple_cnn")
    assert client.is_model_ready("simple_cnn")
