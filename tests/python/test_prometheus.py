"""The PromQL of docs/metrics.md, evaluated by a real Prometheus (Debian's `prometheus`) scraping a live server.

A server over simple_cnn and tiny_onnx gets known traffic: a reload of tiny_onnx (algorithm cache lookups),
sequential simple_cnn requests of batch 2 (so each is its own execution of size 2), tiny_onnx requests of batch 1,
and one invalid tiny_onnx request (a failure, reason OTHER).
Prometheus scrapes /metrics every second; once its latest sample holds the final counts, every query in the doc's
```promql blocks is sent to the HTTP API (/api/v1/query) and must return the series a user expects: the labels of
its `by` clause, one series per served model (or per model and reason, or per bucket), with values that follow from
the traffic (mean batch size exactly 2 and 1, failure fraction 0 for simple_cnn and 1/(n+1) for tiny_onnx, no queued
requests, quantiles within the bucket of the slowest request the client saw, the cache hit ratio of the reload's
lookups). Every query of the doc must have an
expectation here, so the doc and this test change together. Bounded: the waits give up after 30 s.
"""
import json
import math
import pathlib
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from conftest import REPO_ROOT, free_port, metric, started_server, stop_and_check

RNG = np.random.default_rng()
MODELS = ("simple_cnn", "tiny_onnx")
SIMPLE_BATCH = 2
REQUESTS = 12            # per model
LATENCY_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
WAIT_S = 30.0


def doc_queries():
    """The queries of docs/metrics.md's ```promql blocks; an indented line continues the query above it."""
    text = (REPO_ROOT / "docs" / "metrics.md").read_text()
    queries = []
    for block in re.findall(r"```promql\n(.*?)```", text, re.S):
        for line in block.splitlines():
            if not line.strip():
                continue
            if line.startswith((" ", "\t")) and queries:
                queries[-1] += " " + line.strip()
            else:
                queries.append(line.strip())
    return queries


class Prometheus:
    def __init__(self, binary, folder, target):
        self.port = free_port()
        config = folder / "prometheus.yml"
        config.write_text(f"""global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: convoy
    static_configs:
      - targets: ["{target}"]
""")
        self.evaluate_at = None  # Unix time the queries are evaluated at; None: now
        self.log = open(folder / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn"],
            stdout=self.log, stderr=subprocess.STDOUT)

    def api(self, path, **params):
        url = f"http://127.0.0.1:{self.port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=5) as r:
            reply = json.loads(r.read())
        assert reply["status"] == "success", reply
        return reply["data"]

    def query(self, promql):
        # Once the traffic's last sample is in, every query is evaluated at that moment: rate() and increase() over
        # [1m] then cover the traffic however long the tests after it take on a busy machine.
        params = {"query": promql}
        if self.evaluate_at is not None:
            params["time"] = f"{self.evaluate_at:.3f}"
        data = self.api("query", **params)
        assert data["resultType"] == "vector", f"{promql}: result type {data['resultType']}"
        return [(s["metric"], float(s["value"][1])) for s in data["result"]]

    def wait_for(self, what, predicate):
        deadline = time.monotonic() + WAIT_S
        last = None
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited with {self.proc.returncode}: {self.log_text()}"
            try:
                last = predicate()
                if last:
                    return last
            except (OSError, ValueError, AssertionError) as e:  # not up yet
                last = e
            time.sleep(0.2)
        pytest.fail(f"Prometheus: no {what} within {WAIT_S} s (last: {last})\n{self.log_text()}", pytrace=False)

    def log_text(self):
        self.log.flush()
        return pathlib.Path(self.log.name).read_text(errors="replace")[-2000:]

    def stop(self):
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


