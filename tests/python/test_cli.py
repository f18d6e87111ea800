"""Tests for the `convoy` CLI (//server/tools:convoy) on small ONNX models built here with the onnx helper: `convoy run`
must match onnxruntime (FP32 within 1e-4 relative error, max |diff| / max |ref|; FP16 and BF16 within the stated
looser bounds), at several batch sizes and in both plan layouts; `inspect` and `tune` must report what they claim.
Fresh random inputs and weights every run.

The binary is $CONVOY_CLI, else found as conftest.built_binary finds every binary ($CONVOY_BAZEL_BIN, bazel-out/k8-opt/bin,
bazel-bin); tools/test.sh builds everything before running pytest.
"""
import pathlib
import re
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from conftest import built_binary

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng()


def cli_path():
    return built_binary("server/tools/convoy", "CONVOY_CLI")


def convoy(*args, check=True):
    proc = subprocess.run([cli_path(), *map(str, args)], capture_output=True, text=True, timeout=300)
    if check and proc.returncode != 0:
        raise AssertionError(f"convoy {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}")
    return proc


def relative_error(actual, expected):
    scale = max(float(np.max(np.abs(expected))), 1e-30)
    return float(np.max(np.abs(actual.astype(np.float64) - expected))) / scale


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


def save_model(path, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(
        nodes, "cli_test",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *shape]) for n, shape in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs],
        initializer=[numpy_helper.from_array(v, n) for n, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def residual_cnn(path):
    """conv3x3+BN+relu -> maxpool -> conv1x1 + residual + relu -> global pool -> flatten -> Gemm -> softmax."""
    init = {
        "w1": rand(8, 3, 3, 3, low=-0.5, high=0.5), "b1": rand(8),
        "gamma": rand(8, low=0.5, high=1.5), "beta": rand(8), "mean": rand(8), "var": rand(8, low=0.5, high=2.0),
        "w2": rand(8, 8, 1, 1, low=-0.5, high=0.5), "b2": rand(8),
        "fc_w": rand(10, 8), "fc_b": rand(10),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "gamma", "beta", "mean", "var"], ["bn"], epsilon=1e-3),
        helper.make_node("Relu", ["bn"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2", "b2"], ["c2"], name="conv2"),
        helper.make_node("Add", ["c2", "p1"], ["sum"]),
        helper.make_node("Relu", ["sum"], ["features"]),
        helper.make_node("GlobalAveragePool", ["features"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1, alpha=0.5, beta=2.0),
        helper.make_node("Softmax", ["logits"], ["probs"], axis=1),
    ]
    return save_model(path, nodes, [("x", (3, 16, 16))], ["probs", "features"], init)


def mobile_block(path):
    """Depthwise conv + relu6, squeeze-excitation gate (Mul by [N,C,1,1]), concat with a padded average pool."""
    init = {
        "dw": rand(6, 1, 3, 3), "pw": rand(6, 6, 1, 1, low=-0.5, high=0.5),
        "se_w": rand(6, 6, 1, 1), "se_b": rand(6), "pads": np.array([0, 0, 1, 1, 0, 0, 1, 1], dtype=np.int64),
    }
    nodes = [
        helper.make_node("Conv", ["x", "dw"], ["d"], group=6, pads=[1, 1, 1, 1]),
        helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
        helper.make_node("Conv", ["d6", "pw"], ["p"]),
        helper.make_node("GlobalAveragePool", ["p"], ["s"]),
        helper.make_node("Conv", ["s", "se_w", "se_b"], ["s1"]),
        helper.make_node("Sigmoid", ["s1"], ["gate"]),
        helper.make_node("Mul", ["p", "gate"], ["gated"]),
        helper.make_node("Pad", ["x", "pads"], ["xp"], mode="edge"),
        helper.make_node("AveragePool", ["xp"], ["smooth"], kernel_shape=[3, 3]),
        helper.make_node("Concat", ["gated", "smooth"], ["y"], axis=1),
    ]
    init["lo"] = np.array(0.0, dtype=np.float32)
    init["hi"] = np.array(6.0, dtype=np.float32)
    return save_model(path, nodes, [("x", (6, 10, 10))], ["y"], init)


MODELS = {"residual_cnn": (residual_cnn, (3, 16, 16)), "mobile_block": (mobile_block, (6, 10, 10))}


def run_cli(tmp_path, model, x, *flags):
    np.save(tmp_path / "x.npy", x)
    names = [o.name for o in onnx.load(str(model)).graph.output]
    outputs = [f"--output={n}={tmp_path / (n + '.npy')}" for n in names]
    convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", *outputs, "--quiet", *flags)
    return [np.load(tmp_path / (n + ".npy")) for n in names]


def expected_outputs(model, x):
    return ort.InferenceSession(str(model), providers=["CPUExecutionProvider"]).run(None, {"x": x})


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_run_matches_onnxruntime_fp32(tmp_path, name, batch, layout):
    build, shape = MODELS[name]
    model = build(tmp_path / f"{name}.onnx")
    x = rand(batch, *shape)
    for actual, expected in zip(run_cli(tmp_path, model, x, f"--layout={layout}"), expected_outputs(model, x)):
        assert actual.shape == expected.shape and actual.dtype == np.float32
        assert relative_error(actual, expected) <= 1e-4


# FP16 rounds to 11 significant bits (2^-11 ~ 5e-4 per rounding), BF16 to 8 (2^-8 ~ 4e-3); a handful of layers
# accumulate a few roundings each.
@pytest.mark.parametrize("precision,tolerance", [("fp16", 1e-2), ("bf16", 6e-2)])
def test_run_reduced_precision_within_stated_tolerance(tmp_path, precision, tolerance):
    model = residual_cnn(tmp_path / "m.onnx")
    x = rand(2, 3, 16, 16)
    for actual, expected in zip(run_cli(tmp_path, model, x, f"--precision={precision}"), expected_outputs(model, x)):
        assert relative_error(actual, expected) <= tolerance


def test_run_reports_input_errors_precisely(tmp_path):
    model = residual_cnn(tmp_path / "m.onnx")
    np.save(tmp_path / "bad.npy", rand(2, 3, 16, 15))
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'bad.npy'}", f"--output=probs={tmp_path / 'p.npy'}",
                  f"--output=features={tmp_path / 'f.npy'}", "--quiet", check=False)
    assert proc.returncode == 1
    assert "input 'x': expected shape [2,3,16,16], got [2,3,16,15]" in proc.stderr
    (tmp_path / "junk.npy").write_bytes(b"not numpy at all")
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'junk.npy'}", f"--output=probs={tmp_path / 'p.npy'}",
                  f"--output=features={tmp_path / 'f.npy'}", "--quiet", check=False)
    assert proc.returncode == 1 and "junk.npy: not a usable .npy file" in proc.stderr


