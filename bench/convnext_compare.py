#!/usr/bin/env python3
"""ConvNeXt-Tiny (torchvision, random weights, 224x224) on Convoy's CPU backend against onnxruntime, side by side in
one run: each round times every engine once (alternating, seconds apart), and the median of the rounds is printed
with the CPU's name and the 1-minute load average (the machine may be shared).

--model=linear_gelu times one layer instead: ConvNeXt-Tiny's first Linear layer of stage 1 as torch.onnx writes it
(MatMul of [N,56,56,96] by [96,384], the bias Add, GELU's Erf form), the layer the GEMM epilogue fusion rewrites.

Give several Convoy binaries with --convoy=LABEL=PATH to compare builds in the same run (e.g. one built without
the GEMM epilogue fusion that folds each Linear layer's bias and GELU into its GEMM, to measure that fusion).

Each binary first tunes its algorithm cache for the batch sizes (`convoy tune`), then is timed with `convoy run
--cache --threads=2 --repeat=N` (the median of N runs after a warm-up run); onnxruntime with 2 intra-op threads, all
graph optimizations.

Run from the repository root with the project's virtualenv (the export uses Debian's python3 with torch):
  bazel build //server/tools:convoy
  .venv/bin/python bench/convnext_compare.py --convoy=convoy=bazel-bin/server/tools/convoy [--batches=1,8]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import helper, numpy_helper

import onnxruntime_compare as compare

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def time_convoy(convoy, model, cache, batch, reps, directory, shape):
    """onnxruntime_compare.time_convoy_model with this model's input shape."""
    x_path = os.path.join(directory, f"x{batch}.npy")
    np.save(x_path, np.random.default_rng(1).uniform(-1, 1, (batch, *shape)).astype(np.float32))
    os.makedirs(os.path.join(directory, "out"), exist_ok=True)
    out = subprocess.run([convoy, "run", f"--model={model}", f"--input={x_path}", f"--output_dir={directory}/out",
                          f"--threads={compare.THREADS}", f"--cache={cache}", f"--max_batch_size={batch}", "--quiet",
                          f"--repeat={reps}"], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        if line.startswith("timed "):
            return float(line.split("median ")[1].split(" ms")[0])
    raise RuntimeError(f"no timing line in convoy run output:\n{out}")


def write_linear_gelu(path):
    """MatMul [N,56,56,96] x [96,384] + bias, then 0.5 * x * (1 + erf(x / sqrt 2)), random weights; input `images`."""
    rng = np.random.default_rng(0)
    scalar = lambda name, v: numpy_helper.from_array(np.array(v, np.float32), name)
    inits = [numpy_helper.from_array(rng.uniform(-0.1, 0.1, (96, 384)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.uniform(-0.1, 0.1, 384).astype(np.float32), "b"),
             scalar("sqrt2", 2 ** 0.5), scalar("one", 1.0), scalar("half", 0.5)]
    nodes = [helper.make_node("MatMul", ["images", "w"], ["mm"]), helper.make_node("Add", ["b", "mm"], ["fc"]),
             helper.make_node("Div", ["fc", "sqrt2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["g"]), helper.make_node("Mul", ["fc", "g"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    graph = helper.make_graph(nodes, "linear_gelu",
                              [helper.make_tensor_value_info("images", onnx.TensorProto.FLOAT, ["N", 56, 56, 96])],
                              [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--convoy", action="append", required=True, help="LABEL=PATH of a convoy binary")
    parser.add_argument("--model", choices=["convnext_tiny", "linear_gelu"], default="convnext_tiny")
    parser.add_argument("--batches", default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    binaries = [spec.split("=", 1) for spec in args.convoy]
    with tempfile.TemporaryDirectory() as tmp:
        model = os.path.join(tmp, f"{args.model}.onnx")
        if args.model == "linear_gelu":
            write_linear_gelu(model)
            shape = (56, 56, 96)
        else:
            subprocess.run(["/usr/bin/python3", os.path.join(REPO_ROOT, "tools/models/export_torchvision_convnext.py"),
                            "--out", tmp, "--size", "224"], check=True, capture_output=True)
            shape = (3, 224, 224)
        with open(model, "rb") as f:
            session = compare.ort_session(f.read())
        print(f"CPU: {compare.cpu_model()}; {compare.THREADS} threads; onnxruntime {compare.ort.__version__}")
        batches = [int(b) for b in args.batches.split(",")]
        for label, path in binaries:  # each binary tunes its own algorithm cache first, as a deployment would
            subprocess.run([path, "tune", f"--model={model}", f"--batch_sizes={args.batches}",
                            f"--cache={os.path.join(tmp, label + '.cache')}", f"--threads={compare.THREADS}",
                            f"--max_batch_size={max(batches)}", "--quiet"], check=True, capture_output=True)
        for batch in batches:
            times = {label: [] for label, _ in binaries}
            times["onnxruntime"] = []
            loads = []
            for _ in range(args.rounds):
                for label, path in binaries:
                    cache = os.path.join(tmp, f"{label}.cache")
                    times[label].append(time_convoy(path, model, cache, batch, args.reps, tmp, shape))
                times["onnxruntime"].append(compare.time_ort_session(session, (batch, *shape), args.reps))
                loads.append(compare.load_average())
            ort_ms = statistics.median(times["onnxruntime"])
            print(f"{args.model} batch {batch} (load average {min(loads):.1f}-{max(loads):.1f}):")
            for label, series in times.items():
                ms = statistics.median(series)
                print(f"  {label:>24}: {ms:9.2f} ms  ({ms / ort_ms:.2f}x onnxruntime)")


if __name__ == "__main__":
    sys.exit(main())