@pytest.fixture(scope="module")
def traffic(tmp_path_factory):
    """(prometheus, {model: {"inferences", "requests", "max_latency"}, "cache": {"hits", "misses"}}) once the
    traffic has been scraped."""
    binary = shutil.which("prometheus")
    if not binary:
        pytest.fail("no `prometheus` binary: tools/setup.sh installs Debian's prometheus", pytrace=False)
    # Explicit control mode, so the test can reload a model while Prometheus watches (algorithm cache lookups).
    server = started_server(tmp_path_factory, list(MODELS), name="prometheus",
                            flags=["--model_control_mode=explicit", f"--load_model={','.join(MODELS)}"])
    prom = Prometheus(binary, tmp_path_factory.mktemp("prometheus"), f"127.0.0.1:{server.metrics_port}")
    try:
        # A first sample before any traffic, so rate() windows start from the counters at rest.
        prom.wait_for("first scrape", lambda: prom.query('nv_inference_count{model="simple_cnn"}'))
        sent = {m: {"inferences": 0, "requests": 0, "max_latency": 0.0} for m in MODELS}
        with server.client() as client:
            cache_before = server.scrape()
            client.unload_model("tiny_onnx")
            client.load_model("tiny_onnx")  # planned again: kernel algorithm lookups inside the window
            for _ in range(REQUESTS):
                for model, name, shape in (("simple_cnn", "images", (SIMPLE_BATCH, 3, 32, 32)),
                                           ("tiny_onnx", "x", (1, 3, 8, 8))):
                    x = grpcclient.InferInput(name, list(shape), "FP32")
                    x.set_data_from_numpy(RNG.random(shape, dtype=np.float32))
                    t0 = time.monotonic()
                    client.infer(model, [x])
                    sent[model]["max_latency"] = max(sent[model]["max_latency"], time.monotonic() - t0)
                    sent[model]["inferences"] += shape[0]
                    sent[model]["requests"] += 1
            bad = grpcclient.InferInput("x", [1, 3, 8, 9], "FP32")
            bad.set_data_from_numpy(np.zeros((1, 3, 8, 9), np.float32))
            with pytest.raises(InferenceServerException):
                client.infer("tiny_onnx", [bad])
        for model in MODELS:
            want = sent[model]["inferences"]
            prom.wait_for(f"sample of {model} with {want} inferences",
                          lambda m=model, w=want: [v for _, v in prom.query(f'nv_inference_count{{model="{m}"}}')]
                          == [w])
        prom.wait_for("sample with the failure", lambda: [v for _, v in prom.query(
            'nv_inference_request_failure{model="tiny_onnx",reason="OTHER"}')] == [1])
        cache_after = server.scrape()
        lookups = {k: metric(cache_after, f"convoy_algorithm_cache_{k}_total") -
                   metric(cache_before, f"convoy_algorithm_cache_{k}_total") for k in ("hits", "misses")}
        sent["cache"] = lookups
        prom.wait_for("sample with the reload's cache lookups", lambda: [v for _, v in prom.query(
            "convoy_algorithm_cache_misses_total")] == [metric(cache_after, "convoy_algorithm_cache_misses_total")])
        prom.evaluate_at = time.time()  # every sample of the traffic is in by now
        yield prom, sent
    finally:
        prom.stop()
        stop_and_check(server)


def by_model(series, expected_labels=("model",)):
    assert series, "no series"
    for labels, _ in series:
        assert set(labels) == set(expected_labels), f"labels {labels}, expected exactly {expected_labels}"
    return {tuple(labels[k] for k in expected_labels) if len(expected_labels) > 1 else labels[expected_labels[0]]: v
            for labels, v in series}


def bucket_bound(seconds):
    """The upper bound of the latency bucket holding `seconds`: histogram_quantile never goes past it."""
    return next((b for b in LATENCY_BUCKETS if seconds <= b), math.inf)


def expect_positive_per_model(series, sent):
    values = by_model(series)
    assert set(values) == set(MODELS), values
    assert all(math.isfinite(v) and v > 0 for v in values.values()), values


def expect_failures_by_reason(series, sent):
    values = by_model(series, ("model", "reason"))
    assert set(values) == {(m, r) for m in MODELS for r in ("REJECTED", "CANCELED", "BACKEND", "OTHER")}, values
    assert values[("tiny_onnx", "OTHER")] > 0, values
    assert all(v == 0 for k, v in values.items() if k != ("tiny_onnx", "OTHER")), values


def expect_failure_fraction(series, sent):
    values = by_model(series)
    assert values["simple_cnn"] == 0, values
    # rate() extrapolates both counters over the same scrapes, so the ratio is the ratio of the increases.
    assert values["tiny_onnx"] == pytest.approx(1 / (sent["tiny_onnx"]["requests"] + 1), rel=1e-9), values


def expect_latency_quantile(series, sent):
    values = by_model(series)
    assert set(values) == set(MODELS), values
    for model, v in values.items():
        assert 0 < v <= bucket_bound(sent[model]["max_latency"]), (model, v, sent[model]["max_latency"])


def expect_queue_quantile(series, sent):
    values = by_model(series)
    assert set(values) == set(MODELS), values
    for model, v in values.items():
        assert 0 <= v <= bucket_bound(sent[model]["max_latency"]), (model, v, sent[model]["max_latency"])


def expect_time_within_latency(series, sent):
    values = by_model(series)
    assert set(values) == set(MODELS), values
    for model, v in values.items():
        assert math.isfinite(v) and 0 <= v <= sent[model]["max_latency"], (model, v, sent[model]["max_latency"])


def expect_mean_batch_size(series, sent):
    values = by_model(series)
    assert values == pytest.approx({"simple_cnn": SIMPLE_BATCH, "tiny_onnx": 1}, rel=1e-9), values


def expect_batch_size_distribution(series, sent):
    values = by_model(series, ("le",))
    bounds = sorted(values, key=float)
    assert bounds[-1] == "+Inf" and "1" in values and "2" in values, bounds
    # Every execution had size 2: nothing at or below 1, everything at or below 2.
    assert values["1"] == 0 and values["2"] > 0, values
    assert all(values[b] == values["2"] for b in bounds if float(b) >= 2), values


