"""grpc.health.v1 against the real server (grpcio-health-checking's generated stubs): Check for "", "liveness",
"readiness" and each model name, NOT_FOUND for an unknown service, and Watch on "readiness" seeing SERVING and then
NOT_SERVING when SIGTERM starts the drain; the process then exits 0.
"""
import queue
import threading
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import started_server

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
SERVICE_UNKNOWN = health_pb2.HealthCheckResponse.SERVICE_UNKNOWN


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = started_server(tmp_path_factory, ["simple_cnn", "tiny_onnx"], name="health")
    yield server
    server.kill()  # the shutdown test stops it; this only cleans up after a failure


def check(server, service):
    with server.channel() as ch:
        return health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


@pytest.mark.parametrize("service", ["", "liveness", "readiness", "simple_cnn", "tiny_onnx"])
def test_check_serving(server, service):
    assert check(server, service) == SERVING


def test_check_unknown_service_is_not_found(server):
    with pytest.raises(grpc.RpcError) as err:
        check(server, "no_such_model")
    assert err.value.code() == grpc.StatusCode.NOT_FOUND


def test_watch_unknown_service_reports_service_unknown(server):
    with server.channel() as ch:
        stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="no_such_model"),
                                                      timeout=5)
        first = next(iter(stream))
        assert first.status == SERVICE_UNKNOWN
        stream.cancel()


def test_watch_readiness_through_shutdown(server):
    """Runs last in this module: SIGTERM flips a readiness Watch to NOT_SERVING, liveness keeps answering during
    the drain, and the process exits 0."""
    updates = queue.Queue()
    ch = server.channel()
    stream = health_pb2_grpc.HealthStub(ch).Watch(health_pb2.HealthCheckRequest(service="readiness"), timeout=60)

    def read():
        try:
            for reply in stream:
                updates.put(reply.status)
        except grpc.RpcError as e:
            updates.put(e.code())
        updates.put("end")

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert updates.get(timeout=10) == SERVING
    server.terminate()
    seen = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        item = updates.get(timeout=30)
        seen.append(item)
        if item == NOT_SERVING or item == "end":
            break
    assert NOT_SERVING in seen, f"readiness Watch saw {seen} after SIGTERM"
    rc = server.wait(timeout=60)
    assert rc == 0, f"exit code {rc} after SIGTERM\n{server.log_tail()}"
    reader.join(timeout=10)
    assert not reader.is_alive(), "the Watch stream did not end after the server exited"
    ch.close()