def test_reference_engine_and_output_dir(tmp_path):
    """`--engine=reference` (the FP32 reference interpreter) and the runtime agree; --output_dir writes DIR/<i>.npy in
    the model's output order, creating DIR; --optimize is the reference engine's alone."""
    model = residual_cnn(tmp_path / "m.onnx")
    x = rand(2, 3, 16, 16)
    np.save(tmp_path / "x.npy", x)
    expected = expected_outputs(model, x)
    for engine, optimize in [("runtime", None), ("reference", "true"), ("reference", "false")]:
        out = tmp_path / f"{engine}_{optimize}" / "new"  # created by convoy run
        flags = [f"--engine={engine}"] + ([f"--optimize={optimize}"] if optimize else [])
        convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={out}", "--quiet", *flags)
        for i, e in enumerate(expected):
            assert relative_error(np.load(out / f"{i}.npy"), e) <= 1e-4, (engine, optimize, i)
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path}",
                  "--optimize=false", check=False)
    assert proc.returncode == 1 and "--optimize applies to --engine=reference only" in proc.stderr
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'x.npy'}",
                  check=False)
    assert proc.returncode == 1 and f"--output_dir={tmp_path / 'x.npy'}: " in proc.stderr, proc.stderr
    proc = convoy("inspect", f"--model={model}", "--engine=reference", "--optimize=false", check=False)
    assert proc.returncode == 0 and "BatchNorm(" in proc.stdout and "optimizations:" not in proc.stdout