def expect_no_queue(series, sent):
    assert by_model(series) == {m: 0 for m in MODELS}


def expect_hit_ratio(series, sent):
    assert len(series) == 1 and series[0][0] == {}, series
    lookups = sent["cache"]
    assert lookups["hits"] + lookups["misses"] > 0, f"the reload made no algorithm cache lookups: {lookups}"
    # rate() extrapolates each counter from its own first value, so the ratio is close to, not exactly, the ratio of
    # the increases the test scraped itself.
    expected = lookups["hits"] / (lookups["hits"] + lookups["misses"])
    assert series[0][1] == pytest.approx(expected, abs=0.05), (series[0][1], lookups)


def expect_execution_time_per_batch_size(series, sent):
    # simple_cnn always ran batches of SIMPLE_BATCH: that size was measured, and it cannot exceed a request's latency.
    values = by_model(series, ("batch_size",))
    assert str(SIMPLE_BATCH) in values, values
    assert 0 < values[str(SIMPLE_BATCH)] <= sent["simple_cnn"]["max_latency"], values


def expect_hold_per_model(series, sent):
    values = by_model(series)
    assert set(values) <= set(MODELS) and values, values
    assert all(0 <= v <= sent[m]["max_latency"] for m, v in values.items()), values


def expect_clients_per_model(series, sent):
    values = by_model(series)
    assert set(values) <= set(MODELS) and values, values
    assert all(0 <= v for v in values.values()), values


def expect_no_rejection(series, sent):
    # Verification of algorithm choices runs on GPUs (docs/cuda_kernels.md); this server is on the CPU, so the alert
    # query finds nothing: an empty result, not an error.
    assert series == [], series


EXPECTATIONS = [
    (r"^sum by \(algorithm, reason\) \(increase\(convoy_algorithm_rejected_total\[1h\]\)\) > 0$", expect_no_rejection),
    (r"^max by \(batch_size\) \(convoy_batcher_execution_seconds\{model=\"simple_cnn\"\}\)$",
     expect_execution_time_per_batch_size),
    (r"^max by \(model\) \(convoy_batcher_wait_seconds\)$", expect_hold_per_model),
    (r"^sum by \(model\) \(convoy_batcher_clients\)$", expect_clients_per_model),
    (r"^sum by \(model\) \(rate\(nv_inference_count\[1m\]\)\)$", expect_positive_per_model),
    (r"^sum by \(model\) \(rate\(nv_inference_request_success\[1m\]\)\)$", expect_positive_per_model),
    (r"^sum by \(model, reason\) \(rate\(nv_inference_request_failure\[5m\]\)\)$", expect_failures_by_reason),
    (r"^sum by \(model\) \(rate\(nv_inference_request_failure\[5m\]\)\) / ", expect_failure_fraction),
    (r"^histogram_quantile\(0\.\d+, sum by \(le, model\) \(rate\(convoy_request_duration_seconds_bucket",
     expect_latency_quantile),
    (r"^histogram_quantile\(0\.\d+, sum by \(le, model\) \(rate\(convoy_queue_duration_seconds_bucket",
     expect_queue_quantile),
    (r"^sum by \(model\) \(rate\(nv_inference_(queue|compute_infer)_duration_us\[5m\]\)\) / sum by \(model\) "
     r"\(rate\(nv_inference_request_success\[5m\]\)\) / 1e6$", expect_time_within_latency),
    (r"^sum by \(model\) \(rate\(nv_inference_count\[5m\]\)\) / sum by \(model\) "
     r"\(rate\(nv_inference_exec_count\[5m\]\)\)$", expect_mean_batch_size),
    (r'^sum by \(le\) \(increase\(convoy_batch_size_bucket\{model="simple_cnn"\}\[1m\]\)\)$',
     expect_batch_size_distribution),
    (r"^sum by \(model\) \(nv_inference_pending_request_count\)$", expect_no_queue),
    (r"^sum\(rate\(convoy_algorithm_cache_hits_total\[5m\]\)\) / ", expect_hit_ratio),
]


def test_the_doc_has_the_queries_the_issue_names():
    queries = " ".join(doc_queries())
    for needed in ["rate(nv_inference_count", "convoy_request_duration_seconds_bucket", "histogram_quantile(0.99",
                   "nv_inference_queue_duration_us", "convoy_queue_duration_seconds_bucket", "nv_inference_exec_count",
                   "convoy_batch_size_bucket"]:
        assert needed in queries, f"docs/metrics.md has no PromQL with {needed}"


@pytest.mark.parametrize("promql", doc_queries())
def test_doc_query_returns_the_expected_series(traffic, promql):
    prom, sent = traffic
    matching = [check for pattern, check in EXPECTATIONS if re.search(pattern, promql)]
    assert len(matching) == 1, f"{len(matching)} expectations match this docs/metrics.md query: add one here"
    series = prom.query(promql)
    try:
        matching[0](series, sent)
    except AssertionError as e:
        raise AssertionError(f"{promql}\n  returned {series}\n  {e}") from None
