"""The HTTP/REST bad-input battery: every case is a request a client can get wrong (paths, methods, malformed and
truncated JSON, wrong types, shapes, values and parameters, binary data sizes that disagree with the JSON header,
compressed bodies that are not what their Content-Encoding says or inflate past the body limit, oversized bodies and
headers, garbage request lines) or a connection it can handle oddly (pipelined, half-closed,
slow). Each asserts the exact status and, where Convoy answers, the exact {"error": ...} message; after each the
server still answers /v2/health/live and an inference. 413 and the 400 for a request line that is not HTTP come from
libevent before a request reaches Convoy: only their status is asserted.
"""
import gzip
import http.client
import json
import re
import socket
import struct
import time
import zlib

import numpy as np
import pytest

from conftest import started_server, stop_and_check

RNG = np.random.default_rng()
MAX_BODY = 2_000_000


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = started_server(tmp_path_factory, ["simple_cnn", "tiny_onnx", "tiny_uint8"], name="http_bad",
                       flags=[f"--http_max_body_bytes={MAX_BODY}"])
    yield s
    stop_and_check(s)


def send(server, method, path, body=b"", headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def tiny_input(**overrides):
    x = {"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8],
         "data": RNG.uniform(-1, 1, 192).astype(np.float32).tolist()}
    x.update(overrides)
    return x


def tiny(inputs=None, **fields):
    return json.dumps({"inputs": [tiny_input()] if inputs is None else inputs, **fields})


def binary_request(sizes, payload_bytes, shape=(1, 3, 8, 8), header_length=None):
    """A binary-extension request to tiny_onnx: one input per size, then `payload_bytes` bytes after the header."""
    inputs = [{"name": "x", "datatype": "FP32", "shape": list(shape), "parameters": {"binary_data_size": s}}
              for s in sizes]
    header = json.dumps({"inputs": inputs}).encode()
    length = len(header) if header_length is None else header_length
    return header + RNG.bytes(payload_bytes), {"Inference-Header-Content-Length": str(length)}


def json_header_only(inputs):
    """A request whose Inference-Header-Content-Length covers the whole (JSON-only) body."""
    body = json.dumps({"inputs": inputs}).encode()
    return body, {"Inference-Header-Content-Length": str(len(body))}


TINY = "/v2/models/tiny_onnx/infer"
CLS = "output 'logits': parameter 'classification' (the 5 classes of [-1,5]): "
NOT_FOUND_PATH = ("unknown path '{}' (KServe v2: /v2/health/live, /v2/health/ready, /v2, "
                  "/v2/models/{{model}}[/versions/{{v}}][/ready|/config|/stats|/infer], /v2/models/stats, "
                  "/v2/repository/index, /v2/repository/models/{{model}}/load|unload)")

# (id, method, path, body, headers, status, message)
CASES = [
    # Paths and methods.
    ("unknown_root", "GET", "/v1/models", b"", None, 404, NOT_FOUND_PATH.format("/v1/models")),
    ("empty_model_name", "GET", "/v2/models/", b"", None, 404, NOT_FOUND_PATH.format("/v2/models/")),
    ("unknown_model_action", "GET", "/v2/models/tiny_onnx/statistics", b"", None, 404,
     NOT_FOUND_PATH.format("/v2/models/tiny_onnx/statistics")),
    ("unknown_model_stats", "GET", "/v2/models/nope/stats", b"", None, 404, "unknown model 'nope'"),
    ("unknown_version_stats", "GET", "/v2/models/tiny_onnx/versions/7/stats", b"", None, 404,
     "model 'tiny_onnx' has no version '7'"),
    ("post_to_stats", "POST", "/v2/models/stats", b"{}", None, 405,
     "method POST is not allowed on '/v2/models/stats'; allowed: GET, HEAD"),
    ("too_many_segments", "POST", "/v2/models/tiny_onnx/versions/1/infer/x", tiny(), None, 404,
     NOT_FOUND_PATH.format("/v2/models/tiny_onnx/versions/1/infer/x")),
    ("unknown_model_metadata", "GET", "/v2/models/nope", b"", None, 404, "unknown model 'nope'"),
    ("unknown_model_ready", "GET", "/v2/models/nope/ready", b"", None, 404, "unknown model 'nope'"),
    ("unknown_model_infer", "POST", "/v2/models/nope/infer", tiny(), None, 404, "unknown model 'nope'"),
    ("unknown_version", "GET", "/v2/models/tiny_onnx/versions/9", b"", None, 404,
     "model 'tiny_onnx' has no version '9'"),
    ("unknown_version_infer", "POST", "/v2/models/tiny_onnx/versions/9/infer", tiny(), None, 404,
     "model 'tiny_onnx' has no version '9'"),
    ("post_to_health", "POST", "/v2/health/live", b"{}", None, 405,
     "method POST is not allowed on '/v2/health/live'; allowed: GET, HEAD"),
    ("get_infer", "GET", TINY, b"", None, 405, f"method GET is not allowed on '{TINY}'; allowed: POST"),
    # The repository extension (this server runs with model control mode none).
    ("get_repository_index", "GET", "/v2/repository/index", b"", None, 405,
     "method GET is not allowed on '/v2/repository/index'; allowed: POST"),
    ("repository_unknown_action", "POST", "/v2/repository/models/tiny_onnx/reload", b"", None, 404,
     NOT_FOUND_PATH.format("/v2/repository/models/tiny_onnx/reload")),
    ("repository_index_body_not_object", "POST", "/v2/repository/index", b"[true]", None, 400,
     "the body of the repository index request must be a JSON object"),
    ("repository_load_body_truncated", "POST", "/v2/repository/models/tiny_onnx/load", b'{"parameters":', None, 400,
     "the body of the load of model 'tiny_onnx' is not JSON: Invalid value. at offset 14"),
    ("repository_load_without_explicit_mode", "POST", "/v2/repository/models/tiny_onnx/load", b"", None, 503,
     "explicit model load / unload is not allowed if polling is enabled or the model control mode is none "
     "(start with --model_control_mode=explicit)"),
    ("put_infer", "PUT", TINY, tiny(), None, 405, f"method PUT is not allowed on '{TINY}'; allowed: POST"),
    ("delete_metadata", "DELETE", "/v2", b"", None, 405, "method DELETE is not allowed on '/v2'; allowed: GET, HEAD"),
    # Malformed and truncated JSON.
    ("empty_body", "POST", TINY, b"", None, 400, "malformed JSON at byte 0 of the 0-byte request: The document is empty."),
    ("truncated_array", "POST", TINY, b'{"inputs":[', None, 400,
     "malformed JSON at byte 11 of the 11-byte request: Invalid value."),
    ("truncated_string", "POST", TINY, b'{"inputs":[{"name":"x', None, 400,
     "malformed JSON at byte 21 of the 21-byte request: Missing a closing quotation mark in string."),
    ("trailing_garbage", "POST", TINY, b'{"inputs":[]} x', None, 400,
     "malformed JSON at byte 14 of the 15-byte request: The document root must not be followed by other values."),
    ("single_quotes", "POST", TINY, b"{'inputs':[]}", None, 400,
     "malformed JSON at byte 1 of the 13-byte request: Missing a name for object member."),
    ("root_not_object", "POST", TINY, b"[1,2]", None, 400, "the request: expected a JSON object, got [1,2]"),
    ("deep_nesting", "POST", TINY, b'{"inputs":' + b"[" * 100000 + b"]" * 100000 + b"}", None, 400,
     "inputs[0]: expected an object, got [[[[[[[[[...]]]]]]]]]"),
    # The JSON's own shape.
    ("inputs_missing", "POST", TINY, b"{}", None, 400, "'inputs' is missing"),
    ("inputs_not_array", "POST", TINY, b'{"inputs":{"name":"x"}}', None, 400,
     'inputs: expected an array, got {"name":"x"}'),
    ("input_not_object", "POST", TINY, b'{"inputs":[7]}', None, 400, "inputs[0]: expected an object, got 7"),
    ("name_missing", "POST", TINY, tiny([{"datatype": "FP32", "shape": [1], "data": [1]}]), None, 400,
     "inputs[0]: 'name' is missing"),
    ("datatype_not_string", "POST", TINY, tiny([tiny_input(datatype=32)]), None, 400,
     "inputs[0].datatype: expected a string, got 32"),
    ("shape_missing", "POST", TINY, tiny([{"name": "x", "datatype": "FP32", "data": []}]), None, 400,
     "inputs[0]: 'shape' is missing"),
    ("shape_not_array", "POST", TINY, tiny([tiny_input(shape="1,3,8,8")]), None, 400,
     "inputs[0].shape: expected an array of non-negative integers, got '1,3,8,8'"),
    ("shape_negative", "POST", TINY, tiny([tiny_input(shape=[1, 3, -8, 8])]), None, 400,
     "inputs[0].shape[2]: expected a non-negative integer, got -8"),
    ("shape_fraction", "POST", TINY, tiny([tiny_input(shape=[1, 3, 8.5, 8])]), None, 400,
     "inputs[0].shape[2]: expected a non-negative integer, got 8.5"),
    ("id_not_string", "POST", TINY, tiny(id=12), None, 400, "id: expected a string, got 12"),
    ("parameters_not_object", "POST", TINY, tiny(parameters=[1]), None, 400,
     "parameters: expected an object, got [1]"),
    ("outputs_not_array", "POST", TINY, tiny(outputs="logits"), None, 400, "outputs: expected an array, got 'logits'"),
    ("output_name_missing", "POST", TINY, tiny(outputs=[{}]), None, 400, "outputs[0]: 'name' is missing"),
    ("binary_data_not_bool", "POST", TINY, tiny(outputs=[{"name": "logits", "parameters": {"binary_data": 1}}]),
     None, 400, "outputs[0].parameters.binary_data: expected true or false, got 1"),
    # Against the model (the checks shared with gRPC).
    ("wrong_datatype", "POST", TINY, tiny([tiny_input(datatype="FP16")]), None, 400,
     "input 'x': expected datatype FP32, got 'FP16'"),
    ("unknown_datatype", "POST", TINY, tiny([tiny_input(datatype="FLOAT")]), None, 400,
     "input 'x': expected datatype FP32, got 'FLOAT'"),
    ("wrong_shape", "POST", TINY, tiny([tiny_input(shape=[1, 3, 8, 9])]), None, 400,
     "input 'x': expected shape [-1,3,8,8], got [1,3,8,9]"),
    ("batch_too_large", "POST", TINY, tiny([tiny_input(shape=[9, 3, 8, 8], data=[])]), None, 400,
     "input 'x': batch size 9 is outside 1..8 (max_batch_size of model 'tiny_onnx')"),
    ("batch_zero", "POST", TINY, tiny([tiny_input(shape=[0, 3, 8, 8], data=[])]), None, 400,
     "input 'x': batch size 0 is outside 1..8 (max_batch_size of model 'tiny_onnx')"),
    ("too_few_values", "POST", TINY, tiny([tiny_input(data=[0.5] * 191)]), None, 400,
     "input 'x': expected 192 values in data for shape [1,3,8,8], got 191"),
    ("too_many_nested_values", "POST", TINY, tiny([tiny_input(data=[[0.5] * 96, [0.5] * 97])]), None, 400,
     "input 'x': expected 192 values in data for shape [1,3,8,8], got 193"),
    ("string_value", "POST", TINY, tiny([tiny_input(data=[0.5] * 5 + ["0.5"] + [0.5] * 186)]), None, 400,
     "input 'x': data[5] is '0.5', expected a number for FP32"),
    ("null_value", "POST", TINY, tiny([tiny_input(data=[None] + [0.5] * 191)]), None, 400,
     "input 'x': data[0] is null, expected a number for FP32"),
    ("bool_value", "POST", TINY, tiny([tiny_input(data=[0.5] * 191 + [True])]), None, 400,
     "input 'x': data[191] is true, expected a number for FP32"),
    ("fp32_overflow", "POST", TINY, tiny([tiny_input(data=[1e39] + [0.5] * 191)]), None, 400,
     "input 'x': data[0] is 1e39, expected a number of magnitude at most 3.40282e+38 for FP32"),
    ("data_nested_too_deep", "POST", TINY, tiny([tiny_input(data=json.loads("[" * 40 + "1" + "]" * 40))]), None, 400,
     "input 'x': data nests arrays deeper than 32 levels"),
    ("uint8_out_of_range", "POST", "/v2/models/tiny_uint8/infer",
     json.dumps({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [1, 8, 8, 3], "data": [7] * 191 + [256]}]}),
     None, 400, "input 'x': data[191] is 256, expected an integer 0..255 for UINT8"),
    ("uint8_negative", "POST", "/v2/models/tiny_uint8/infer",
     json.dumps({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [1, 8, 8, 3], "data": [-1] + [7] * 191}]}),
     None, 400, "input 'x': data[0] is -1, expected an integer 0..255 for UINT8"),
    ("unknown_input", "POST", TINY, tiny([tiny_input(name="y")]), None, 400,
     "unexpected input 'y': model 'tiny_onnx' has inputs ['x']"),
    ("missing_input", "POST", TINY, tiny([]), None, 400,
     "missing input 'x' of model 'tiny_onnx' (expected [-1,3,8,8] FP32)"),
    ("input_twice", "POST", TINY, tiny([tiny_input(), tiny_input()]), None, 400,
     "input 'x' is given twice (request inputs 0 and 1)"),
    ("no_data", "POST", TINY, tiny([{"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8]}]), None, 400,
     "input 'x': no data: expected 'data' or parameters.binary_data_size"),
    ("unknown_output", "POST", TINY, tiny(outputs=[{"name": "probs"}]), None, 400,
     "unexpected output 'probs': model 'tiny_onnx' has outputs ['logits', 'embedding']"),
    ("output_twice", "POST", TINY, tiny(outputs=[{"name": "logits"}, {"name": "logits"}]), None, 400,
     "output 'logits' is requested twice"),
    ("classification_zero", "POST", TINY,
     tiny(outputs=[{"name": "logits", "parameters": {"classification": 0}}]), None, 400, CLS + "expected 1..5, got 0"),
    ("classification_too_large", "POST", TINY,
     tiny(outputs=[{"name": "logits", "parameters": {"classification": 6}}]), None, 400, CLS + "expected 1..5, got 6"),
    ("classification_string", "POST", TINY,
     tiny(outputs=[{"name": "logits", "parameters": {"classification": "3"}}]), None, 400,
     CLS + "expected an integer, got '3'"),
    ("priority_string", "POST", TINY, tiny(parameters={"priority": "high"}), None, 400,
     "parameter 'priority': expected an integer, got 'high'"),
    ("priority_negative", "POST", TINY, tiny(parameters={"priority": -1}), None, 400,
     "parameter 'priority': expected >= 0, got -1"),
    ("timeout_fraction", "POST", TINY, tiny(parameters={"timeout": 1.5}), None, 400,
     "parameter 'timeout' (microseconds): expected an integer, got 1.5"),
    ("binary_output_default_not_bool", "POST", TINY, tiny(parameters={"binary_data_output": "yes"}), None, 400,
     "parameters.binary_data_output: expected true or false, got 'yes'"),
    # The binary tensor data extension.
    ("header_length_not_a_number", "POST", TINY, tiny(), {"Inference-Header-Content-Length": "12abc"}, 400,
     "Inference-Header-Content-Length: expected a non-negative integer, got '12abc'"),
    ("header_length_negative", "POST", TINY, tiny(), {"Inference-Header-Content-Length": "-5"}, 400,
     "Inference-Header-Content-Length: expected a non-negative integer, got '-5'"),
    ("header_length_beyond_body", "POST", TINY, b'{"inputs":[]}', {"Inference-Header-Content-Length": "14"}, 400,
     "Inference-Header-Content-Length is 14, larger than the 13-byte body"),
    ("header_length_cuts_json", "POST", TINY, b'{"inputs":[]}', {"Inference-Header-Content-Length": "5"}, 400,
     "malformed JSON at byte 5 of the 5-byte request: Missing a closing quotation mark in string."),
    ("binary_without_header", "POST", TINY,
     tiny([{"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8], "parameters": {"binary_data_size": 768}}]),
     None, 400, "input 'x': parameters.binary_data_size is set but the request has no "
                "Inference-Header-Content-Length header"),
    ("binary_size_not_integer", "POST", TINY, *json_header_only(
        [{"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8], "parameters": {"binary_data_size": "768"}}]), 400,
     "input 'x': parameters.binary_data_size: expected a non-negative integer, got '768'"),
    ("binary_size_negative", "POST", TINY, *json_header_only(
        [{"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8], "parameters": {"binary_data_size": -768}}]), 400,
     "input 'x': parameters.binary_data_size: expected a non-negative integer, got -768"),
    ("header_length_zero", "POST", TINY, tiny(), {"Inference-Header-Content-Length": "0"}, 400,
     "malformed JSON at byte 0 of the 0-byte request: The document is empty."),
    ("binary_and_data", "POST", TINY,
     tiny([tiny_input(parameters={"binary_data_size": 768})]), None, 400,
     "input 'x': both 'data' and parameters.binary_data_size are set; send one"),
    ("binary_size_beyond_body", "POST", TINY, *binary_request([768], 700), 400,
     "input 'x': parameters.binary_data_size is 768 but only 700 bytes of binary data are left in the body"),
    ("binary_bytes_left_over", "POST", TINY, *binary_request([768], 769), 400,
     "the inputs' binary_data_size values add up to 768 bytes, but the body carries 769 bytes after the JSON header "
     "(Inference-Header-Content-Length {})"),
    ("binary_size_wrong_for_shape", "POST", TINY, *binary_request([764], 764), 400,
     "input 'x': expected 768 bytes for shape [1,3,8,8] FP32, got 764"),
    # Compressed bodies (Content-Encoding): the limit applies to the inflated size.
    ("gzip_header_on_plain_body", "POST", TINY, tiny(), {"Content-Encoding": "gzip"}, 400,
     "request body (Content-Encoding: gzip): not valid gzip data (incorrect header check)"),
    ("deflate_header_on_gzip_body", "POST", TINY, gzip.compress(tiny().encode()), {"Content-Encoding": "deflate"},
     400, "request body (Content-Encoding: deflate): not valid deflate data (incorrect header check)"),
    ("gzip_truncated", "POST", TINY, gzip.compress(tiny().encode())[:100], {"Content-Encoding": "gzip"}, 400,
     "request body (Content-Encoding: gzip): the gzip data ends early (truncated after 100 bytes)"),
    ("deflate_trailing_bytes", "POST", TINY, zlib.compress(tiny().encode()) + b"xyz", {"Content-Encoding": "deflate"},
     400, "request body (Content-Encoding: deflate): 3 bytes follow the end of the deflate data"),
    ("gzip_bomb", "POST", TINY, gzip.compress(b" " * (20 * MAX_BODY)), {"Content-Encoding": "gzip"}, 413,
     f"request body (Content-Encoding: gzip): inflates to more than {MAX_BODY} bytes, the largest request body this "
     "server takes (--http_max_body_bytes)"),
    ("deflate_just_over_the_limit", "POST", TINY, zlib.compress(b" " * (MAX_BODY + 1)), {"Content-Encoding": "deflate"},
     413, f"request body (Content-Encoding: deflate): inflates to more than {MAX_BODY} bytes, the largest request body "
     "this server takes (--http_max_body_bytes)"),
    ("gzip_malformed_json", "POST", TINY, gzip.compress(b'{"inputs":['), {"Content-Encoding": "gzip"}, 400,
     "malformed JSON at byte 11 of the 11-byte request: Invalid value."),
    ("unsupported_coding", "POST", TINY, tiny(), {"Content-Encoding": "br"}, 415,
     "Content-Encoding 'br' is not supported: send the body as it is or with gzip or deflate"),
    ("two_codings", "POST", TINY, tiny(), {"Content-Encoding": "gzip, gzip"}, 415,
     "Content-Encoding 'gzip, gzip' is not supported: send the body as it is or with gzip or deflate"),
]


def header_length_of(headers):
    return headers.get("Inference-Header-Content-Length") if headers else None


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_request(server, case):
    name, method, path, body, headers, status, message = case
    body = body.encode() if isinstance(body, str) else body
    if "{}" in message:
        message = message.format(header_length_of(headers))
    got_status, got_headers, got_body = send(server, method, path, body, headers)
    assert got_status == status, got_body
    assert got_headers.get("Content-Type") == "application/json"
    assert json.loads(got_body) == {"error": message}
    if status == 405:
        assert got_headers.get("Allow") == message.rsplit("allowed: ", 1)[1]
    assert_still_serving(server)


def assert_still_serving(server):
    status, _, body = send(server, "GET", "/v2/health/live")
    assert (status, json.loads(body)) == (200, {"live": True})
    x = RNG.uniform(-1, 1, 192).astype(np.float32)
    header = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3, 8, 8],
                                     "parameters": {"binary_data_size": 768}}],
                         "outputs": [{"name": "logits"}]}).encode()
    status, _, body = send(server, "POST", TINY, header + x.tobytes(),
                           {"Inference-Header-Content-Length": str(len(header))})
    assert status == 200, body
    assert len(json.loads(body)["outputs"][0]["data"]) == 5


def test_oversized_body_is_413(server):
    status, _, _ = send(server, "POST", TINY, b" " * (MAX_BODY + 1))
    assert status == 413
    assert_still_serving(server)


def test_oversized_headers_are_refused(server):
    """libevent answers headers over max_header_bytes (64 KiB) with 400 (not 431) and closes the connection."""
    status, _, _ = send(server, "GET", "/v2/health/live", headers={"X-Padding": "a" * 70_000})
    assert status == 400
    assert_still_serving(server)


def raw_exchange(server, data, half_close=False, pause=0.0, read_responses=1):
    """Sends `data` (bytes, or a list of chunks sent `pause` seconds apart) on one connection; returns what came back
    once `read_responses` complete HTTP responses arrived or the server closed."""
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=20) as s:
        for chunk in data if isinstance(data, list) else [data]:
            s.sendall(chunk)
            time.sleep(pause)
        if half_close:
            s.shutdown(socket.SHUT_WR)
        received = b""
        while received.count(b"HTTP/1.1 ") < read_responses or not complete(received, read_responses):
            chunk = s.recv(65536)
            if not chunk:
                break
            received += chunk
        return received


def complete(received, n):
    """True when `received` holds n responses with their Content-Length bodies."""
    rest = received
    for _ in range(n):
        head, sep, rest = rest.partition(b"\r\n\r\n")
        if not sep:
            return False
        length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), b"0"))
        if len(rest) < length:
            return False
        rest = rest[length:]
    return True


def test_request_line_that_is_not_http_is_400(server):
    reply = raw_exchange(server, b"HELLO THERE\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 400 "), reply[:100]
    assert_still_serving(server)


def test_pipelined_requests_are_answered_in_order(server):
    body = tiny().encode()
    request = (b"GET /v2/health/ready HTTP/1.1\r\nHost: x\r\n\r\n" +
               b"POST " + TINY.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
               b"\r\n\r\n" + body +
               b"GET /v2/models/nope HTTP/1.1\r\nHost: x\r\n\r\n")
    reply = raw_exchange(server, request, read_responses=3)
    statuses = re.findall(rb"HTTP/1\.1 (\d{3}) ", reply)
    assert statuses == [b"200", b"200", b"404"], reply[:300]
    assert b'{"ready":true}' in reply and b'"model_name":"tiny_onnx"' in reply and b"unknown model 'nope'" in reply


def test_half_closed_connection_still_gets_its_answer(server):
    body = tiny().encode()
    request = (b"POST " + TINY.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() +
               b"\r\n\r\n" + body)
    reply = raw_exchange(server, request, half_close=True)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]
    assert b'"outputs"' in reply


def test_slow_client_is_served(server):
    body = tiny().encode()
    head = b"POST " + TINY.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: " + str(len(body)).encode() + b"\r\n"
    chunks = [head[:10], head[10:], b"\r\n", body[:100], body[100:]]
    reply = raw_exchange(server, chunks, pause=0.3)
    assert reply.startswith(b"HTTP/1.1 200 "), reply[:200]


def test_truncated_body_then_close_leaves_the_server_serving(server):
    head = b"POST " + TINY.encode() + b" HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n"
    with socket.create_connection(("127.0.0.1", server.http_port), timeout=10) as s:
        s.sendall(head + b'{"inputs":')
    assert_still_serving(server)


def test_keep_alive_connection_serves_many_requests(server):
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=30)
    try:
        for i in range(20):
            conn.request("POST", TINY, body=tiny(id=f"r{i}") if i % 2 == 0 else b"{}")
            r = conn.getresponse()
            payload = json.loads(r.read())
            if i % 2 == 0:
                assert r.status == 200 and payload["id"] == f"r{i}"
            else:
                assert (r.status, payload) == (400, {"error": "'inputs' is missing"})
    finally:
        conn.close()
