"""KServe v2 HTTP/REST through tritonclient.http (sync, gevent async_infer, and the asyncio client) against a real
server: JSON and binary inputs and outputs, every datatype a model serves (FP32, FP16, UINT8), nested and flat JSON
data, the classification extension, request ids, priority and timeout, metadata, config and readiness, and
the statistics extension (the same numbers as gRPC's ModelStatistics). Each result
is compared with onnxruntime (relative error <= 1e-4 for FP32, 1e-2 for FP16) and with the gRPC path on the same
input (the two protocols share one decoder and one batcher: same bytes in, same outputs out, <= 1e-6).
"""
import asyncio
import http.client
import json
import pathlib
import re
import subprocess

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from tritonclient.utils import InferenceServerException

from conftest import metric, TINY_LABELS, UINT8_MEAN, UINT8_STD, relative_error, simple_cnn_as_onnx, tiny_model_path

RNG = np.random.default_rng()
FP32_TOL = 1e-4
SAME_TOL = 1e-6


@pytest.fixture(scope="module")
def refs(shared_server, tmp_path_factory):
    repo = shared_server.repository
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    paths = {"simple_cnn": simple_cnn_as_onnx(repo, tmp_path_factory.mktemp("ref"))}
    for name in ("tiny_onnx", "tiny_fp16", "tiny_uint8"):
        paths[name] = tiny_model_path(repo, name)
    return {k: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for k, p in paths.items()}


@pytest.fixture(scope="module")
def http_client(shared_server):
    with httpclient.InferenceServerClient(shared_server.http_url, concurrency=4) as c:
        yield c


def reference(refs, model, feeds):
    session = refs[model]
    return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))


def http_infer(client, model, name, array, datatype, binary_in, binary_out, outputs=("probabilities",), **kwargs):
    t = httpclient.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array, binary_data=binary_in)
    requested = [httpclient.InferRequestedOutput(o, binary_data=binary_out) for o in outputs]
    return client.infer(model, [t], outputs=requested, **kwargs)


def grpc_infer(server, model, name, array, datatype, outputs=("probabilities",)):
    with grpcclient.InferenceServerClient(server.url) as c:
        t = grpcclient.InferInput(name, list(array.shape), datatype)
        t.set_data_from_numpy(array)
        return c.infer(model, [t], outputs=[grpcclient.InferRequestedOutput(o) for o in outputs])


@pytest.mark.parametrize("binary_in,binary_out", [(False, False), (True, True), (True, False), (False, True)],
                         ids=["json", "binary", "binary-in-json-out", "json-in-binary-out"])
@pytest.mark.parametrize("batch", [1, 5])
def test_simple_cnn_matches_reference_and_grpc(shared_server, http_client, refs, binary_in, binary_out, batch):
    x = RNG.uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32)
    result = http_infer(http_client, "simple_cnn", "images", x, "FP32", binary_in, binary_out)
    got = result.as_numpy("probabilities")
    assert got.shape == (batch, 10) and got.dtype == np.float32
    expected = reference(refs, "simple_cnn", {"images": x})["probabilities"]
    assert relative_error(got, expected) <= FP32_TOL
    over_grpc = grpc_infer(shared_server, "simple_cnn", "images", x, "FP32").as_numpy("probabilities")
    assert relative_error(got, over_grpc) <= SAME_TOL
    response = result.get_response()
    assert response["model_name"] == "simple_cnn" and response["model_version"] == "1"


def test_all_outputs_by_default_in_binary(shared_server, http_client, refs):
    """No outputs named: tritonclient asks for binary_data_output and gets every model output."""
    x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    t = httpclient.InferInput("x", list(x.shape), "FP32")
    t.set_data_from_numpy(x)
    result = http_client.infer("tiny_onnx", [t])
    expected = reference(refs, "tiny_onnx", {"x": x})
    names = sorted(o["name"] for o in result.get_response()["outputs"])
    assert names == ["embedding", "logits"]
    assert all("binary_data_size" in o["parameters"] for o in result.get_response()["outputs"])
    for name in names:
        assert relative_error(result.as_numpy(name), expected[name]) <= FP32_TOL


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_fp16_model(http_client, refs, binary):
    x = RNG.uniform(-1, 1, (3, 3, 8, 8)).astype(np.float16)
    result = http_infer(http_client, "tiny_fp16", "x", x, "FP16", binary, binary, outputs=("logits",))
    got = result.as_numpy("logits")
    assert got.dtype == np.float16
    expected = reference(refs, "tiny_fp16", {"x": x.astype(np.float32)})["logits"]
    assert relative_error(got, expected) <= 1e-2


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_uint8_model(shared_server, http_client, refs, binary):
    pixels = RNG.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    result = http_infer(http_client, "tiny_uint8", "x", pixels, "UINT8", binary, binary, outputs=("logits",))
    chw = ((pixels.astype(np.float32) / 255 - UINT8_MEAN) / UINT8_STD).transpose(0, 3, 1, 2)
    assert relative_error(result.as_numpy("logits"), reference(refs, "tiny_uint8", {"x": chw})["logits"]) <= FP32_TOL
    over_grpc = grpc_infer(shared_server, "tiny_uint8", "x", pixels, "UINT8", outputs=("logits",))
    assert relative_error(result.as_numpy("logits"), over_grpc.as_numpy("logits")) <= SAME_TOL


