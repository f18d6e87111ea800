"""Requests the server must refuse cleanly, and awkward ones it must serve: unknown model (NOT_FOUND); wrong shape,
datatype, byte size, missing or unexpected input, batch too large, zero-size input (INVALID_ARGUMENT naming the
tensor, the expected and the actual values); NaN/Inf inputs (served); client deadlines. After each error the server
must still answer correctly. Malformed requests that tritonclient refuses to build are sent with the generated gRPC
stub directly. test_server_bad_inputs.py is the full battery (cancellation while queued and while running included).
"""
import subprocess

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from conftest import server_binary

RNG = np.random.default_rng()


def images(batch, c=3, h=32, w=32):
    return RNG.uniform(-1, 1, (batch, c, h, w)).astype(np.float32)


def make_input(name, array, datatype):
    t = grpcclient.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return t


@pytest.fixture(scope="module")
def stub(shared_server):
    channel = shared_server.channel()
    yield service_pb2_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def raw_request(model, inputs, raw):
    """inputs: [(name, datatype, shape)], raw: [bytes] (one per input)."""
    req = service_pb2.ModelInferRequest(model_name=model)
    for name, datatype, shape in inputs:
        t = req.inputs.add()
        t.name, t.datatype = name, datatype
        t.shape.extend(shape)
    req.raw_input_contents.extend(raw)
    return req


def expect_rpc_error(stub, request, code, *fragments):
    with pytest.raises(grpc.RpcError) as err:
        stub.ModelInfer(request, timeout=30)
    assert err.value.code() == code, (err.value.code(), err.value.details())
    for fragment in fragments:
        assert fragment in err.value.details(), f"{fragment!r} not in {err.value.details()!r}"
    return err.value.details()


@pytest.fixture(autouse=True)
def still_serving(client):
    """After every test here the server must still answer a normal request."""
    yield
    x = images(1)
    result = client.infer("simple_cnn", [make_input("images", x, "FP32")])
    np.testing.assert_allclose(result.as_numpy("probabilities").sum(), 1.0, atol=1e-5)


