"""The model repository as clients see it: a malformed model is UNAVAILABLE with a reason in the repository index
while the other models serve (control mode none), and explicit mode loads and unloads on request
(load_model / unload_model, over gRPC and over HTTP/REST), including a refused load of the malformed model; relaxed
readiness; poll mode picking up added and removed model folders.
"""
import http.client
import json
import shutil
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from grpc_health.v1 import health_pb2
from tritonclient.utils import InferenceServerException

from conftest import make_repository, started_server, stop_and_check

RNG = np.random.default_rng()


def tiny_input(batch=2):
    x = grpcclient.InferInput("x", [batch, 3, 8, 8], "FP32")
    x.set_data_from_numpy(RNG.standard_normal((batch, 3, 8, 8), dtype=np.float32))
    return x


def settled_index(client, timeout=60):
    """The repository index once no model version is LOADING or UNLOADING."""
    deadline = time.monotonic() + timeout
    while True:
        index = client.get_model_repository_index().models
        if all(m.state not in ("LOADING", "UNLOADING") for m in index) or time.monotonic() > deadline:
            return {m.name: m for m in index}
        time.sleep(0.1)


@pytest.fixture(scope="module")
def none_mode(tmp_path_factory):
    server = started_server(tmp_path_factory, ["tiny_onnx", "broken_onnx"], wait_for="liveness", name="none")
    yield server
    stop_and_check(server)


def test_malformed_model_is_unavailable_with_reason(none_mode):
    with none_mode.client() as client:
        index = settled_index(client)
        assert index["tiny_onnx"].state == "READY"
        broken = index["broken_onnx"]
        assert broken.state == "UNAVAILABLE"
        assert "broken_onnx/1/model.onnx: not a valid ONNX model (protobuf parse failed" in broken.reason, broken.reason
        assert not client.is_model_ready("broken_onnx")
        # Strict readiness (the default): the server is not ready while an expected model failed, but it serves.
        assert client.is_server_live()
        assert not client.is_server_ready()
        result = client.infer("tiny_onnx", [tiny_input()])
        assert result.as_numpy("logits").shape == (2, 5)
        with pytest.raises(InferenceServerException) as err:
            client.infer("broken_onnx", [tiny_input()])
        assert err.value.status() == "StatusCode.UNAVAILABLE", err.value
        assert "model 'broken_onnx' is not ready (UNAVAILABLE: " in err.value.message(), err.value.message()
        assert "not a valid ONNX model" in err.value.message(), err.value.message()


@pytest.fixture(scope="module")
def explicit_mode(tmp_path_factory):
    server = started_server(tmp_path_factory, ["tiny_onnx", "simple_cnn", "broken_onnx"], wait_for="liveness",
                            flags=["--model_control_mode=explicit"], name="explicit")
    yield server
    stop_and_check(server)


def test_explicit_mode_starts_with_nothing_loaded(explicit_mode):
    with explicit_mode.client() as client:
        index = settled_index(client)
        assert set(index) >= {"tiny_onnx", "simple_cnn", "broken_onnx"}
        assert all(m.state != "READY" for m in index.values()), {n: m.state for n, m in index.items()}
        assert not client.is_model_ready("tiny_onnx")


def test_explicit_load_infer_unload(explicit_mode):
    with explicit_mode.client() as client:
        client.load_model("tiny_onnx")
        assert client.is_model_ready("tiny_onnx")
        assert settled_index(client)["tiny_onnx"].state == "READY"
        assert client.infer("tiny_onnx", [tiny_input(3)]).as_numpy("logits").shape == (3, 5)
        assert not client.is_model_ready("simple_cnn")
        client.unload_model("tiny_onnx")
        deadline = time.monotonic() + 30
        while client.is_model_ready("tiny_onnx") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not client.is_model_ready("tiny_onnx")
        assert settled_index(client)["tiny_onnx"].state == "UNAVAILABLE"
        with pytest.raises(InferenceServerException) as err:
            client.infer("tiny_onnx", [tiny_input()])
        assert err.value.status() == "StatusCode.UNAVAILABLE", err.value
        assert "model 'tiny_onnx' is not ready (unloaded)" in err.value.message(), err.value.message()
        # And back again.
        client.load_model("tiny_onnx")
        assert client.infer("tiny_onnx", [tiny_input(1)]).as_numpy("logits").shape == (1, 5)