def test_run_repeat_times_the_runs_and_still_writes_outputs(tmp_path):
    """--repeat=N: one warm-up run, N timed ones (median and fastest printed); the outputs are still right."""
    model = residual_cnn(tmp_path / "m.onnx")
    x = rand(2, 3, 16, 16)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    out.mkdir()
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={out}", "--quiet",
                  "--repeat=5")
    m = re.search(r"^timed 5 runs at batch 2: median ([\d.]+) ms, min ([\d.]+) ms$", proc.stdout, flags=re.M)
    assert m and 0 < float(m.group(2)) <= float(m.group(1)), proc.stdout
    for i, e in enumerate(expected_outputs(model, x)):
        assert relative_error(np.load(out / f"{i}.npy"), e) <= 1e-4
    for bad in ["--repeat=0", "--repeat=x"]:
        proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={out}", bad,
                      check=False)
        assert proc.returncode == 1 and "repeat" in proc.stderr, proc.stderr
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={out}",
                  "--engine=reference", "--repeat=2", check=False)
    assert proc.returncode == 1 and "--repeat applies to the runtime engine only" in proc.stderr


def test_inspect_shows_graph_plan_memory_and_step_times(tmp_path):
    model = residual_cnn(tmp_path / "m.onnx")
    out = convoy("inspect", f"--model={model}", "--max_batch_size=4", "--profile_batch=2").stdout
    assert "== optimized graph" in out and "== plan:" in out
    # BN folded and the residual add + relu fused: two conv steps, no BatchNorm or Add step.
    steps = re.findall(r"^  \[\d+\] (\S+) \((\w+)\)", out, flags=re.M)
    assert [op for _, op in steps].count("conv2d") == 2 and "batch_norm" not in [op for _, op in steps], out
    assert "epilogue=bias+residual+relu" in out, out
    for b in range(1, 5):
        assert re.search(rf"^  batch {b}: arena [\d.]+ \w+ \(no reuse: ", out, flags=re.M), out
    times = re.findall(r"^  \[\d+\] .* ([\d.]+)$", out.split("measured step times at batch 2")[1], flags=re.M)
    assert len(times) == len(steps)


def test_inspect_profile_statistic_fastest_run_and_bad_value(tmp_path):
    """--profile_statistic=min prints each step's fastest of the runs; any other value
    than median or min is refused, naming the flag and the value."""
    model = residual_cnn(tmp_path / "m.onnx")
    args = ("inspect", f"--model={model}", "--max_batch_size=2", "--profile_batch=2", "--profile_runs=9")
    fastest = convoy(*args, "--profile_statistic=min").stdout
    assert "measured step times at batch 2 (ms, fastest of 9 runs)" in fastest, fastest
    times = re.findall(r"^  \[\d+\] .* ([\d.]+)$", fastest.split("measured step times")[1], flags=re.M)
    assert times and all(float(t) > 0 for t in times), fastest
    assert "median of 9 runs" in convoy(*args).stdout
    bad = convoy(*args, "--profile_statistic=max", check=False)
    assert bad.returncode != 0 and "--profile_statistic: expected median or min, got 'max'" in bad.stderr, bad.stderr


def tuned_lines(out):
    """The `tune LAYER batch B: ALGORITHM ...` progress lines, and the count of problems the summary says were tuned."""
    lines = re.findall(r"^tune (\S+) batch (\d+): (\S+) (.+)$", out, flags=re.M)
    summary = re.search(r"^tuned (\d+) problems in [\d.]+ s; wrote (\d+) entries to ", out, flags=re.M)
    assert summary, out
    return {(layer, int(b)): (algorithm, how) for layer, b, algorithm, how in lines}, int(summary.group(1))


