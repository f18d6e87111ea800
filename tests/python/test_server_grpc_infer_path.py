"""--grpc_infer_path against the real server: every RPC on gRPC's callback API (the default) and on its
completion-queue API (async, with no callback thread left) give the same answers, the same errors and the same edge
metrics, unary and streamed, through tritonclient; an unknown path stops the start naming the flag. grpc_server_test
covers each path's every RPC, deadlines, cancellation and shutdown in-process.
"""
import pathlib
import queue
import subprocess

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import free_port, metric, server_binary, started_server, stop_and_check

RNG = np.random.default_rng()


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One server per path over simple_cnn and tiny_onnx."""
    started = {}
    try:
        for path in ("callback", "async"):
            started[path] = started_server(tmp_path_factory, ["simple_cnn", "tiny_onnx"],
                                           flags=[f"--grpc_infer_path={path}"], name=f"server_{path}")
        yield started
    finally:
        for server in started.values():
            stop_and_check(server)


def infer(server, array, model="simple_cnn", name="images"):
    with grpcclient.InferenceServerClient(server.url) as client:
        t = grpcclient.InferInput(name, list(array.shape), "FP32")
        t.set_data_from_numpy(array)
        return client.infer(model, [t], request_id="r-1")


def test_both_paths_give_the_same_answers(servers):
    x = RNG.uniform(0, 1, (2, 3, 32, 32)).astype(np.float32)
    answers = {path: infer(server, x) for path, server in servers.items()}
    for result in answers.values():
        assert result.get_response().id == "r-1"
        assert result.as_numpy("probabilities").shape == (2, 10)
    np.testing.assert_array_equal(answers["async"].as_numpy("probabilities"),
                                  answers["callback"].as_numpy("probabilities"))


def test_both_paths_give_the_same_errors(servers):
    messages = {}
    for path, server in servers.items():
        with pytest.raises(InferenceServerException) as e:
            infer(server, np.zeros((1, 3, 31, 31), np.float32))
        assert e.value.status() == "StatusCode.INVALID_ARGUMENT", (path, e.value)
        messages[path] = e.value.message()
    assert messages["async"] == messages["callback"]
    assert "input 'images': expected shape [-1,3,32,32], got [1,3,31,31]" in messages["async"]


def test_async_path_counts_the_edge_phases(servers):
    server = servers["async"]
    labels = dict(model="tiny_onnx", version="1", protocol="grpc")
    before = server.scrape()
    for _ in range(3):
        infer(server, RNG.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32), model="tiny_onnx", name="x")
    after = server.scrape()
    assert metric(after, "convoy_edge_requests_total", **labels) - \
        metric(before, "convoy_edge_requests_total", **labels) == 3
    for phase in ("decode", "encode", "send"):
        assert metric(after, "convoy_edge_duration_us", phase=phase, **labels) > \
            metric(before, "convoy_edge_duration_us", phase=phase, **labels), phase


def test_an_unknown_path_stops_the_start(servers):
    proc = subprocess.run([server_binary(), f"--model_repository={servers['async'].repository}", "--device=cpu",
                           f"--grpc_port={free_port()}", "--http_port=-1", "--metrics_port=-1",
                           "--grpc_infer_path=threads"], capture_output=True, text=True, timeout=120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, f"exit {proc.returncode}\n{output[-2000:]}"
    assert "--grpc_infer_path: expected 'async' or 'callback', got 'threads'" in output, output[-2000:]


def thread_names(server):
    pid = server.proc.pid
    names = []
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return names


def test_async_path_leaves_no_callback_thread(servers):
    """On the async path every RPC, streams and health included, is served from the server's own completion queue:
    gRPC's callback threads (nexting_thread) never start; on the callback path they serve the calls."""
    for server in servers.values():
        infer(server, RNG.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32))
        with grpcclient.InferenceServerClient(server.url) as client:
            assert client.is_server_ready()
            assert client.get_model_metadata("simple_cnn").name == "simple_cnn"
    async_threads, callback_threads = thread_names(servers["async"]), thread_names(servers["callback"])
    assert "grpc_cq" in async_threads, async_threads
    assert "nexting_thread" not in async_threads, async_threads
    assert "nexting_thread" in callback_threads, callback_threads
    assert "grpc_cq" not in callback_threads, callback_threads


def test_both_paths_stream_the_same_answers(servers):
    x = RNG.uniform(0, 1, (1, 3, 32, 32)).astype(np.float32)
    answers = {}
    for path, server in servers.items():
        done = queue.Queue()
        with grpcclient.InferenceServerClient(server.url) as client:
            client.start_stream(callback=lambda result, error: done.put((result, error)))
            t = grpcclient.InferInput("images", list(x.shape), "FP32")
            t.set_data_from_numpy(x)
            for i in range(3):
                client.async_stream_infer("simple_cnn", [t], request_id=f"s{i}")
            got = [done.get(timeout=60) for _ in range(3)]
            client.stop_stream()
        assert all(error is None for _, error in got), got
        assert sorted(result.get_response().id for result, _ in got) == ["s0", "s1", "s2"]
        answers[path] = [result.as_numpy("probabilities") for result, _ in got]
    # The three requests of a stream may be batched together in one server and not in the other (the batcher's 500 us
    # window), and another batch size may run another kernel, summing in another order: so each answer within FP32
    # rounding (relative 1e-5) of each other path's, where one request alone (the test above) is bit for bit.
    for answer in answers["async"]:
        for other in answers["callback"]:
            np.testing.assert_allclose(answer, other, rtol=1e-5, atol=1e-7)