def post_json(server, path, body, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        conn.request("POST", path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def test_nested_and_flat_json_data_agree(shared_server, refs):
    x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    answers = []
    for data in (x.tolist(), x.ravel().tolist()):
        status, _, body = post_json(shared_server, "/v2/models/tiny_onnx/infer", json.dumps(
            {"inputs": [{"name": "x", "datatype": "FP32", "shape": list(x.shape), "data": data}],
             "outputs": [{"name": "logits"}]}))
        assert status == 200, body
        out = json.loads(body)["outputs"][0]
        assert out["shape"] == [2, 5] and out["datatype"] == "FP32"
        answers.append(np.array(out["data"], np.float32).reshape(out["shape"]))
    assert np.array_equal(answers[0], answers[1])
    assert relative_error(answers[0], reference(refs, "tiny_onnx", {"x": x})["logits"]) <= FP32_TOL


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_classification_matches_grpc(shared_server, http_client, binary):
    x = RNG.uniform(-1, 1, (3, 3, 8, 8)).astype(np.float32)
    t = httpclient.InferInput("x", list(x.shape), "FP32")
    t.set_data_from_numpy(x, binary_data=binary)
    result = http_client.infer("tiny_onnx", [t], outputs=[
        httpclient.InferRequestedOutput("logits", binary_data=binary, class_count=3)])
    got = result.as_numpy("logits")
    assert got.shape == (3, 3)
    with grpcclient.InferenceServerClient(shared_server.url) as c:
        g = grpcclient.InferInput("x", list(x.shape), "FP32")
        g.set_data_from_numpy(x)
        want = c.infer("tiny_onnx", [g], outputs=[grpcclient.InferRequestedOutput("logits", class_count=3)])
    assert [e.decode() if isinstance(e, bytes) else e for e in got.ravel()] == \
           [e.decode() for e in want.as_numpy("logits").ravel()]
    for entry in got.ravel():
        text = entry.decode() if isinstance(entry, bytes) else entry
        score, index, label = text.split(":")
        assert label == TINY_LABELS[int(index)]


def test_request_id_priority_and_timeout(http_client):
    x = RNG.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32)
    t = httpclient.InferInput("x", list(x.shape), "FP32")
    t.set_data_from_numpy(x)
    result = http_client.infer("tiny_onnx", [t], request_id="req-42", priority=1, timeout=10_000_000)
    assert result.get_response()["id"] == "req-42"


def test_async_infer_gevent(http_client, refs):
    xs = [RNG.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(6)]
    pending = []
    for x in xs:
        t = httpclient.InferInput("images", list(x.shape), "FP32")
        t.set_data_from_numpy(x)
        pending.append(http_client.async_infer("simple_cnn", [t]))
    for x, p in zip(xs, pending):
        got = p.get_result().as_numpy("probabilities")
        assert relative_error(got, reference(refs, "simple_cnn", {"images": x})["probabilities"]) <= FP32_TOL


def test_asyncio_client(shared_server, refs):
    async def run():
        async with aiohttpclient.InferenceServerClient(shared_server.http_url) as c:
            assert await c.is_server_live() and await c.is_server_ready()
            xs = [RNG.uniform(-1, 1, (2, 3, 32, 32)).astype(np.float32) for _ in range(4)]
            inputs = []
            for x in xs:
                t = aiohttpclient.InferInput("images", list(x.shape), "FP32")
                t.set_data_from_numpy(x, binary_data=len(inputs) % 2 == 0)
                inputs.append(t)
            results = await asyncio.gather(*(c.infer("simple_cnn", [t]) for t in inputs))
            return xs, [r.as_numpy("probabilities") for r in results]
    xs, outs = asyncio.run(run())
    for x, got in zip(xs, outs):
        assert relative_error(got, reference(refs, "simple_cnn", {"images": x})["probabilities"]) <= FP32_TOL


def test_health_metadata_and_config(shared_server, http_client):
    assert http_client.is_server_live() and http_client.is_server_ready()
    meta = http_client.get_server_metadata()
    assert meta["name"] == "convoy" and "binary_tensor_data" in meta["extensions"]
    assert "classification" in meta["extensions"]
    assert http_client.is_model_ready("simple_cnn") and http_client.is_model_ready("simple_cnn", "1")
    assert not http_client.is_model_ready("no_such_model")
    model = http_client.get_model_metadata("simple_cnn")
    with grpcclient.InferenceServerClient(shared_server.url) as c:
        over_grpc = c.get_model_metadata("simple_cnn", as_json=True)
        config_grpc = c.get_model_config("simple_cnn", as_json=True)["config"]
    assert model["name"] == over_grpc["name"] and model["versions"] == over_grpc["versions"]
    assert model["platform"] == over_grpc["platform"]
    for side in ("inputs", "outputs"):
        assert [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in model[side]] == \
               [(t["name"], t["datatype"], [int(d) for d in t["shape"]]) for t in over_grpc[side]]
    config = http_client.get_model_config("simple_cnn")
    assert config["name"] == "simple_cnn" and config["max_batch_size"] == config_grpc["max_batch_size"]
    assert config["input"][0]["name"] == "images"


def test_same_bad_request_same_message_on_both_protocols(shared_server, http_client):
    x = RNG.uniform(-1, 1, (1, 3, 8, 9)).astype(np.float32)
    messages = []
    t = httpclient.InferInput("x", list(x.shape), "FP32")
    t.set_data_from_numpy(x)
    with pytest.raises(InferenceServerException) as e:
        http_client.infer("tiny_onnx", [t])
    messages.append(e.value.message())
    with grpcclient.InferenceServerClient(shared_server.url) as c:
        g = grpcclient.InferInput("x", list(x.shape), "FP32")
        g.set_data_from_numpy(x)
        with pytest.raises(InferenceServerException) as e:
            c.infer("tiny_onnx", [g])
        messages.append(e.value.message())
    assert messages[0] == "input 'x': expected shape [-1,3,8,8], got [1,3,8,9]"
    assert messages[1] == messages[0]


def readme_http_blocks():
    """The README's HTTP/REST curl block and the output block after it."""
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("Over HTTP/REST (KServe v2, port 8000)", 1)[1]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    assert blocks[0][0] == "sh" and blocks[1][0] == "", "README: the curl block and its output block moved"
    return blocks[0][1], blocks[1][1].splitlines()


def test_readme_curl_examples_print_what_the_readme_shows(shared_server):
    """The commands run as written but for the port (the test server's free port instead of 8000); the repository is
    the shared server's copy of the sample simple_cnn. Each printed line equals the README's, the classification
    scores within 1e-5."""
    commands, expected = readme_http_blocks()
    assert commands.count("localhost:8000") == 5
    script = commands.replace("localhost:8000", f"localhost:{shared_server.http_port}")
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = run.stdout.splitlines()
    assert len(got) == len(expected), run.stdout
    for line, want in zip(got, expected):
        g, w = json.loads(line), json.loads(want)
        if "outputs" in w and w["outputs"][0]["datatype"] == "BYTES":
            gd, wd = g["outputs"][0].pop("data"), w["outputs"][0].pop("data")
            assert [e.split(":")[1] for e in gd] == [e.split(":")[1] for e in wd]
            assert max(abs(float(a.split(":")[0]) - float(b.split(":")[0])) for a, b in zip(gd, wd)) <= 1e-5
        assert g == w


def _stat_numbers(entry):
    """The numbers of one model_stats entry, whichever protocol printed it (gRPC's JSON prints uint64 as strings and
    leaves zeros out)."""
    def d(x):
        return int((x or {}).get("count", 0)), int((x or {}).get("ns", 0))
    stats = entry.get("inference_stats", {})
    return {"name": entry["name"], "version": entry["version"],
            "inference_count": int(entry.get("inference_count", 0)),
            "execution_count": int(entry.get("execution_count", 0)),
            "last_inference": int(entry.get("last_inference", 0)),
            **{k: d(stats.get(k)) for k in ("success", "fail", "queue", "compute_input", "compute_infer",
                                            "compute_output")},
            "batches": sorted((int(b["batch_size"]), d(b.get("compute_infer"))) for b in entry.get("batch_stats", []))}


def test_statistics_extension_matches_grpc(shared_server, http_client):
    before = _stat_numbers(http_client.get_inference_statistics("tiny_onnx")["model_stats"][0])
    for _ in range(3):
        x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
        t = httpclient.InferInput("x", list(x.shape), "FP32")
        t.set_data_from_numpy(x)
        http_client.infer("tiny_onnx", [t])
    over_http = http_client.get_inference_statistics("tiny_onnx")["model_stats"]
    with grpcclient.InferenceServerClient(shared_server.url) as c:
        over_grpc = c.get_inference_statistics("tiny_onnx", as_json=True)["model_stats"]
        every_grpc = c.get_inference_statistics(as_json=True)["model_stats"]
    assert [_stat_numbers(e) for e in over_http] == [_stat_numbers(e) for e in over_grpc]
    after = _stat_numbers(over_http[0])
    assert after["inference_count"] == before["inference_count"] + 6
    assert after["success"][0] == before["success"][0] + 3
    assert after["success"][1] > before["success"][1] and after["last_inference"] >= before["last_inference"]
    every = http_client.get_inference_statistics()["model_stats"]
    assert sorted(e["name"] for e in every) == sorted(e["name"] for e in every_grpc) == \
           ["resnet_classifier", "simple_cnn", "tiny_fp16", "tiny_onnx", "tiny_uint8"]
    assert http_client.get_inference_statistics("tiny_onnx", "1")["model_stats"] == over_http
    meta = http_client.get_server_metadata()
    assert "statistics" in meta["extensions"]


def test_edge_phases_are_counted_per_protocol(shared_server, http_client):
    """convoy_edge_requests_total and convoy_edge_duration_us{phase=decode|encode|send} count each protocol's
    successful requests apart, with a positive decode, encode and send time, and HTTP's receive time (first byte to
    whole body; gRPC has no receive series); a refused request is not counted."""
    def edge(samples, protocol):
        labels = dict(model="tiny_onnx", version="1", protocol=protocol)
        return (metric(samples, "convoy_edge_requests_total", **labels),
                metric(samples, "convoy_edge_duration_us", phase="decode", **labels),
                metric(samples, "convoy_edge_duration_us", phase="encode", **labels))

    sent = {"http": int(RNG.integers(2, 6)), "grpc": int(RNG.integers(2, 6))}
    before = shared_server.scrape()
    for _ in range(sent["http"]):
        x = RNG.uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
        t = httpclient.InferInput("x", list(x.shape), "FP32")
        t.set_data_from_numpy(x, binary_data=bool(RNG.integers(0, 2)))
        http_client.infer("tiny_onnx", [t])
    with grpcclient.InferenceServerClient(shared_server.url) as c:
        for _ in range(sent["grpc"]):
            t = grpcclient.InferInput("x", [1, 3, 8, 8], "FP32")
            t.set_data_from_numpy(RNG.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32))
            c.infer("tiny_onnx", [t])
        bad = grpcclient.InferInput("x", [1, 3, 8, 9], "FP32")
        bad.set_data_from_numpy(np.zeros((1, 3, 8, 9), np.float32))
        with pytest.raises(InferenceServerException):
            c.infer("tiny_onnx", [bad])
    after = shared_server.scrape()
    for protocol, n in sent.items():
        (count0, decode0, encode0), (count1, decode1, encode1) = edge(before, protocol), edge(after, protocol)
        assert count1 - count0 == n, (protocol, count0, count1, n)
        assert decode1 > decode0 and encode1 > encode0, (protocol, decode0, decode1, encode0, encode1)
        labels = dict(model="tiny_onnx", version="1", protocol=protocol)
        send0 = metric(before, "convoy_edge_duration_us", phase="send", **labels)
        send1 = metric(after, "convoy_edge_duration_us", phase="send", **labels)
        assert send1 > send0, (protocol, send0, send1)  # recorded once the write completed: all but the last at least
    http = dict(model="tiny_onnx", version="1", protocol="http", phase="receive")
    assert metric(after, "convoy_edge_duration_us", **http) > metric(before, "convoy_edge_duration_us", **http)
    assert not any(n == "convoy_edge_duration_us" and ("phase", "receive") in ls and ("protocol", "grpc") in ls
                   for (n, ls) in after)