def test_explicit_load_of_malformed_model_fails_with_reason(explicit_mode):
    with explicit_mode.client() as client:
        with pytest.raises(InferenceServerException) as err:
            client.load_model("broken_onnx")
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT", err.value
        assert "broken_onnx/1/model.onnx: not a valid ONNX model" in err.value.message(), err.value.message()
        entry = settled_index(client)["broken_onnx"]
        assert entry.state == "UNAVAILABLE", entry
        assert "broken_onnx/1/model.onnx: not a valid ONNX model" in entry.reason, entry.reason


def test_explicit_load_of_unknown_model_is_not_found(explicit_mode):
    with explicit_mode.client() as client:
        with pytest.raises(InferenceServerException) as err:
            client.load_model("no_such_model")
        assert err.value.status() == "StatusCode.NOT_FOUND", err.value
        assert "failed to load 'no_such_model': no such model in the repository" in err.value.message()


def http_post(server, path, body=b"", method="POST"):
    """(status, parsed JSON or None, raw body) of one request to the server's HTTP/REST port."""
    connection = http.client.HTTPConnection(server.http_url, timeout=60)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json"} if body else {})
        response = connection.getresponse()
        raw = response.read()
        return response.status, (json.loads(raw) if raw else None), raw
    finally:
        connection.close()


def test_http_repository_index_load_infer_unload(explicit_mode):
    """The repository extension over HTTP/REST: tritonclient.http's index, load and unload against the same model
    manager the gRPC calls reach (each protocol sees what the other did)."""
    with httpclient.InferenceServerClient(explicit_mode.http_url) as client, explicit_mode.client() as grpc_client:
        assert "model_repository" in client.get_server_metadata()["extensions"]
        index = {m["name"]: m for m in client.get_model_repository_index()}
        assert {"tiny_onnx", "simple_cnn", "broken_onnx"} <= set(index), index
        client.load_model("simple_cnn")
        assert client.is_model_ready("simple_cnn")
        assert grpc_client.is_model_ready("simple_cnn")  # one manager behind both protocols
        ready = {m["name"]: m for m in json.loads(http_post(explicit_mode, "/v2/repository/index",
                                                             b'{"ready": true}')[2])}
        assert "simple_cnn" in ready and ready["simple_cnn"]["state"] == "READY", ready
        assert ready["simple_cnn"]["version"] == "1", ready
        assert all(m["state"] == "READY" for m in ready.values()), ready
        client.unload_model("simple_cnn")
        deadline = time.monotonic() + 30
        while client.is_model_ready("simple_cnn") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not client.is_model_ready("simple_cnn")
        entry = {m["name"]: m for m in client.get_model_repository_index()}["simple_cnn"]
        assert entry["state"] == "UNAVAILABLE" and "unloaded" in entry["reason"], entry


