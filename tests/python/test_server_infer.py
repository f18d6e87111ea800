"""Inference through tritonclient.grpc against a real server, compared with onnxruntime on fresh random inputs:
raw (binary) and typed contents, FP16 and UINT8-preprocessed inputs, requested output subsets, the classification
extension, request ids, async_infer and streaming. Tolerance: relative error (max |diff| / max |ref|) <= 1e-4 for
FP32, 1e-2 for FP16 outputs.
"""
import queue
import threading

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.grpc import service_pb2
from tritonclient.utils import InferenceServerException

from conftest import TINY_LABELS, UINT8_MEAN, UINT8_STD, relative_error, simple_cnn_as_onnx, tiny_model_path

RNG = np.random.default_rng()
FP32_TOL = 1e-4


@pytest.fixture(scope="module")
def refs(shared_server, tmp_path_factory):
    """onnxruntime sessions for each served model."""
    repo = shared_server.repository
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    made = tmp_path_factory.mktemp("ref")
    paths = {"simple_cnn": simple_cnn_as_onnx(repo, made),
             "resnet_classifier": repo / "resnet_classifier" / "1" / "model.onnx"}
    for name in ("tiny_onnx", "tiny_fp16", "tiny_uint8"):
        paths[name] = tiny_model_path(repo, name)
    return {k: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for k, p in paths.items()}


def reference(refs, model, feeds, outputs=None):
    return dict(zip([o.name for o in refs[model].get_outputs()], refs[model].run(None, feeds)))


def images(batch, c=3, h=32, w=32):
    return RNG.uniform(-1, 1, (batch, c, h, w)).astype(np.float32)


TYPED_FIELDS = {"FP32": "fp32_contents", "UINT8": "uint_contents", "INT64": "int64_contents"}


