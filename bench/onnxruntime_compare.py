#!/usr/bin/env python3
"""Convoy's CPU conv kernels against onnxruntime on the conv layers of ResNet-50 and MobileNetV2.

For every layer listed by `kernels_benchmark --list` (shape, stride, groups, use count) and each batch size, this
script builds a one-node ONNX model (Conv with bias, then Relu / Clip(0, 6) / nothing, which onnxruntime fuses like
Convoy's epilogue), times it in onnxruntime on the CPU with the same thread count as Convoy (intra_op_num_threads=2,
sequential execution, all graph optimizations), and times Convoy's tuned choice on the same layer through
`conv_layer_bench`. It then exports torchvision's ResNet-50 and MobileNetV2 to ONNX with Debian's python3 (torch
1.13 / torchvision 0.14, random weights) and times the same ONNX files end to end in onnxruntime and in Convoy
(`convoy tune` for the batch sizes, then `convoy run --cache --threads=2 --repeat=N`, which prints the median of N
timed runs after a warm-up run). The whole-model measurement is repeated --model_rounds times, alternating the two
engines, and the median of the per-round medians is reported (the machine is shared). The model rows also compare
the sum of Convoy's per-layer conv times (each layer times its use count) with onnxruntime's per-layer sum.

Run from the repository root with the project's virtualenv:
  bazel build //kernels/benchmarks:kernels_benchmark //kernels/benchmarks:conv_layer_bench //server/tools:convoy
  .venv/bin/python bench/onnxruntime_compare.py --bin_dir=bazel-bin/kernels/benchmarks [--batches=1,8] \
      [--convoy=bazel-bin/server/tools/convoy]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

THREADS = 2


def list_layers(bin_dir):
    out = subprocess.run([os.path.join(bin_dir, "kernels_benchmark"), "--list"], check=True, capture_output=True,
                         text=True).stdout
    layers = []
    for line in out.split():
        f = line.split(":")
        layers.append(dict(spec=line, model=f[0], name=f[1], h=int(f[2]), w=int(f[3]), c=int(f[4]), k=int(f[5]),
                           r=int(f[6]), s=int(f[7]), stride=int(f[8]), pad=int(f[9]), groups=int(f[10]),
                           count=int(f[11]), linear=f[12] == "1"))
    return layers


def conv_layer_model(layer, batch):
    """A Conv (+bias) followed by the layer's activation, as an ONNX model with random weights."""
    rng = np.random.default_rng(0)
    c, k, g = layer["c"], layer["k"], layer["groups"]
    weight = rng.uniform(-1, 1, (k, c // g, layer["r"], layer["s"])).astype(np.float32)
    bias = rng.uniform(-1, 1, (k,)).astype(np.float32)
    p, st = layer["pad"], layer["stride"]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["conv"], kernel_shape=[layer["r"], layer["s"]],
                              strides=[st, st], pads=[p, p, p, p], group=g)]
    inits = [numpy_helper.from_array(weight, "w"), numpy_helper.from_array(bias, "b")]
    if layer["linear"]:
        nodes[0].output[0] = "y"
    elif layer["model"] == "mobilenetv2":
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(helper.make_node("Clip", ["conv", "lo", "hi"], ["y"]))
    else:
        nodes.append(helper.make_node("Relu", ["conv"], ["y"]))
    graph = helper.make_graph(
        nodes, "layer", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, c, layer["h"], layer["w"]])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def ort_session(model_bytes):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = THREADS
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])


def time_ort(model_bytes, input_shape, reps):
    sess = ort_session(model_bytes)
    name = sess.get_inputs()[0].name
    x = np.random.default_rng(1).uniform(-1, 1, input_shape).astype(np.float32)
    for _ in range(3):
        sess.run(None, {name: x})
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def time_convoy(bin_dir, layers, batch, reps):
    cmd = [os.path.join(bin_dir, "conv_layer_bench"), f"--batch={batch}", f"--reps={reps}"]
    cmd += [f"--layer={l['spec']}" for l in layers]
    env = dict(os.environ, CONVOY_CPU_THREADS=str(THREADS))
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    result = {}
    for line in out.splitlines():
        if not line.startswith("CONVOY_LAYER "):
            continue
        fields = line.split()
        kv = dict(f.split("=", 1) for f in fields[2:])
        result[fields[1]] = (kv["algorithm"], float(kv["ms"]))
    return result


EXPORT_SCRIPT = r"""
import sys, torch, torchvision
name, path = sys.argv[1], sys.argv[2]
model = {"resnet50": torchvision.models.resnet50, "mobilenetv2": torchvision.models.mobilenet_v2}[name]()
model.eval()
torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, opset_version=13, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
"""


def export_whole_model(name, directory):
    path = os.path.join(directory, f"{name}.onnx")
    subprocess.run(["/usr/bin/python3", "-c", EXPORT_SCRIPT, name, path], check=True, capture_output=True)
    return path