def test_http_repository_errors_name_the_model_and_the_field(explicit_mode):
    status, body, _ = http_post(explicit_mode, "/v2/repository/models/no_such_model/load")
    assert status == 404, body
    assert "failed to load 'no_such_model': no such model in the repository" in body["error"], body
    status, body, _ = http_post(explicit_mode, "/v2/repository/models/broken_onnx/load")
    assert status == 400, body
    assert "broken_onnx/1/model.onnx: not a valid ONNX model" in body["error"], body
    status, body, _ = http_post(explicit_mode, "/v2/repository/models/tiny_onnx/load",
                                json.dumps({"parameters": {"config": "{}"}}).encode())
    assert status == 400, body
    assert "load of model 'tiny_onnx': load parameters are not supported (got 'config')" in body["error"], body
    status, body, _ = http_post(explicit_mode, "/v2/repository/index", b'{"ready": "yes"}')
    assert status == 400 and body["error"] == "repository index request: 'ready' must be true or false", body
    status, body, _ = http_post(explicit_mode, "/v2/repository/index", b"[1, 2")
    assert status == 400 and "the body of the repository index request is not JSON" in body["error"], body
    status, body, _ = http_post(explicit_mode, "/v2/repository/index", method="GET")
    assert status == 405 and "method GET is not allowed on '/v2/repository/index'; allowed: POST" in body["error"]
    with explicit_mode.client() as grpc_client:  # gRPC refuses the same parameters the same way
        with pytest.raises(InferenceServerException) as err:
            grpc_client.load_model("tiny_onnx", config="{}")
        assert err.value.status() == "StatusCode.INVALID_ARGUMENT", err.value
        assert "load parameters are not supported (got 'config')" in err.value.message(), err.value.message()


def test_http_load_is_refused_unless_explicit_mode(none_mode):
    status, body, _ = http_post(none_mode, "/v2/repository/models/tiny_onnx/unload")
    assert status == 503, body  # UNAVAILABLE, as gRPC answers
    assert "model control mode is none (start with --model_control_mode=explicit)" in body["error"], body
    index = {m["name"]: m for m in json.loads(http_post(none_mode, "/v2/repository/index")[2])}
    assert index["tiny_onnx"]["state"] == "READY", index


def test_relaxed_readiness_with_a_malformed_model(tmp_path_factory):
    """--strict_readiness=false: the server is ready once one model is, even with a malformed one beside it."""
    server = started_server(tmp_path_factory, ["tiny_onnx", "broken_onnx"], wait_for="liveness", name="relaxed",
                            flags=["--strict_readiness=false"])
    try:
        with server.client() as client:
            index = settled_index(client)
            assert index["broken_onnx"].state == "UNAVAILABLE"
            assert client.is_server_ready()
        assert server.health_status("readiness") == health_pb2.HealthCheckResponse.SERVING
        assert server.health_status("broken_onnx") == health_pb2.HealthCheckResponse.NOT_SERVING
    finally:
        stop_and_check(server)


def test_poll_mode_picks_up_added_and_removed_models(tmp_path_factory):
    """--model_control_mode=poll: a model folder added to the repository is loaded at the next scan, a removed one
    is unloaded."""
    server = started_server(tmp_path_factory, ["tiny_onnx"], name="poll",
                            flags=["--model_control_mode=poll", "--poll_interval_seconds=1"])
    try:
        with server.client() as client:
            assert not client.is_model_ready("simple_cnn")
            staging = tmp_path_factory.mktemp("staging")
            make_repository(staging, ["simple_cnn"])
            shutil.move(str(staging / "simple_cnn"), str(server.repository / "simple_cnn"))
            deadline = time.monotonic() + 30
            while not client.is_model_ready("simple_cnn") and time.monotonic() < deadline:
                time.sleep(0.2)
            assert client.is_model_ready("simple_cnn"), settled_index(client)
            x = grpcclient.InferInput("images", [1, 3, 32, 32], "FP32")
            x.set_data_from_numpy(RNG.standard_normal((1, 3, 32, 32), dtype=np.float32))
            assert client.infer("simple_cnn", [x]).as_numpy("probabilities").shape == (1, 10)
            shutil.rmtree(server.repository / "tiny_onnx")
            deadline = time.monotonic() + 30
            while client.is_model_ready("tiny_onnx") and time.monotonic() < deadline:
                time.sleep(0.2)
            assert not client.is_model_ready("tiny_onnx")
            assert client.is_model_ready("simple_cnn")
    finally:
        stop_and_check(server)
