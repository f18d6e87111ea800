#!/usr/bin/env python3
"""EfficientNet-B0's 16 squeeze-and-excitation branches alone, in Convoy fused, Convoy node by node, and onnxruntime.

Builds one ONNX model (opset 13, random weights) holding the 16 branches of torchvision's EfficientNet-B0 at 224x224
side by side, each with its own input x_i [N, C, H, H] and output y_i:
    GlobalAveragePool -> Conv 1x1 C->S (bias) -> x * Sigmoid(x) -> Conv 1x1 S->C (bias) -> Sigmoid -> Mul(x_i, gate)
(the SiLU written as torch exports it). Each round times, one after the other, Convoy's plan in its CPU default layout
(NHWC on AVX-512 CPUs) with `--fuse_squeeze_excitation=true` (one step per branch) and `=false` (the pool, both
convolutions and the multiply as steps), through `convoy inspect --profile_batch=1 --profile_runs=R` (each step's
median over R runs): the sum of every step but the layout conversions this stand-alone model needs at its 16 inputs
and outputs (inside EfficientNet the branch reads and writes NHWC tensors and has none); and an onnxruntime session
(same threads, sequential, all graph optimizations, R runs after 3 warm-up runs, wall time per run: in NCHW it needs
no conversions).
The first round also checks Convoy's fused outputs against onnxruntime's (within 1e-4). Prints every round with the
load average, then the median over rounds of each engine's per-round figure.

  .venv/bin/python bench/squeeze_excitation_compare.py --convoy=bazel-bin/server/tools/convoy --rounds=5 --reps=50
"""
import argparse
import os
import re
import statistics
import subprocess
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# (channels, spatial size, squeeze channels) of EfficientNet-B0's SE branches at 224x224, in network order.
BRANCHES = [(32, 112, 8), (96, 56, 4), (144, 56, 6), (144, 28, 6), (240, 28, 10), (240, 14, 10), (480, 14, 20),
            (480, 14, 20), (480, 14, 20), (672, 14, 28), (672, 14, 28), (672, 7, 28), (1152, 7, 48), (1152, 7, 48),
            (1152, 7, 48), (1152, 7, 48)]


