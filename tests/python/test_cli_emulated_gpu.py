"""The `convoy` CLI on the GPU path without a GPU: //server/tools:convoy_emulated_gpu runs, tunes and inspects models
on the emulated CUDA device (the CUDA kernels on the CPU), with and without CUDA graphs. Outputs are compared with
onnxruntime on fresh random inputs and weights: FP32 within 1e-4 relative error (max |diff| / max |ref|), TF32 and
FP16 within 1e-2, BF16 within 6e-2 (as in test_cli.py: a handful of roundings per layer).
"""
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper

from conftest import built_binary
from test_cli import mobile_block, rand, relative_error, residual_cnn, save_model


def convoy(*args):
    proc = subprocess.run([built_binary("server/tools/convoy_emulated_gpu"), *map(str, args)], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, f"convoy {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


def run_on_gpu(tmp_path, model, x, *flags):
    np.save(tmp_path / "x.npy", x)
    names = [o.name for o in onnx.load(str(model)).graph.output]
    outputs = [f"--output={n}={tmp_path / (n + '.npy')}" for n in names]
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", *outputs, "--device=cuda", *flags)
    assert "device: cuda-emulated:" in proc.stderr, proc.stderr
    return proc, [np.load(tmp_path / (n + ".npy")) for n in names]


def expected_outputs(model, x):
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})


@pytest.mark.parametrize("graphs", ["false", "true"])
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("build,shape", [(residual_cnn, (3, 16, 16)), (mobile_block, (6, 10, 10))],
                         ids=["residual_cnn", "mobile_block"])
def test_run_on_the_gpu_path_matches_onnxruntime(tmp_path, build, shape, batch, graphs):
    model = build(tmp_path / "m.onnx")
    x = rand(batch, *shape)
    proc, actual = run_on_gpu(tmp_path, model, x, f"--cuda_graphs={graphs}", "--repeat=2")
    if graphs == "true":
        assert "a CUDA graph per batch size" in proc.stderr, proc.stderr
    for got, want in zip(actual, expected_outputs(model, x)):
        assert got.shape == want.shape and got.dtype == np.float32
        assert relative_error(got, want) <= 1e-4


@pytest.mark.parametrize("precision,tolerance", [("tf32", 1e-2), ("fp16", 1e-2), ("bf16", 6e-2)])
def test_reduced_precision_on_the_gpu_path(tmp_path, precision, tolerance):
    model = residual_cnn(tmp_path / "m.onnx")
    x = rand(2, 3, 16, 16)
    _, actual = run_on_gpu(tmp_path, model, x, f"--precision={precision}", "--cuda_graphs")
    for got, want in zip(actual, expected_outputs(model, x)):
        assert relative_error(got, want) <= tolerance


def test_tune_on_the_gpu_path_picks_cuda_algorithms_and_the_cache_reloads(tmp_path):
    model = residual_cnn(tmp_path / "m.onnx")
    cache = tmp_path / "gpu.cache"
    out = convoy("tune", f"--model={model}", "--device=cuda", "--precision=fp16", "--batch_sizes=1",
                 f"--cache={cache}").stdout
    # Both convs have several CUDA candidates and are timed: conv2 (8 -> 8 channels), and the C=3 stem, whose input
    # the planner pads to 8 channels (zeros, and the filter with it) so that it runs on the tensor cores too.
    assert re.search(r"^tune conv2 batch 1: cuda\.conv2d\.\S+ [\d.e-]+ ms$", out, flags=re.M), out
    assert re.search(r"^tune conv1 batch 1: cuda\.conv2d\.\S+ [\d.e-]+ ms$", out, flags=re.M), out
    written = re.search(r"wrote (\d+) entries to", out)
    assert written and int(written.group(1)) >= 2, out
    inspect = convoy("inspect", f"--model={model}", "--device=cuda", "--precision=fp16", f"--cache={cache}")
    assert f"loaded {written.group(1)} algorithm cache entries" in inspect.stderr
    assert "cuda.conv2d." in inspect.stdout and "(tuned " in inspect.stdout, inspect.stdout
    # The chosen algorithms were verified on the (emulated) device.
    assert ", verified" in inspect.stdout, inspect.stdout
    # Without the cache the heuristic chooses, by the launch-cost model: every tensor-core choice prints its launch
    # shape (tuning on the emulator may pick the SIMT kernels, which have no such line).
    heuristic = convoy("inspect", f"--model={model}", "--device=cuda", "--precision=fp16").stdout
    chosen = re.findall(r"algorithm (cuda\.(?:conv2d|gemm)\.\S+?)(?:,| |$)", heuristic, flags=re.M)
    tensor_core = [a for a in chosen if "simt" not in a]
    assert tensor_core, heuristic
    assert heuristic.count("waves, tail") == len(tensor_core), heuristic
    assert "padded to c=8" in inspect.stdout, inspect.stdout


def nhwc_converted_cnn(path):
    """A TF -> ONNX style model: NHWC input -> Transpose to NCHW -> conv+relu -> Transpose back to NHWC (an output)
    and an H <-> W swap of the conv output (a second output)."""
    init = {"w": rand(8, 3, 3, 3), "b": rand(8)}
    nodes = [helper.make_node("Transpose", ["x"], ["nchw"], perm=[0, 3, 1, 2]),
             helper.make_node("Conv", ["nchw", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Transpose", ["r"], ["features_nhwc"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["r"], ["swapped"], perm=[0, 1, 3, 2])]
    return save_model(path, nodes, [("x", (9, 7, 3))], ["features_nhwc", "swapped"], init)


@pytest.mark.parametrize("precision,tolerance", [("fp32", 1e-4), ("fp16", 1e-2)])
def test_transposes_around_a_conv_on_the_gpu_path(tmp_path, precision, tolerance):
    """The CUDA transpose kernels (tiles for NHWC <-> NCHW and the H <-> W swap) in a plan, with CUDA graphs."""
    model = nhwc_converted_cnn(tmp_path / "m.onnx")
    x = rand(3, 9, 7, 3)
    _, actual = run_on_gpu(tmp_path, model, x, f"--precision={precision}", "--cuda_graphs")
    for got, want in zip(actual, expected_outputs(model, x)):
        assert got.shape == want.shape
        assert relative_error(got, want) <= tolerance
    inspect = convoy("inspect", f"--model={model}", "--device=cuda", f"--precision={precision}")
    assert "cuda.transpose.tiles" in inspect.stdout, inspect.stdout
