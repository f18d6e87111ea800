"""--exit_delay_seconds against the real server: on SIGTERM readiness goes NOT_SERVING at once (health Check and
Watch, ServerReady, each model's health service, and the raw HTTP/2 readiness check that HAProxy sends,
deploy/compose/balancer/grpc_health_check.py) while inference requests are still answered, correctly, until the delay
ends; then the usual drain and exit 0. A second signal ends the delay early. Without the flag (the default 0) SIGTERM
refuses new requests at once, as before (test_server_health.py, test_server_load.py).
"""
import queue
import signal
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import REPO_ROOT, SAMPLE_REPO, free_port, metric, server_binary, started_server

sys.path.insert(0, str(REPO_ROOT / "deploy" / "compose" / "balancer"))
import grpc_health_check  # noqa: E402

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
RNG = np.random.default_rng()


def images(batch):
    return RNG.uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32)


def infer(client, array):
    t = grpcclient.InferInput("images", list(array.shape), "FP32")
    t.set_data_from_numpy(array)
    return client.infer("simple_cnn", [t]).as_numpy("probabilities")


def raw_check(server):
    answer = grpc_health_check.check(server.url)
    if grpc_health_check.SERVING_BYTES in answer:
        return "SERVING"
    if grpc_health_check.NOT_SERVING_BYTES in answer:
        return "NOT_SERVING"
    return f"no answer: {answer[:200]!r}"


def watch_readiness(server):
    """A readiness Watch read on a thread: returns (queue of statuses, channel)."""
    updates = queue.Queue()
    ch = server.channel()
    stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="readiness"), timeout=120)

    def read():
        try:
            for reply in stream:
                updates.put(reply.status)
        except grpc.RpcError as e:
            updates.put(e.code())
        updates.put("end")

    threading.Thread(target=read, daemon=True).start()
    return updates, ch


def wait_for(updates, wanted, timeout):
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            item = updates.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        seen.append(item)
        if item == wanted or item == "end":
            break
    return seen


def test_readiness_withdrawn_while_still_serving(tmp_path_factory):
    delay = 6
    server = started_server(tmp_path_factory, ["simple_cnn"], flags=[f"--exit_delay_seconds={delay}"],
                            name="exit_delay")
    try:
        client = server.client()
        assert raw_check(server) == "SERVING", "HAProxy's raw readiness check against a ready server"
        assert client.is_server_ready()
        probe = images(3)
        before_answer = infer(client, probe)
        before = server.scrape()
        updates, ch = watch_readiness(server)
        assert wait_for(updates, SERVING, 10)[-1] == SERVING

        started = time.monotonic()
        server.terminate()
        seen = wait_for(updates, NOT_SERVING, delay - 1)
        assert seen and seen[-1] == NOT_SERVING, f"readiness Watch saw {seen} after SIGTERM"
        # Everything below happens inside the delay: readiness is withdrawn, requests are still served.
        assert server.health_status("readiness", timeout=2) == NOT_SERVING
        assert server.health_status("simple_cnn", timeout=2) == NOT_SERVING
        assert server.health_status("liveness", timeout=2) == SERVING
        assert not client.is_server_ready()
        assert raw_check(server) == "NOT_SERVING", "HAProxy's raw readiness check against a leaving server"
        served_during_delay = 0
        while time.monotonic() - started < delay - 2:
            array = images(int(RNG.integers(1, 5)))
            probabilities = infer(client, array)
            assert probabilities.shape == (array.shape[0], 10)
            assert np.all(np.isfinite(probabilities))
            np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
            served_during_delay += 1
        np.testing.assert_allclose(infer(client, probe), before_answer, atol=1e-6,
                                   err_msg="the same images answered differently while leaving")
        served_during_delay += 1
        assert time.monotonic() - started < delay, "the checks above outlasted the delay: the test proves nothing"
        assert server.proc.poll() is None, "the server exited before its delay ended"
        after = server.scrape()
        success = (metric(after, "nv_inference_request_success", model="simple_cnn")
                   - metric(before, "nv_inference_request_success", model="simple_cnn"))
        assert success == served_during_delay, (success, served_during_delay)
        assert metric(after, "nv_inference_request_failure", model="simple_cnn", reason="OTHER") == 0

        rc = server.wait(timeout=60)
        took = time.monotonic() - started
        assert rc == 0, f"exit code {rc}\n{server.log_tail()}"
        assert took >= delay - 0.5, f"exited {took:.1f} s after SIGTERM, before the {delay} s delay ended"
        log = server.log_path.read_text()
        assert f"event=readiness_withdrawn signal=SIGTERM exit_delay_seconds={delay}" in log
        assert log.index("event=readiness_withdrawn") < log.index("event=shutdown_started")
        assert "event=shutdown_complete" in log and "event=drain_incomplete" not in log
        assert "event=exit_delay_cut_short" not in log
        client.close()
        ch.close()
    finally:
        server.kill()


def test_second_signal_ends_the_delay(tmp_path_factory):
    server = started_server(tmp_path_factory, ["simple_cnn"], flags=["--exit_delay_seconds=120"],
                            name="exit_delay_cut")
    try:
        updates, ch = watch_readiness(server)
        assert wait_for(updates, SERVING, 10)[-1] == SERVING
        server.terminate()
        seen = wait_for(updates, NOT_SERVING, 20)
        assert seen and seen[-1] == NOT_SERVING, seen
        assert server.proc.poll() is None
        client = server.client()
        assert infer(client, images(1)).shape == (1, 10)  # still serving
        client.close()
        second = time.monotonic()
        server.proc.send_signal(signal.SIGINT)
        rc = server.wait(timeout=60)
        assert rc == 0, f"exit code {rc}\n{server.log_tail()}"
        assert time.monotonic() - second < 30, "the second signal did not end the 120 s delay"
        log = server.log_path.read_text()
        assert "event=exit_delay_cut_short signal=SIGINT" in log
        assert "event=shutdown_complete" in log
        ch.close()
    finally:
        server.kill()


def test_without_delay_sigterm_refuses_at_once(tmp_path_factory):
    """The default (0): no withdrawal phase; the shutdown starts at once (requests get UNAVAILABLE)."""
    server = started_server(tmp_path_factory, ["simple_cnn"], name="exit_no_delay")
    try:
        started = time.monotonic()
        rc = server.stop()
        assert rc == 0
        assert time.monotonic() - started < 30
        log = server.log_path.read_text()
        assert "event=readiness_withdrawn" not in log and "event=shutdown_started signal=SIGTERM" in log
    finally:
        server.kill()


def test_negative_delay_is_a_startup_error():
    proc = subprocess.run([server_binary(), f"--model_repository={SAMPLE_REPO}", f"--grpc_port={free_port()}",
                           "--metrics_port=-1", "--device=cpu", "--exit_delay_seconds=-3"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-2000:])
    assert "--exit_delay_seconds: expected 0 or more seconds, got -3" in proc.stderr