def test_tune_exports_a_cache_that_later_loads(tmp_path):
    model = residual_cnn(tmp_path / "m.onnx")
    timed = re.compile(r"[\d.e-]+ ms$")
    # NCHW: each conv has several candidates (the own ones and oneDNN's), so each is timed at each batch size.
    out = convoy("tune", f"--model={model}", "--layout=nchw", "--batch_sizes=1,2",
                 f"--cache={tmp_path / 'nchw.cache'}").stdout
    lines, tuned = tuned_lines(out)
    for layer in ("conv1", "conv2"):
        for b in (1, 2):
            algorithm, how = lines[(layer, b)]
            assert algorithm.startswith("cpu.conv2d.") and timed.fullmatch(how), out
    # Every problem the summary counts is one progress line with a time (none of them repeats another's problem).
    assert tuned == sum(1 for _, how in lines.values() if timed.fullmatch(how)), out

    # Blocked (the CPU default where oneDNN's kernels are AVX2, and for grouped convolutions): a blocked convolution has
    # one implementation (oneDNN's), which the line names as the only candidate instead of timing it; the classifier's
    # GEMM still has several and is timed.
    cache = tmp_path / "out.cache"
    out = convoy("tune", f"--model={model}", "--layout=nchw8c", "--batch_sizes=1,2", f"--cache={cache}").stdout
    assert re.search(r": planned \d+ steps for cpu:.*\(fp32, NCHW8c\)", out), out
    lines, tuned = tuned_lines(out)
    for layer in ("conv1", "conv2"):
        for b in (1, 2):
            assert lines[(layer, b)] == ("cpu.conv2d.onednn_nchw8c", "(the only candidate)"), out
    # Pooling has two blocked implementations (oneDNN's and cpu.pool2d.direct), chosen by the heuristic, not timed.
    for layer in ("pool", "global_pool"):
        for b in (1, 2):
            assert lines[(layer, b)] == ("cpu.pool2d.onednn_nchw8c", "(heuristic)"), out
    for b in (1, 2):
        algorithm, how = lines[("gemm", b)]
        assert algorithm.startswith("cpu.gemm.") and timed.fullmatch(how), out
    assert tuned == sum(1 for _, how in lines.values() if timed.fullmatch(how)) == 2, out
    written = re.search(r"wrote (\d+) entries to", out)
    assert cache.stat().st_size > 0
    inspect = convoy("inspect", f"--model={model}", "--layout=nchw8c", f"--cache={cache}")
    assert f"loaded {written.group(1)} algorithm cache entries" in inspect.stderr
    assert "(tuned " in inspect.stdout


def test_run_repository_entry_with_uint8_preprocessing(tmp_path):
    entry = tmp_path / "pre_model"
    (entry / "1").mkdir(parents=True)
    model = residual_cnn(entry / "1" / "model.onnx")
    mean, std = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
    (entry / "config.yaml").write_text(f"""name: pre_model
format: onnx
max_batch_size: 4
inputs:
  - name: x
    datatype: UINT8
    dims: [16, 16, 3]
    layout: NHWC
    preprocessing:
      mean: {mean}
      std: {std}
outputs:
  - name: probs
    datatype: FP32
    dims: [10]
  - name: features
    datatype: FP16
    dims: [8, 8, 8]
""")
    pixels = RNG.integers(0, 256, size=(3, 16, 16, 3), dtype=np.uint8)
    np.save(tmp_path / "pixels.npy", pixels)
    convoy("run", f"--model={entry}", f"--input={tmp_path / 'pixels.npy'}", f"--output=probs={tmp_path / 'p.npy'}",
           f"--output=features={tmp_path / 'f.npy'}", "--quiet")
    normalized = ((pixels / 255.0 - np.array(mean)) / np.array(std)).transpose(0, 3, 1, 2).astype(np.float32)
    probs, features = expected_outputs(model, normalized)
    assert relative_error(np.load(tmp_path / "p.npy"), probs) <= 1e-4
    half = np.load(tmp_path / "f.npy")
    assert half.dtype == np.float16 and relative_error(half, features) <= 1e-3  # one FP16 rounding of the output
