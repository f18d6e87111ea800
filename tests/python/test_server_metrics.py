"""/metrics after known traffic: the Triton counters and Convoy histograms of a model move by exactly the requests,
inferences, executions and batch sizes sent (sequential requests, so each one is its own execution), an invalid
request counts as a failure with reason OTHER, and the model load histogram has the load.
"""
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import metric, started_server, stop_and_check

RNG = np.random.default_rng()
LABELS = {"model": "tiny_onnx", "version": "1"}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = started_server(tmp_path_factory, ["tiny_onnx", "simple_cnn", "tiny_nobatch"], name="metrics")
    yield server
    stop_and_check(server)


def send(client, batch):
    x = grpcclient.InferInput("x", [batch, 3, 8, 8], "FP32")
    x.set_data_from_numpy(RNG.standard_normal((batch, 3, 8, 8), dtype=np.float32))
    client.infer("tiny_onnx", [x])


def test_counters_and_histograms_move_by_the_traffic(server):
    batches = [int(b) for b in RNG.integers(1, 9, size=6)]
    before = server.scrape()
    with server.client() as client:
        for b in batches:
            send(client, b)
    after = server.scrape()

    def delta(name, **extra):
        return metric(after, name, **LABELS, **extra) - metric(before, name, **LABELS, **extra)

    assert delta("nv_inference_request_success") == len(batches)
    assert delta("nv_inference_count") == sum(batches)
    assert delta("nv_inference_exec_count") == len(batches)
    for reason in ("OTHER", "REJECTED", "CANCELED", "BACKEND"):
        assert delta("nv_inference_request_failure", reason=reason) == 0, reason
    assert delta("nv_inference_request_duration_us") > 0
    assert delta("nv_inference_compute_infer_duration_us") > 0
    assert metric(after, "nv_inference_pending_request_count", **LABELS) == 0

    assert delta("convoy_batch_size_count") == len(batches)
    assert delta("convoy_batch_size_sum") == sum(batches)
    for le in ("1", "2", "4", "8"):
        want = sum(1 for b in batches if b <= int(le))
        got = (metric(after, "convoy_batch_size_bucket", **LABELS, le=le)
               - metric(before, "convoy_batch_size_bucket", **LABELS, le=le))
        assert got == want, (le, got, want, batches)
    assert delta("convoy_request_duration_seconds_count") == len(batches)
    assert delta("convoy_queue_duration_seconds_count") == len(batches)
    assert delta("convoy_compute_duration_seconds_count") == len(batches)
    assert 0 < delta("convoy_request_duration_seconds_sum") < 60

    # The other model's series did not move.
    other = {"model": "simple_cnn", "version": "1"}
    assert metric(after, "nv_inference_count", **other) == metric(before, "nv_inference_count", **other)


def test_invalid_request_counts_as_failure_other(server):
    """docs/metrics.md: nv_inference_request_failure{reason="OTHER"} counts invalid inputs."""
    before = server.scrape()
    with server.client() as client:
        bad = grpcclient.InferInput("x", [1, 3, 8, 7], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 3, 8, 7), np.float32))
        with pytest.raises(InferenceServerException):
            client.infer("tiny_onnx", [bad])
    after = server.scrape()
    moved = (metric(after, "nv_inference_request_failure", **LABELS, reason="OTHER")
             - metric(before, "nv_inference_request_failure", **LABELS, reason="OTHER"))
    assert moved == 1, (f"an invalid request (wrong shape) moved nv_inference_request_failure{{reason=OTHER}} by "
                        f"{moved}, docs/metrics.md says it counts invalid inputs")
    assert (metric(after, "nv_inference_request_success", **LABELS)
            == metric(before, "nv_inference_request_success", **LABELS))


def test_model_load_is_recorded(server):
    samples = server.scrape()
    for model in ("tiny_onnx", "simple_cnn"):
        assert metric(samples, "convoy_model_load_duration_seconds_count", model=model, version="1") >= 1, model


def test_metric_families_are_typed(server):
    import urllib.request
    text = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    for name, kind in [("nv_inference_count", "counter"), ("nv_inference_pending_request_count", "gauge"),
                       ("convoy_batch_size", "histogram"), ("convoy_request_duration_seconds", "histogram")]:
        assert f"# TYPE {name} {kind}" in text, name


def test_no_dynamic_batching_means_no_merged_requests(server):
    """docs/model_config.md: dynamic_batching absent = off (as in Triton, where such a model runs each request
    alone). Concurrent requests to such a model: executions == requests, and every execution's size is one
    request's batch size (here 1 or 2). docs/server.md says the opposite ("without that block: no queue delay",
    i.e. queued requests are still merged); the two documents must agree, and this test holds the config contract."""
    import queue
    labels = {"model": "tiny_nobatch", "version": "1"}
    before = server.scrape()
    n = 48
    done = queue.Queue()
    with server.client() as client:
        for i in range(n):
            b = 1 + i % 2
            x = grpcclient.InferInput("x", [b, 3, 8, 8], "FP32")
            x.set_data_from_numpy(RNG.standard_normal((b, 3, 8, 8), dtype=np.float32))
            client.async_infer("tiny_nobatch", [x], callback=lambda result, error: done.put(error))
        errors = [done.get(timeout=60) for _ in range(n)]
    assert not [e for e in errors if e is not None]
    after = server.scrape()

    def delta(name, **extra):
        return metric(after, name, **labels, **extra) - metric(before, name, **labels, **extra)

    assert delta("nv_inference_request_success") == n
    assert delta("nv_inference_count") == n // 2 * 3
    merged = delta("convoy_batch_size_count") - delta("convoy_batch_size_bucket", le="2")
    assert delta("nv_inference_exec_count") == n and merged == 0, (
        f"{n} requests ran as {delta('nv_inference_exec_count'):.0f} executions ({merged:.0f} larger than any "
        f"request): the server merged requests of a model without dynamic_batching (docs/model_config.md: absent = "
        f"off)")
