"""The server's GPU path end to end, without a GPU: convoy_server_emulated_gpu selects the emulated CUDA device and
runs every model through the CUDA backend's kernels (NHWC plans, a stream per instance, device-side UINT8
preprocessing, CUDA graphs per batch size with `cuda_graphs: true`), compared with onnxruntime on fresh random
inputs. Tolerance: relative error (max |diff| / max |ref|) <= 1e-4 (FP32 plans).
"""
import concurrent.futures

import numpy as np
import onnxruntime as ort
import pytest
import tritonclient.grpc as grpcclient

from conftest import (UINT8_MEAN, UINT8_STD, emulated_gpu_server_binary, relative_error, simple_cnn_as_onnx,
                      started_server, stop_and_check, tiny_model_path)

RNG = np.random.default_rng()
FP32_TOL = 1e-4
MODELS = ["simple_cnn", "tiny_onnx", "tiny_uint8", "tiny_graphs"]


@pytest.fixture(scope="module")
def gpu_server(tmp_path_factory):
    server = started_server(tmp_path_factory, MODELS, name="emulated_gpu", binary=emulated_gpu_server_binary(),
                            device="cuda")
    yield server
    stop_and_check(server)


@pytest.fixture(scope="module")
def gpu_client(gpu_server):
    c = gpu_server.client()
    yield c
    c.close()


@pytest.fixture(scope="module")
def refs(gpu_server, tmp_path_factory):
    repo = gpu_server.repository
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    paths = {"simple_cnn": simple_cnn_as_onnx(repo, tmp_path_factory.mktemp("ref"))}
    for name in ("tiny_onnx", "tiny_uint8", "tiny_graphs"):
        paths[name] = tiny_model_path(repo, name)
    sessions = {k: ort.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"]) for k, p in paths.items()}

    def run(model, feeds):
        session = sessions[model]
        return dict(zip([o.name for o in session.get_outputs()], session.run(None, feeds)))
    return run


def infer(client, model, name, array, datatype="FP32"):
    t = grpcclient.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return client.infer(model, [t])


def test_startup_summary_names_the_emulated_gpu_and_the_graph_recordings(gpu_server):
    log = gpu_server.log_tail(lines=400)
    assert "device:          cuda (" in log and "CUDA emulation" in log, log
    assert "planned" in log and "cuda-emulated:" in log, log
    assert "tiny_graphs: planned" in log and "a CUDA graph per batch size" in log, log
    assert "tiny_graphs: recorded a CUDA graph for 2 warm-up batch size(s)" in log, log
    assert "tiny_graphs: instance 0 recorded 2 CUDA graph(s) during warm-up" in log, log


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("model", ["simple_cnn", "tiny_onnx", "tiny_graphs"])
def test_float_models_match_onnxruntime(gpu_client, refs, model, batch):
    shape = (batch, 3, 32, 32) if model == "simple_cnn" else (batch, 3, 8, 8)
    x = RNG.uniform(-1, 1, shape).astype(np.float32)
    name = "images" if model == "simple_cnn" else "x"
    result = infer(gpu_client, model, name, x)
    want = refs(model, {name: x})
    for output, expected in want.items():
        assert relative_error(result.as_numpy(output), expected) <= FP32_TOL, output


@pytest.mark.parametrize("batch", [1, 2])
def test_uint8_images_are_normalized_on_the_device(gpu_client, refs, batch):
    pixels = RNG.integers(0, 256, (batch, 8, 8, 3), dtype=np.uint8)
    result = infer(gpu_client, "tiny_uint8", "x", pixels, "UINT8")
    normalized = ((pixels.astype(np.float32) / 255.0 - UINT8_MEAN) / UINT8_STD).transpose(0, 3, 1, 2)
    want = refs("tiny_uint8", {"x": np.ascontiguousarray(normalized, np.float32)})
    assert relative_error(result.as_numpy("logits"), want["logits"]) <= FP32_TOL
    assert relative_error(result.as_numpy("embedding"), want["embedding"]) <= FP32_TOL


def test_graph_replays_under_concurrent_requests_keep_every_answer_right(gpu_server, refs):
    """Concurrent requests of mixed sizes are batched into batch sizes whose graphs were recorded at warm-up (1, 2)
    or are recorded on first use; each answer must still be its own input's."""
    inputs = [RNG.uniform(-1, 1, (int(RNG.integers(1, 4)), 3, 8, 8)).astype(np.float32) for _ in range(16)]

    def one(x):
        with gpu_server.client() as client:
            return infer(client, "tiny_graphs", "x", x).as_numpy("logits")

    with concurrent.futures.ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, inputs))
    for x, got in zip(inputs, results):
        assert relative_error(got, refs("tiny_graphs", {"x": x})["logits"]) <= FP32_TOL
