"""The batching policy chosen in config.yaml, end to end: a model with `policy: adaptive` reports it in ModelConfig
(parameters) and in /metrics (convoy_batcher_policy, its target and estimates), while a model of the fixed policy
beside it keeps Triton's fields; a lone client of the adaptive model is never held for company (the policy's hold,
convoy_batcher_wait_seconds, stays 0) where each request of the fixed policy waits out its 100 us delay, and the
execution time of the batch size it ran and the arrival rate are exported. docs/model_config.md, docs/metrics.md."""
import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conftest import metric, started_server, stop_and_check

RNG = np.random.default_rng()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = started_server(tmp_path_factory, ["tiny_adaptive", "tiny_onnx"], name="batching")
    yield server
    stop_and_check(server)


def send(client, model):
    x = grpcclient.InferInput("x", [1, 3, 8, 8], "FP32")
    x.set_data_from_numpy(RNG.standard_normal((1, 3, 8, 8), dtype=np.float32))
    client.infer(model, [x])


def test_model_config_names_the_policy(server):
    with server.client() as client:
        adaptive = client.get_model_config("tiny_adaptive").config
        fixed = client.get_model_config("tiny_onnx").config
    assert adaptive.parameters["dynamic_batching.policy"].string_value == "adaptive"
    assert adaptive.parameters["dynamic_batching.target_latency_microseconds"].string_value == "50000"
    assert adaptive.HasField("dynamic_batching")
    assert adaptive.dynamic_batching.max_queue_delay_microseconds == 0  # no cap given: none to report
    assert fixed.parameters["dynamic_batching.policy"].string_value == "fixed"
    assert "dynamic_batching.target_latency_microseconds" not in fixed.parameters
    assert fixed.dynamic_batching.max_queue_delay_microseconds == 100


def test_policies_and_estimates_are_exported(server):
    requests = int(RNG.integers(5, 15))
    before = server.scrape()
    with server.client() as client:
        for model in ("tiny_adaptive", "tiny_onnx"):
            for _ in range(requests):
                send(client, model)
    samples = server.scrape()
    adaptive = {"model": "tiny_adaptive", "version": "1"}
    fixed = {"model": "tiny_onnx", "version": "1"}
    assert metric(samples, "convoy_batcher_policy", **adaptive, policy="adaptive") == 1
    assert metric(samples, "convoy_batcher_policy", **fixed, policy="fixed") == 1
    assert not any(n == "convoy_batcher_policy" and ("policy", "fixed") in ls and ("model", "tiny_adaptive") in ls
                   for n, ls in samples), "one policy per model"
    assert metric(samples, "convoy_batcher_target_latency_seconds", **adaptive) == 0.05
    assert metric(samples, "convoy_batcher_target_latency_seconds", **fixed) == 0
    # A lone client: nobody else can join its request, so the adaptive policy never holds it (the simulation tests
    # pin that down exactly, adaptive_batching_test.cc). Its clients are recorded as out before the responses go
    # (batch_queue.h), so even a client that sends again at once is matched as the same returning client; a return
    # much later than usual makes it "presumed gone" and its next request an open-stream arrival, but one client
    # alone cannot make an open stream expected within a batch's execution time, which is what a hold needs.
    wait = metric(samples, "convoy_batcher_wait_seconds", **adaptive)
    assert wait == 0, f"the lone client's latest request was held {wait * 1e6:.0f} us"
    # ...while each request of the fixed policy waited at least its 100 us delay in the queue.
    queued_us = (metric(samples, "nv_inference_queue_duration_us", **fixed)
                 - metric(before, "nv_inference_queue_duration_us", **fixed))
    assert queued_us >= 100 * requests, f"{requests} lone requests queued {queued_us} us in all"
    # Sequential requests ran as batches of 1, whose execution time is now measured; arrivals were counted.
    assert 0 < metric(samples, "convoy_batcher_execution_seconds", **adaptive, batch_size="1") < 1
    assert not any(n == "convoy_batcher_execution_seconds" and ("batch_size", "2") in ls for n, ls in samples)
    assert metric(samples, "convoy_batcher_arrivals_per_second", **adaptive) > 0
    # Whether the lone client is still counted depends on how fast it came back under this machine's load (a client
    # much later than its usual return time is presumed gone): only that the estimate is exported is certain here.
    assert ("convoy_batcher_clients", frozenset(adaptive.items())) in samples
    assert 1 <= metric(samples, "convoy_batcher_batch_limit", **adaptive) <= 8
    assert metric(samples, "convoy_batcher_batch_limit", **fixed) == 8
    # One client is no loop to split (adaptive_batch_policy.h); the fixed policy never splits one.
    assert metric(samples, "convoy_batcher_closed_loop_batch_size", **adaptive) == 0
    assert metric(samples, "convoy_batcher_closed_loop_batch_size", **fixed) == 0
    # Why each batch went: every lone request was its own batch, sent at once for a reason that needs no other
    # request: nobody was expected to join it (no_company), nothing was measured yet (unmeasured: the model's first
    # batch ever), or the 50 ms target allowed no batch larger than this one request (full) or not even it (late).
    # Which of these a request gets depends on how fast the machine was at that moment: on a loaded machine one slow
    # batch of 1 raises the estimated p99 of a batch of 2 above what is left of the target, and the limit becomes 1
    # (adaptive_batch_policy.h, BatchLimit). No reason that weighs company (a hold, a probe, a best prefix, a split,
    # a refresh, a spare instance) may appear. The fixed policy exports no reasons.
    def by_reason(scraped, labels):
        return {dict(ls)["reason"]: v for (n, ls), v in scraped.items()
                if n == "convoy_batcher_batches_total" and set(labels.items()) <= set(ls)}
    now, earlier = by_reason(samples, adaptive), by_reason(before, adaptive)
    sent = {reason: now[reason] - earlier.get(reason, 0.0) for reason in now}
    assert sum(sent.values()) == requests, f"{requests} lone requests, batches by reason {sent}"
    assert {r for r, v in sent.items() if v > 0} <= {"no_company", "unmeasured", "full", "late"}, sent
    assert now.get("unmeasured", 0.0) <= 1, now
    assert by_reason(samples, fixed) == {}
