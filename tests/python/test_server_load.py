"""Load behaviour, all traffic to 127.0.0.1 and bounded: overload of a model with max_queue_size 2 (some requests are
refused UNAVAILABLE quickly, every admitted one succeeds) and graceful shutdown under load (SIGTERM while requests are
in flight: every request sent before the signal succeeds, later ones succeed or are refused UNAVAILABLE, exit 0).
"""
import queue
import threading
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conftest import started_server, stop_and_check

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
                               callback=lambda r, e, i=i: done.put((i, r, e, time.monotonic())))
        results = [done.get(timeout=120) for _ in range(n)]
        ok = [(i, t - sent_at[i]) for i, r, e, t in results if e is None]
        rejected = [(i, t - sent_at[i], e) for i, r, e, t in results if e is not None]
        other = [str(e) for _, _, e in rejected if "UNAVAILABLE" not in str(e.status())]
        assert not other, f"failures other than UNAVAILABLE: {other[:3]}"
        assert rejected, f"max_queue_size 2 with {n} requests in flight refused none"
        assert ok, "no request was admitted"
        reject_times = sorted(t for _, t, _ in rejected)
        ok_times = sorted(t for _, t in ok)
        # Refusals come back without waiting for the queue: faster than the slowest admitted request.
        assert reject_times[len(reject_times) // 2] < ok_times[-1], (reject_times, ok_times)
        assert reject_times[len(reject_times) // 2] < 2.0
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
    server = started_server(tmp_path_factory, ["resnet_drain"], name="drain")
    client = server.client()
    done = queue.Queue()
    before = 24
    for i in range(before):
        client.async_infer("resnet_drain", [resnet_input()], request_id=f"before-{i}",
                           callback=lambda r, e, i=i: done.put((f"before-{i}", r, e, time.monotonic())))
    time.sleep(0.3)  # every request above has reached the server's queue
    signalled_at = time.monotonic()
    server.terminate()
    # Keep sending for a moment during the drain: these may be served or refused, never fail otherwise.
    after = 0
    late_client = server.client()
    while time.monotonic() - signalled_at < 0.5:
        try:
            late_client.async_infer("resnet_drain", [resnet_input()], request_id=f"after-{after}",
                                    callback=lambda r, e, i=after: done.put((f"after-{i}", r, e, time.monotonic())))
            after += 1
        except Exception:  # noqa: BLE001 - the channel may already refuse; that is an allowed outcome
            break
        time.sleep(0.02)
    results = [done.get(timeout=90) for _ in range(before + after)]
    rc = server.wait(timeout=90)
    assert rc == 0, f"exit code {rc} after SIGTERM\n{server.log_tail()}"
    failed_before = [(rid, str(e)) for rid, r, e, _ in results if rid.startswith("before") and e is not None]
    assert not failed_before, f"admitted requests failed during the drain: {failed_before[:3]}"
    finished_after_signal = [rid for rid, r, e, t in results if rid.startswith("before") and t > signalled_at]
    assert finished_after_signal, "every request finished before SIGTERM: the test exercised no drain"
    bad_after = [str(e) for rid, r, e, _ in results if rid.startswith("after") and e is not None
                 and "UNAVAILABLE" not in str(e.status())]
    assert not bad_after, bad_after[:3]
    client.close()
    late_client.close()