def test_unknown_model_is_not_found(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("no_such_model", [make_input("images", images(1), "FP32")])
    assert "NOT_FOUND" in str(err.value.status())
    assert "no_such_model" in err.value.message()


def test_unknown_version_is_not_found(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("simple_cnn", [make_input("images", images(1), "FP32")], model_version="9")
    assert "NOT_FOUND" in str(err.value.status())
    assert "model 'simple_cnn' has no version '9'" in err.value.message(), err.value.message()


def test_wrong_shape(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("simple_cnn", [make_input("images", images(2, h=32, w=31), "FP32")])
    assert "INVALID_ARGUMENT" in str(err.value.status())
    msg = err.value.message()
    assert "'images'" in msg and "32" in msg and "31" in msg, msg


def test_wrong_datatype(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("simple_cnn", [make_input("images", images(1).astype(np.float16), "FP16")])
    assert "INVALID_ARGUMENT" in str(err.value.status())
    msg = err.value.message()
    assert "'images'" in msg and "FP32" in msg and "FP16" in msg, msg


def test_wrong_byte_size(stub):
    data = images(1).tobytes()[:-4]
    details = expect_rpc_error(stub, raw_request("simple_cnn", [("images", "FP32", [1, 3, 32, 32])], [data]),
                               grpc.StatusCode.INVALID_ARGUMENT, "'images'", "12288", str(len(data)))
    assert "bytes" in details


def test_missing_input(stub):
    expect_rpc_error(stub, raw_request("tiny_onnx", [], []), grpc.StatusCode.INVALID_ARGUMENT, "'x'")


def test_unexpected_input_name(stub):
    x = images(1, h=8, w=8)
    expect_rpc_error(stub, raw_request("tiny_onnx", [("y", "FP32", [1, 3, 8, 8])], [x.tobytes()]),
                     grpc.StatusCode.INVALID_ARGUMENT, "'y'")


def test_batch_too_large(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("simple_cnn", [make_input("images", images(33), "FP32")])
    assert "INVALID_ARGUMENT" in str(err.value.status())
    msg = err.value.message()
    assert "'images'" in msg and "33" in msg and "32" in msg, msg


def test_zero_size_input_is_a_clean_error(stub):
    expect_rpc_error(stub, raw_request("simple_cnn", [("images", "FP32", [0, 3, 32, 32])], [b""]),
                     grpc.StatusCode.INVALID_ARGUMENT, "'images'")


def test_negative_dimension_is_a_clean_error(stub):
    expect_rpc_error(stub, raw_request("simple_cnn", [("images", "FP32", [1, 3, -32, 32])], [b"\0" * 12288]),
                     grpc.StatusCode.INVALID_ARGUMENT, "'images'")


def test_unknown_requested_output(client):
    with pytest.raises(InferenceServerException) as err:
        client.infer("simple_cnn", [make_input("images", images(1), "FP32")],
                     outputs=[grpcclient.InferRequestedOutput("no_such_output")])
    assert "INVALID_ARGUMENT" in str(err.value.status())
    assert "no_such_output" in err.value.message()


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_nan_and_inf_inputs_are_served(client, value):
    x = images(2)
    x[0, 1, 5, 7] = value
    result = client.infer("simple_cnn", [make_input("images", x, "FP32")])
    out = result.as_numpy("probabilities")
    assert out.shape == (2, 10)
    # The untouched second row is an ordinary softmax.
    assert np.all(np.isfinite(out[1])) and abs(float(out[1].sum()) - 1.0) < 1e-5


def test_client_deadline_exceeded(client):
    x = images(16, h=224, w=224)
    with pytest.raises(InferenceServerException) as err:
        client.infer("resnet_classifier", [make_input("images", x, "FP32")], client_timeout=0.001)
    assert "DEADLINE_EXCEEDED" in str(err.value.status())


def test_priority_levels(client):
    """resnet_classifier has priority_levels 2: levels 1 and 2 are served, level 3 is refused naming the priority."""
    for level in (1, 2):
        result = client.infer("resnet_classifier", [make_input("images", images(1, h=224, w=224), "FP32")],
                              priority=level)
        assert result.as_numpy("logits").shape == (1, 1000)
    with pytest.raises(InferenceServerException) as err:
        client.infer("resnet_classifier", [make_input("images", images(1, h=224, w=224), "FP32")], priority=3)
    assert "INVALID_ARGUMENT" in str(err.value.status())
    assert "priority" in err.value.message() and "3" in err.value.message(), err.value.message()


@pytest.mark.parametrize("flag,message", [("grpc_port", "gRPC: cannot listen on 0.0.0.0:{port}"),
                                          ("http_port", "HTTP: cannot listen on 0.0.0.0:{port}"),
                                          ("metrics_port", "metrics endpoint cannot listen on 0.0.0.0:{port}")])
def test_a_second_server_on_a_taken_port_fails_to_start_cleanly(shared_server, flag, message):
    """A server started on a port another one listens on exits with status 1 at start-up, logging startup_failed with
    the port (after its models loaded: no crash while they are unloaded), instead of sharing the port's connections
    (gRPC's SO_REUSEPORT is off); the first server keeps serving."""
    port = getattr(shared_server, flag)
    ports = {"grpc_port": 0, "http_port": 0, "metrics_port": 0, flag: port}
    proc = subprocess.run([server_binary(), f"--model_repository={shared_server.repository}", "--device=cpu",
                           *(f"--{name}={value}" for name, value in ports.items())],
                          capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n{output[-2000:]}"
    assert "event=startup_failed" in output and message.format(port=port) in output, output[-2000:]
    assert shared_server.health_status("readiness") == 1  # SERVING


@pytest.mark.parametrize("entry", ["grpc.http2.lookahead_bytes", "http2.lookahead_bytes=1048576",
                                   "grpc.http2.lookahead_bytes=big", "grpc.http2.lookahead_bytes=99999999999"])
def test_a_malformed_grpc_channel_arg_stops_the_start(shared_server, entry):
    """--grpc_channel_args takes NAME=INTEGER entries with gRPC's own names: anything else ends the start with status 1
    and a message quoting the entry (never a server running without the setting its operator asked for)."""
    proc = subprocess.run([server_binary(), f"--model_repository={shared_server.repository}", "--device=cpu",
                           "--grpc_port=0", "--http_port=-1", "--metrics_port=-1",
                           f"--grpc_channel_args=grpc.http2.bdp_probe=1,{entry}"],
                          capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n{output[-2000:]}"
    assert "event=startup_failed" in output and "--grpc_channel_args: expected NAME=INTEGER" in output \
        and entry in output, output[-2000:]