def time_convoy_model(convoy, model_path, cache, batch, reps, directory):
    """Median ms of `reps` runs of the whole model at `batch` through `convoy run` (after one warm-up run)."""
    x_path = os.path.join(directory, f"x{batch}.npy")
    if not os.path.exists(x_path):
        np.save(x_path, np.random.default_rng(1).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32))
    out_dir = os.path.join(directory, "out")
    os.makedirs(out_dir, exist_ok=True)
    out = subprocess.run([convoy, "run", f"--model={model_path}", f"--input={x_path}", f"--output_dir={out_dir}",
                          f"--threads={THREADS}", f"--cache={cache}", f"--max_batch_size={batch}", "--quiet",
                          f"--repeat={reps}"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("timed "):
            return float(line.split("median ")[1].split(" ms")[0])
    raise RuntimeError(f"no timing line in convoy run output:\n{out}")


def whole_models(args, models, batches):
    """{(model, batch): (convoy ms or None, onnxruntime ms)}, medians over args.model_rounds alternating rounds."""
    reps = max(5, args.reps // 2)
    convoy = args.convoy if os.access(args.convoy, os.X_OK) else None
    if convoy is None:
        print(f"(no convoy CLI at {args.convoy}: whole-model rows for onnxruntime only)")
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            path = export_whole_model(model, tmp)
            with open(path, "rb") as f:
                data = f.read()
            cache = os.path.join(tmp, f"{model}.cache")
            if convoy is not None:
                subprocess.run([convoy, "tune", f"--model={path}", f"--batch_sizes={','.join(map(str, batches))}",
                                f"--cache={cache}", f"--threads={THREADS}", f"--max_batch_size={max(batches)}",
                                "--quiet"], check=True, capture_output=True)
            for batch in batches:
                convoy_ms, ort_ms = [], []
                for _ in range(args.model_rounds):
                    if convoy is not None:
                        convoy_ms.append(time_convoy_model(convoy, path, cache, batch, reps, tmp))
                    ort_ms.append(time_ort(data, [batch, 3, 224, 224], reps))
                result[(model, batch)] = (statistics.median(convoy_ms) if convoy_ms else None,
                                          statistics.median(ort_ms))
                print(f"whole {model} batch {batch}: convoy {convoy_ms} ort {[round(t, 2) for t in ort_ms]}")
                sys.stdout.flush()
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin_dir", default="bazel-bin/kernels/benchmarks")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--models", default="resnet50,mobilenetv2")
    parser.add_argument("--skip_whole_models", action="store_true")
    parser.add_argument("--skip_layers", action="store_true", help="whole models only")
    parser.add_argument("--convoy", default="bazel-bin/server/tools/convoy", help="the convoy CLI")
    parser.add_argument("--model_rounds", type=int, default=3)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    models = args.models.split(",")
    layers = [] if args.skip_layers else [l for l in list_layers(args.bin_dir) if l["model"] in models]
    print(f"onnxruntime {ort.__version__}, {THREADS} threads each, FP32 NCHW, times are medians in ms")
    print(f"{'layer':34} {'batch':>5} {'convoy ms':>10} {'ort ms':>10} {'ratio':>6}  convoy algorithm")
    sums = {}
    for batch in batches if layers else []:
        convoy = time_convoy(args.bin_dir, layers, batch, args.reps)
        for layer in layers:
            key = f"{layer['model']}:{layer['name']}"
            shape = [batch, layer["c"], layer["h"], layer["w"]]
            ort_ms = time_ort(conv_layer_model(layer, batch).SerializeToString(), shape, args.reps)
            algorithm, convoy_ms = convoy[key]
            print(f"{key:34} {batch:5d} {convoy_ms:10.3f} {ort_ms:10.3f} {convoy_ms / ort_ms:6.2f}  {algorithm}")
            s = sums.setdefault((layer["model"], batch), [0.0, 0.0])
            s[0] += layer["count"] * convoy_ms
            s[1] += layer["count"] * ort_ms
        sys.stdout.flush()
    whole = {} if args.skip_whole_models else whole_models(args, models, batches)
    print()
    print(f"{'model':12} {'batch':>5} {'convoy conv sum':>16} {'ort conv sum':>13} {'ratio':>6} "
          f"{'convoy whole':>13} {'ort whole':>10} {'ratio':>6}")
    dash = "-"
    for key in sorted(set(sums) | set(whole)):
        model, batch = key
        convoy_sum, ort_sum = sums.get(key, (None, None))
        convoy_whole, ort_whole = whole.get(key, (None, None))
        sum_text = (f"{convoy_sum:16.2f} {ort_sum:13.2f} {convoy_sum / ort_sum:6.2f}" if convoy_sum is not None
                    else f"{dash:>16} {dash:>13} {dash:>6}")
        if ort_whole is None:
            whole_text = f"{dash:>13} {dash:>10} {dash:>6}"
        elif convoy_whole is None:
            whole_text = f"{dash:>13} {ort_whole:10.2f} {dash:>6}"
        else:
            whole_text = f"{convoy_whole:13.2f} {ort_whole:10.2f} {convoy_whole / ort_whole:6.2f}"
        print(f"{model:12} {batch:5d} {sum_text} {whole_text}")


if __name__ == "__main__":
    main()