def build_model(batch):
    rng = np.random.default_rng(0)
    nodes, inits, inputs, outputs = [], [], [], []
    for i, (c, hw, s) in enumerate(BRANCHES):
        p = f"b{i}_"
        inputs.append(helper.make_tensor_value_info(f"x{i}", TensorProto.FLOAT, [batch, c, hw, hw]))
        outputs.append(helper.make_tensor_value_info(f"y{i}", TensorProto.FLOAT, None))
        for name, shape, scale in ((p + "w1", [s, c, 1, 1], c ** -0.5), (p + "b1", [s], 0.1),
                                   (p + "w2", [c, s, 1, 1], s ** -0.5), (p + "b2", [c], 0.1)):
            inits.append(numpy_helper.from_array(rng.uniform(-scale, scale, shape).astype(np.float32), name))
        nodes += [
            helper.make_node("GlobalAveragePool", [f"x{i}"], [p + "m"], name=p + "avgpool"),
            helper.make_node("Conv", [p + "m", p + "w1", p + "b1"], [p + "r"], name=p + "fc1"),
            helper.make_node("Sigmoid", [p + "r"], [p + "rs"], name=p + "silu_sigmoid"),
            helper.make_node("Mul", [p + "r", p + "rs"], [p + "h"], name=p + "silu_mul"),
            helper.make_node("Conv", [p + "h", p + "w2", p + "b2"], [p + "e"], name=p + "fc2"),
            helper.make_node("Sigmoid", [p + "e"], [p + "g"], name=p + "gate"),
            helper.make_node("Mul", [f"x{i}", p + "g"], [f"y{i}"], name=p + "Mul"),
        ]
    graph = helper.make_graph(nodes, "efficientnet_b0_se", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def run_convoy(convoy, model_path, input_args, out_dir, threads, fuse):
    subprocess.run([convoy, "run", f"--model={model_path}", *input_args, f"--output_dir={out_dir}",
                    f"--threads={threads}", f"--fuse_squeeze_excitation={fuse}", "--quiet"], check=True,
                   capture_output=True, text=True)


def time_convoy_steps(convoy, model_path, threads, reps, fuse):
    """The sum of the per-step medians of every step but the conversions at the model's edges."""
    out = subprocess.run([convoy, "inspect", f"--model={model_path}", f"--threads={threads}", "--profile_batch=1",
                          f"--profile_runs={reps}", f"--fuse_squeeze_excitation={fuse}"], check=True,
                         capture_output=True, text=True).stdout
    table = out[out.index("== measured step times"):]
    steps = re.findall(r"\n\s+\[\d+\]\s+\S+\s+(\S+)\s+\S+\s+([0-9.]+)", table)
    if not steps:
        raise SystemExit("no step times in convoy inspect's output:\n" + out[-2000:])
    return sum(float(ms) for op, ms in steps if op != "convert"), sum(op != "convert" for op, _ in steps)


def time_ort(model_bytes, feeds, threads, reps, statistic):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model_bytes, opts, providers=["CPUExecutionProvider"])
    for _ in range(3):
        sess.run(None, feeds)
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - start) * 1e3)
    return min(times) if statistic == "min" else statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--statistic", choices=["median", "min"], default="median", help="onnxruntime's, of its runs")
    args = ap.parse_args()

    model = build_model(args.batch)
    rng = np.random.default_rng(1)
    feeds = {f"x{i}": rng.uniform(-1, 1, (args.batch, c, hw, hw)).astype(np.float32)
             for i, (c, hw, _) in enumerate(BRANCHES)}
    results = {"convoy_fused": [], "convoy_nodes": [], "onnxruntime": []}
    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "se.onnx")
        onnx.save(model, model_path)
        input_args = []
        for name, value in feeds.items():
            np.save(os.path.join(tmp, name + ".npy"), value)
            input_args.append(f"--input={name}={os.path.join(tmp, name + '.npy')}")
        out_dir = os.path.join(tmp, "out")
        os.makedirs(out_dir)
        print(f"onnxruntime {ort.__version__}; batch {args.batch}, {args.threads} threads, {args.reps} runs per "
              f"engine and round, statistic {args.statistic}")
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            fused, fused_steps = time_convoy_steps(args.convoy, model_path, args.threads, args.reps, "true")
            nodes, nodes_steps = time_convoy_steps(args.convoy, model_path, args.threads, args.reps, "false")
            peer = time_ort(model.SerializeToString(), feeds, args.threads, args.reps, args.statistic)
            for key, value in (("convoy_fused", fused), ("convoy_nodes", nodes), ("onnxruntime", peer)):
                results[key].append(value)
            if r == 0:
                # Convoy's fused plan's outputs against onnxruntime's, once.
                run_convoy(args.convoy, model_path, input_args, out_dir, args.threads, "true")
                expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(
                    None, feeds)
                worst = max(float(np.max(np.abs(np.load(os.path.join(out_dir, f"{i}.npy")) - e)))
                            for i, e in enumerate(expected))
                print(f"convoy fused vs onnxruntime: largest difference {worst:.2e} over the 16 outputs")
                if worst > 1e-4:
                    raise SystemExit("convoy's fused outputs differ from onnxruntime's by more than 1e-4")
            print(f"round {r} load {load:.2f}: convoy fused {fused:.4f} ms ({fused_steps} steps), convoy node by "
                  f"node {nodes:.4f} ms ({nodes_steps} steps), onnxruntime {peer:.4f} ms")
    med = {k: statistics.median(v) for k, v in results.items()}
    print(f"\n16 SE branches, batch {args.batch}, median over {args.rounds} rounds: convoy fused "
          f"{med['convoy_fused']:.4f} ms, node by node {med['convoy_nodes']:.4f} ms, onnxruntime "
          f"{med['onnxruntime']:.4f} ms; fused / node by node {med['convoy_fused'] / med['convoy_nodes']:.2f}, "
          f"fused / onnxruntime {med['convoy_fused'] / med['onnxruntime']:.2f}, node by node / onnxruntime "
          f"{med['convoy_nodes'] / med['onnxruntime']:.2f}")


if __name__ == "__main__":
    main()
