"""Load behaviour, all traffic to 127.0.0.1 and bounded: overload of a model with max_queue_size 2 (some requests are
refused UNAVAILABLE quickly, every admitted one succeeds) and graceful shutdown under load (SIGTERM while requests are
in flight: every request sent before the signal succeeds, later ones succeed or are refused UNAVAILABLE, exit 0).
"""
import queue
import time

import numpy as np
import tritonclient.grpc as grpcclient
from grpc_health.v1 import health_pb2, health_pb2_grpc

from conftest import ConvoyServer, make_repository, metric, started_server, stop_and_check

RNG = np.random.default_rng()


def resnet_input(batch=1):
    x = grpcclient.InferInput("images", [batch, 3, 224, 224], "FP32")
    x.set_data_from_numpy(RNG.uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32))
    return x


def test_overload_rejects_fast_and_serves_the_admitted(tmp_path_factory):
    server = started_server(tmp_path_factory, ["slow_queue"], name="overload")
    try:
        client = server.client()
        n = 40
        inputs = [resnet_input() for _ in range(n)]
        done = queue.Queue()
        sent_at = {}
        for i, x in enumerate(inputs):
            sent_at[i] = time.monotonic()
            client.async_infer("slow_queue", [x], request_id=str(i),
                               callback=lambda result, error, i=i: done.put((i, result, error, time.monotonic())))
        results = [done.get(timeout=120) for _ in range(n)]
        ok = [(i, t - sent_at[i]) for i, r, e, t in results if e is None]
        rejected = [(i, t - sent_at[i], e) for i, r, e, t in results if e is not None]
        other = [str(e) for _, _, e in rejected if "UNAVAILABLE" not in str(e.status())]
        assert not other, f"failures other than UNAVAILABLE: {other[:3]}"
        assert rejected, f"max_queue_size 2 with {n} requests in flight refused none"
        assert ok, "no request was admitted"
        reject_times = sorted(t for _, t, _ in rejected)
        ok_times = sorted(t for _, t in ok)
        # Refusals come back without waiting for the queue: faster than the slowest admitted request (which waited
        # for at least one batch of the slow model to run before its own).
        assert reject_times[len(reject_times) // 2] < ok_times[-1], (reject_times, ok_times)
        messages = {e.message() for _, _, e in rejected}
        assert any("queue" in m.lower() for m in messages), messages
        for i, r, e, _ in results:
            if e is None:
                assert r.as_numpy("logits").shape == (1, 1000)
                assert np.all(np.isfinite(r.as_numpy("logits")))
        samples = server.scrape()
        rejected_metric = sum(v for (name, labels), v in samples.items()
                              if name == "nv_inference_request_failure" and ("reason", "REJECTED") in labels
                              and ("model", "slow_queue") in labels)
        assert rejected_metric == len(rejected)
        client.close()
    finally:
        stop_and_check(server)


def test_graceful_shutdown_under_load(tmp_path_factory):
    """resnet_drain runs one image of a slow-by-construction CNN per execution on one CPU thread (7.4 GFLOP, about
    0.1-0.3 s each), so 40 queued requests take several seconds to drain: SIGTERM lands while most are queued, and the
    client's requests during the drain arrive while it still runs, however slow the client is at that moment. The
    drain may take longer than the default exit timeout on a loaded machine: this server gets 300 s."""
    base = tmp_path_factory.mktemp("drain")
    server = ConvoyServer(make_repository(base / "repo", ["resnet_drain"]), base / "server.log",
                          flags=["--exit_timeout_seconds=300"], env={"CONVOY_CPU_THREADS": "1"})
    server.start()
    client = server.client()
    labels = {"model": "resnet_drain", "version": "1"}
    done = queue.Queue()
    before = 40
    x = resnet_input()
    for i in range(before):
        client.async_infer("resnet_drain", [x], request_id=f"before-{i}",
                           callback=lambda result, error, i=i: done.put((f"before-{i}", result, error, time.monotonic())))
    # Wait until every request above has reached the server (queued, done, or the one executing).
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        s = server.scrape()
        arrived = metric(s, "nv_inference_pending_request_count", **labels) + metric(
            s, "nv_inference_request_success", **labels)
        if arrived >= before - 1:
            break
        time.sleep(0.01)
    health_channel = server.channel()  # opened before the signal: new connections may be refused during the drain
    stub = health_pb2_grpc.HealthStub(health_channel)
    watch = stub.Watch(health_pb2.HealthCheckRequest(service="readiness"), timeout=60)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    signalled_at = time.monotonic()
    server.terminate()
    # During the drain: readiness turns NOT_SERVING at once (the Watch reports the change), liveness stays SERVING.
    readiness = next(watch).status
    watch.cancel()
    liveness = stub.Check(health_pb2.HealthCheckRequest(service="liveness"), timeout=5).status
    # Requests sent during the drain, on the open connection, are refused UNAVAILABLE (never dropped or failed
    # otherwise).
    after = 10
    for i in range(after):
        client.async_infer("resnet_drain", [x], request_id=f"after-{i}",
                           callback=lambda result, error, i=i: done.put((f"after-{i}", result, error, time.monotonic())))
    results = [done.get(timeout=90) for _ in range(before + after)]
    rc = server.wait(timeout=90)
    health_channel.close()
    client.close()
    assert rc == 0, f"exit code {rc} after SIGTERM\n{server.log_tail()}"
    assert readiness == health_pb2.HealthCheckResponse.NOT_SERVING
    assert liveness == health_pb2.HealthCheckResponse.SERVING
    failed_before = [(rid, str(e)) for rid, r, e, _ in results if rid.startswith("before") and e is not None]
    assert not failed_before, f"{len(failed_before)} admitted requests failed during the drain: {failed_before[:3]}"
    finished_after_signal = [rid for rid, r, e, t in results if rid.startswith("before") and t > signalled_at]
    assert len(finished_after_signal) >= 10, (f"only {len(finished_after_signal)} requests were still in flight at "
                                              f"SIGTERM: the test exercised no drain")
    after_outcomes = [("OK" if e is None else f"{e.status()}: {e.message()}") for rid, r, e, _ in results
                      if rid.startswith("after")]
    assert all(o == "StatusCode.UNAVAILABLE: the server is shutting down" for o in after_outcomes), after_outcomes
