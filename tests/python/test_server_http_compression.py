"""HTTP content codings (Triton's behaviour): request bodies sent with Content-Encoding gzip or deflate are inflated
before they are parsed, and infer responses come back compressed with the coding Accept-Encoding prefers. Checked
with tritonclient.http's request_compression_algorithm / response_compression_algorithm (JSON and binary tensors,
every combination), with raw requests whose headers and bytes are inspected, and with curl (the README's example,
run as written). Every compressed answer must equal the uncompressed answer to the same request.
"""
import gzip
import http.client
import json
import pathlib
import re
import subprocess
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient

from conftest import relative_error

RNG = np.random.default_rng()
SAME_TOL = 1e-6


@pytest.fixture(scope="module")
def http_client(shared_server):
    with httpclient.InferenceServerClient(shared_server.http_url) as c:
        yield c


def infer(client, x, binary, **compression):
    t = httpclient.InferInput("images", list(x.shape), "FP32")
    t.set_data_from_numpy(x, binary_data=binary)
    out = httpclient.InferRequestedOutput("probabilities", binary_data=binary)
    return client.infer("simple_cnn", [t], outputs=[out], **compression).as_numpy("probabilities")


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
@pytest.mark.parametrize("request_coding", [None, "gzip", "deflate"])
@pytest.mark.parametrize("response_coding", [None, "gzip", "deflate"])
def test_tritonclient_compression_gives_the_plain_answer(http_client, binary, request_coding, response_coding):
    x = RNG.uniform(-1, 1, (3, 3, 32, 32)).astype(np.float32)
    plain = infer(http_client, x, binary)
    got = infer(http_client, x, binary, request_compression_algorithm=request_coding,
                response_compression_algorithm=response_coding)
    assert got.shape == (3, 10) and got.dtype == np.float32
    assert relative_error(got, plain) <= SAME_TOL


def post(server, body, headers):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        conn.request("POST", "/v2/models/simple_cnn/infer", body=body, headers=headers)
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def images_request(batch):
    x = RNG.uniform(-1, 1, (batch, 3, 32, 32)).astype(np.float32)
    return json.dumps({"inputs": [{"name": "images", "datatype": "FP32", "shape": list(x.shape),
                                   "data": x.ravel().tolist()}]}).encode()


@pytest.mark.parametrize("accept,coding,inflate", [
    ("gzip", "gzip", gzip.decompress),
    ("deflate", "deflate", zlib.decompress),
    ("deflate, gzip, br, zstd", "deflate", zlib.decompress),   # curl --compressed: the first of equals
    ("gzip;q=0.4, deflate;q=0.8", "deflate", zlib.decompress),
    ("br, identity;q=0.5, gzip;q=0.9", "gzip", gzip.decompress),
    ("gzip;q=0", None, None),
    ("br", None, None),
], ids=["gzip", "deflate", "curl", "q-values", "mixed", "q0", "unknown"])
def test_accept_encoding_picks_the_coding(shared_server, accept, coding, inflate):
    body = images_request(2)
    status, headers, plain = post(shared_server, body, {})
    assert status == 200 and "content-encoding" not in headers
    status, headers, answer = post(shared_server, gzip.compress(body),
                                   {"Content-Encoding": "gzip", "Accept-Encoding": accept})
    assert status == 200, answer
    assert headers.get("content-encoding") == coding
    if coding is not None:
        assert headers.get("vary") == "Accept-Encoding"
        assert int(headers["content-length"]) == len(answer)
        answer = inflate(answer)
    want, got = json.loads(plain)["outputs"][0], json.loads(answer)["outputs"][0]
    assert got["shape"] == want["shape"] == [2, 10]
    assert relative_error(got["data"], want["data"]) <= SAME_TOL


def test_binary_response_compressed_keeps_its_json_header_length(shared_server):
    """Inference-Header-Content-Length counts the JSON of the inflated body, as tritonclient reads it."""
    x = RNG.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32)
    header = json.dumps({"inputs": [{"name": "images", "datatype": "FP32", "shape": [1, 3, 32, 32],
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "outputs": [{"name": "probabilities", "parameters": {"binary_data": True}}]}).encode()
    status, headers, answer = post(shared_server, zlib.compress(header + x.tobytes()),
                                   {"Content-Encoding": "deflate", "Accept-Encoding": "gzip",
                                    "Inference-Header-Content-Length": str(len(header))})
    assert status == 200, answer
    assert headers["content-encoding"] == "gzip"
    body = gzip.decompress(answer)
    length = int(headers["inference-header-content-length"])
    response = json.loads(body[:length])
    assert response["outputs"][0]["parameters"]["binary_data_size"] == 40 == len(body) - length
    probabilities = np.frombuffer(body[length:], np.float32)
    assert abs(float(probabilities.sum()) - 1.0) <= 1e-5  # simple_cnn ends in a softmax


def readme_compression_block():
    readme = (pathlib.Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = readme.split("Compressed requests and responses", 1)[1]
    blocks = re.findall(r"```(\w*)\n(.*?)```", section, re.S)
    assert blocks[0][0] == "sh" and blocks[1][0] == "", "README: the compression curl block and its output moved"
    return blocks[0][1], blocks[1][1].splitlines()


def test_readme_curl_compression_example(shared_server):
    """The README's curl example (a gzip body, a compressed answer curl inflates) prints what the README shows."""
    command, expected = readme_compression_block()
    assert command.count("localhost:8000") == 1
    script = command.replace("localhost:8000", f"localhost:{shared_server.http_port}")
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    got = run.stdout.splitlines()
    assert len(got) == len(expected), run.stdout
    for line, want in zip(got, expected):
        if not line.startswith("{"):
            assert line.strip().lower() == want.strip().lower()
            continue
        g, w = json.loads(line), json.loads(want)
        gd, wd = g["outputs"][0].pop("data"), w["outputs"][0].pop("data")
        assert [e.split(":")[1] for e in gd] == [e.split(":")[1] for e in wd]
        assert max(abs(float(a.split(":")[0]) - float(b.split(":")[0])) for a, b in zip(gd, wd)) <= 1e-5
        assert g == w