def make_input(name, array, datatype, binary=True):
    """An InferInput carrying `array` as raw bytes (binary) or as typed contents. tritonclient.grpc 2.41's
    set_data_from_numpy has no binary_data switch (only the HTTP client has one) and always sends raw bytes, so the
    typed form fills the request tensor's `contents` directly."""
    t = grpcclient.InferInput(name, list(array.shape), datatype)
    if binary:
        t.set_data_from_numpy(array)
    else:
        getattr(t._get_tensor().contents, TYPED_FIELDS[datatype]).extend(array.ravel().tolist())
    return t


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
@pytest.mark.parametrize("batch", [1, 3, 17])
def test_simple_cnn_matches_reference(client, refs, binary, batch):
    x = images(batch)
    outputs = [grpcclient.InferRequestedOutput("probabilities")]
    result = client.infer("simple_cnn", [make_input("images", x, "FP32", binary)], outputs=outputs)
    got = result.as_numpy("probabilities")
    want = reference(refs, "simple_cnn", {"images": x})["probabilities"]
    assert got.shape == (batch, 10) and got.dtype == np.float32
    assert relative_error(got, want) <= FP32_TOL
    np.testing.assert_allclose(got.sum(axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_resnet_matches_onnxruntime(client, refs, binary):
    x = images(2, h=224, w=224)
    result = client.infer("resnet_classifier", [make_input("images", x, "FP32", binary)])
    got = result.as_numpy("logits")
    want = reference(refs, "resnet_classifier", {"images": x})["logits"]
    assert got.shape == (2, 1000)
    assert relative_error(got, want) <= FP32_TOL


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_tiny_onnx_both_outputs(client, refs, binary):
    x = images(4, h=8, w=8)
    result = client.infer("tiny_onnx", [make_input("x", x, "FP32", binary)])
    want = reference(refs, "tiny_onnx", {"x": x})
    for name in ("logits", "embedding"):
        assert relative_error(result.as_numpy(name), want[name]) <= FP32_TOL, name


def test_requested_output_subset(client, refs):
    x = images(3, h=8, w=8)
    want = reference(refs, "tiny_onnx", {"x": x})
    for name in ("logits", "embedding"):
        result = client.infer("tiny_onnx", [make_input("x", x, "FP32")],
                              outputs=[grpcclient.InferRequestedOutput(name)])
        returned = [o.name for o in result.get_response().outputs]
        assert returned == [name]
        assert relative_error(result.as_numpy(name), want[name]) <= FP32_TOL


def test_fp16_input_and_output(client, refs):
    x16 = images(3, h=8, w=8).astype(np.float16)
    result = client.infer("tiny_fp16", [make_input("x", x16, "FP16")])
    want = reference(refs, "tiny_fp16", {"x": x16.astype(np.float32)})
    for name in ("logits", "embedding"):
        got = result.as_numpy(name)
        assert got.dtype == np.float16, name
        assert relative_error(got, want[name]) <= 1e-2, name


def test_fp16_typed_contents_are_refused(client):
    """The protocol has no FP16 typed-contents field: an FP16 input sent typed (here as fp32_contents) is refused."""
    t = grpcclient.InferInput("x", [1, 3, 8, 8], "FP16")
    t._get_tensor().contents.fp32_contents.extend(images(1, h=8, w=8).ravel().tolist())
    with pytest.raises(InferenceServerException) as err:
        client.infer("tiny_fp16", [t])
    assert "INVALID_ARGUMENT" in str(err.value.status())
    assert "'x'" in err.value.message()


@pytest.mark.parametrize("binary", [True, False], ids=["raw", "typed"])
def test_uint8_preprocessed_input(client, refs, binary):
    pixels = RNG.integers(0, 256, (2, 8, 8, 3), dtype=np.uint8)
    result = client.infer("tiny_uint8", [make_input("x", pixels, "UINT8", binary)])
    normalized = ((pixels.astype(np.float32) / 255.0 - UINT8_MEAN) / UINT8_STD).transpose(0, 3, 1, 2)
    want = reference(refs, "tiny_uint8", {"x": np.ascontiguousarray(normalized, np.float32)})
    assert relative_error(result.as_numpy("logits"), want["logits"]) <= FP32_TOL


def parse_classes(entries):
    """b"score:index:label" strings -> [(score, index, label)]."""
    out = []
    for e in entries:
        parts = e.decode().split(":")
        assert len(parts) == 3, f"expected score:index:label, got {e!r}"
        out.append((float(parts[0]), int(parts[1]), parts[2]))
    return out


def check_top_k(classes, logits, labels, k):
    """`classes` (one row) against the reference logits: k entries, scores descending and equal to the reference at
    their index, labels from the labels file, and the indices are the reference's top k (ties within tolerance may
    swap)."""
    tol = 1e-4 * max(1.0, float(np.max(np.abs(logits))))
    assert len(classes) == k
    scores = [s for s, _, _ in classes]
    assert scores == sorted(scores, reverse=True)
    order = np.argsort(-logits, kind="stable")
    for score, index, label in classes:
        assert label == labels[index]
        assert abs(score - logits[index]) <= tol, (score, index, logits[index])
    kth = logits[order[k - 1]]
    for score, _, _ in classes:
        assert score >= kth - tol
    clear = [int(i) for i in order[:k] if abs(logits[i] - kth) > tol]
    assert set(clear) <= {i for _, i, _ in classes}


def test_classification_resnet_top5(client, refs, shared_server):
    labels = (shared_server.repository / "resnet_classifier" / "labels.txt").read_text().splitlines()
    x = images(2, h=224, w=224)
    result = client.infer("resnet_classifier", [make_input("images", x, "FP32")],
                          outputs=[grpcclient.InferRequestedOutput("logits", class_count=5)])
    got = result.as_numpy("logits")
    assert got.shape == (2, 5)
    want = reference(refs, "resnet_classifier", {"images": x})["logits"]
    for row in range(2):
        check_top_k(parse_classes(got[row]), want[row], labels, 5)


def test_classification_tiny_with_labels(client, refs):
    x = images(3, h=8, w=8)
    result = client.infer("tiny_onnx", [make_input("x", x, "FP32")],
                          outputs=[grpcclient.InferRequestedOutput("logits", class_count=3),
                                   grpcclient.InferRequestedOutput("embedding")])
    want = reference(refs, "tiny_onnx", {"x": x})
    got = result.as_numpy("logits")
    assert got.shape == (3, 3)
    for row in range(3):
        check_top_k(parse_classes(got[row]), want["logits"][row], TINY_LABELS, 3)
    assert relative_error(result.as_numpy("embedding"), want["embedding"]) <= FP32_TOL


def test_request_id_is_echoed(client):
    rid = f"req-{RNG.integers(1 << 30)}"
    result = client.infer("simple_cnn", [make_input("images", images(1), "FP32")], request_id=rid)
    response = result.get_response()
    assert response.id == rid
    assert response.model_name == "simple_cnn"
    assert response.model_version == "1"


def test_async_infer(client, refs):
    n = 8
    inputs = [images(int(RNG.integers(1, 4))) for _ in range(n)]
    done = queue.Queue()
    for i, x in enumerate(inputs):
        client.async_infer("simple_cnn", [make_input("images", x, "FP32")],
                           callback=lambda result, error, i=i: done.put((i, result, error)), request_id=str(i))
    seen = set()
    for _ in range(n):
        i, result, error = done.get(timeout=60)
        assert error is None, error
        assert result.get_response().id == str(i)
        want = reference(refs, "simple_cnn", {"images": inputs[i]})["probabilities"]
        assert relative_error(result.as_numpy("probabilities"), want) <= FP32_TOL
        seen.add(i)
    assert seen == set(range(n))


def test_streaming_responses_per_request_id(shared_server, refs):
    n = 10
    inputs = {f"s{i}": images(int(RNG.integers(1, 4))) for i in range(n)}
    responses = queue.Queue()
    stream_client = shared_server.client()
    try:
        stream_client.start_stream(callback=lambda result, error: responses.put((result, error)))
        for rid, x in inputs.items():
            stream_client.async_stream_infer("simple_cnn", [make_input("images", x, "FP32")], request_id=rid)
        got = {}
        for _ in range(n):
            result, error = responses.get(timeout=60)
            assert error is None, error
            got[result.get_response().id] = result.as_numpy("probabilities")
        # An error on the stream comes back as a response too, without ending the stream.
        stream_client.async_stream_infer("no_such_model", [make_input("images", images(1), "FP32")], request_id="bad")
        result, error = responses.get(timeout=60)
        assert error is not None and "no_such_model" in str(error)
    finally:
        stream_client.stop_stream()
        stream_client.close()
    assert set(got) == set(inputs)
    for rid, x in inputs.items():
        want = reference(refs, "simple_cnn", {"images": x})["probabilities"]
        assert relative_error(got[rid], want) <= FP32_TOL, rid


def varint(value, width=0):
    """`value` as a protobuf base-128 varint, padded with continuation bytes to `width` bytes (protobuf reads an
    overlong varint as the same number)."""
    out = bytearray()
    while True:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
        if value == 0 and len(out) >= width:
            break
    out[-1] &= 0x7F
    return bytes(out)


def raw_field(payload, length_width=0, tag_width=0):
    """raw_input_contents (field 7, length-delimited) holding `payload`, its length `length_width` bytes long and its
    tag `tag_width` bytes long."""
    return varint(7 << 3 | 2, tag_width) + varint(len(payload), length_width) + payload


def stream_request(rid, model, x):
    """A ModelInferRequest for `x` without its raw_input_contents, and the tensor's bytes."""
    req = service_pb2.ModelInferRequest(model_name=model, id=rid)
    tensor = req.inputs.add(name="images", datatype="FP32")
    tensor.shape.extend(x.shape)
    return req, x.tobytes()


def test_stream_requests_read_from_the_wire(shared_server, refs):
    """ModelStreamInfer reads each request from gRPC's bytes itself (the raw_input_contents copied once): requests
    in the canonical encoding, with the fields in reverse order and an unknown field, with the tensor's length as an
    overlong varint of 5 bytes (still read in place), with its tag as an overlong varint (left to protobuf), and the
    ResNet's 588 KiB input across many of gRPC's slices, each answer equal to onnxruntime's; a tensor whose declared
    length runs past the message, a 6-byte length (protobuf reads at most 5) and a message with two
    raw_input_contents for one input get precise errors inline, and the stream goes on."""
    good = {}  # id -> (model, input, message bytes)
    for i, layout in enumerate(["canonical", "reversed", "length_5_bytes", "tag_2_bytes"]):
        rid = f"w{i}"
        x = images(int(RNG.integers(1, 4)))
        req, raw = stream_request(rid, "simple_cnn", x)
        if layout == "canonical":
            message = req.SerializeToString() + raw_field(raw)
        elif layout == "reversed":  # raw_input_contents first, each field alone, then an unknown varint field 99
            message = (raw_field(raw) + service_pb2.ModelInferRequest(inputs=req.inputs).SerializeToString() +
                       service_pb2.ModelInferRequest(id=rid).SerializeToString() +
                       service_pb2.ModelInferRequest(model_name="simple_cnn").SerializeToString() +
                       varint(99 << 3) + varint(12345))
        elif layout == "length_5_bytes":
            message = req.SerializeToString() + raw_field(raw, length_width=5)
        else:
            message = req.SerializeToString() + raw_field(raw, tag_width=2)
        good[rid] = ("simple_cnn", x, message)
    x = RNG.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)
    req, raw = stream_request("big", "resnet_classifier", x)
    good["big"] = ("resnet_classifier", x, req.SerializeToString() + raw_field(raw))

    req, raw = stream_request("short", "simple_cnn", images(1))
    head = req.SerializeToString()
    truncated = head + raw_field(raw)[:-10]  # declares 12288 bytes, 10 fewer follow
    req2, raw2 = stream_request("two", "simple_cnn", images(1))
    doubled = req2.SerializeToString() + raw_field(raw2) + raw_field(raw2)
    req3, raw3 = stream_request("long", "simple_cnn", images(1))
    head3 = req3.SerializeToString()
    long_length = head3 + raw_field(raw3, length_width=6)

    messages = [good["w0"][2], truncated, good["w1"][2], good["w2"][2], doubled, good["big"][2], long_length,
                good["w3"][2]]
    with shared_server.channel() as channel:
        call = channel.stream_stream("/inference.GRPCInferenceService/ModelStreamInfer",
                                     response_deserializer=service_pb2.ModelStreamInferResponse.FromString)
        responses = list(call(iter(messages), timeout=120))
    assert len(responses) == len(messages)
    errors = [r.error_message for r in responses if r.error_message]
    assert sorted(errors) == sorted([
        f"request 2 on this stream: malformed request: the {len(truncated)} bytes received are not a valid "
        f"inference.ModelInferRequest: field 7 (raw_input_contents) at byte {len(head)} declares 12288 bytes, "
        f"12278 remain",
        f"request 7 on this stream: malformed request: the {len(long_length)} bytes received are not a valid "
        f"inference.ModelInferRequest: field 7 (raw_input_contents) at byte {len(head3)}: a truncated or invalid "
        f"length",
        "expected one raw_input_contents entry per input: the request has 1 inputs and 2 raw_input_contents"])
    answers = {r.infer_response.id: r.infer_response for r in responses if not r.error_message}
    assert set(answers) == set(good)
    for rid, (model, x, _) in good.items():
        response = answers[rid]
        assert response.model_name == model and response.model_version == "1"
        assert [o.name for o in response.outputs] == [o.name for o in refs[model].get_outputs()]
        want = refs[model].run(None, {"images": x})[0]
        got = np.frombuffer(response.raw_output_contents[0], np.float32).reshape(want.shape)
        assert relative_error(got, want) <= FP32_TOL, rid


def test_concurrent_clients_are_batched_and_correct(shared_server, refs):
    """Eight threads at once on simple_cnn: every answer matches its own input (no cross-talk between the requests
    the dynamic batcher puts in one batch)."""
    errors = []

    def worker():
        c = shared_server.client()
        try:
            for _ in range(5):
                x = images(int(RNG.integers(1, 5)))
                got = c.infer("simple_cnn", [make_input("images", x, "FP32")]).as_numpy("probabilities")
                want = reference(refs, "simple_cnn", {"images": x})["probabilities"]
                if relative_error(got, want) > FP32_TOL:
                    errors.append(relative_error(got, want))
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
        finally:
            c.close()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    hung = [t.name for t in threads if t.is_alive()]
    assert not hung, f"{len(hung)} client threads still running after 120 s"
    assert not errors


def process_cpu_seconds(pid):
    """User + system CPU seconds of process `pid` (all its threads), from /proc/PID/stat."""
    import os
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_idle_server_uses_no_cpu(shared_server, client):
    """After requests that ran oneDNN and own CPU kernels (resnet_classifier, its steps on the OpenMP team), the
    server's threads sleep: over two idle seconds, after one of grace for libgomp's bounded spin, the process uses
    less than 0.1 CPU-seconds (an idle worker that spun or woke its peers in a loop would use up to one per core)."""
    import time
    for _ in range(5):
        client.infer("resnet_classifier", [make_input("images", images(1, h=224, w=224), "FP32")])
    time.sleep(1.0)
    before = process_cpu_seconds(shared_server.proc.pid)
    time.sleep(2.0)
    used = process_cpu_seconds(shared_server.proc.pid) - before
    assert used < 0.1, f"an idle server used {used:.2f} CPU-seconds in 2 s"
