#!/usr/bin/env python3
"""Where a model's time goes in Convoy and in a peer (onnxruntime or OpenVINO), block by block, from each engine's own
per-node profile.

Convoy: `convoy inspect --model=M --threads=T --tune --profile_batch=B --profile_runs=R` (each step's median over R
timed runs, steps run one by one with the device synchronized between them). onnxruntime: the same ONNX file in a
session like bench/onnxruntime_compare.py's (T intra-op threads, sequential, all graph optimizations) with
`SessionOptions.enable_profiling`, R runs after a warm-up, each node's median kernel time.

OpenVINO (`--peer=openvino`): its CPU plugin on the same file at a static batch, configured as
bench/onnxruntime_compare.py's whole-model runs (INFERENCE_NUM_THREADS T, NUM_STREAMS 1, PERFORMANCE_HINT LATENCY, its
default precision: a QDQ file's convolutions run INT8) with PERF_COUNT on; after a warm-up, R runs, each node's
mean `real_time` over them from `get_profiling_info()` (OpenVINO keeps a running mean, see ov_node_times) and its
`exec_type` (the kernel: brgconv_avx512_1x1_I8, jit_avx512_I8, ...). `--statistic=min` takes Convoy's fastest run of
each step and onnxruntime's fastest of each node, and OpenVINO's fastest block of 10 runs. OpenVINO names a node after the first original layer it fused (a convolution keeps its ONNX node name with
"/WithoutBiases" appended, a residual add and the QuantizeLinear nodes fuse into the convolution before them, which
`originalLayersNames` lists; its layout reorders are named after the node they serve). `--nodes` prints a per-node
table matched by those names (Convoy's steps are named after the ONNX node, its quantize / dequantize steps after
the tensor), with each engine's implementation (Convoy's algorithm and the oneDNN implementation its primitive got).

onnxruntime and Convoy keep the ONNX node names (onnxruntime's fused nodes keep their first node's name; its layout reorders
are named after the node they serve), so each node is put in a group by its name: the network block it belongs to
(`--group_regex`, by default torchvision's `/features/features.N/features.N.M` blocks, else the first path component),
and within a block its role: `se` for a squeeze-and-excitation part (global average pool, fc1, fc2, the gate
multiply, Convoy's fused step), `conv` for everything else (convolutions with their fused activations, reorders).
The table prints per group Convoy ms, onnxruntime ms and their ratio, then the totals per role and the engines' own
totals (the sum of node times, which leaves out the engines' per-run overheads).

  .venv/bin/python bench/layer_profile_compare.py --model=/tmp/meas/effb0.onnx --convoy=bazel-bin/server/tools/convoy
  .venv/bin/python bench/layer_profile_compare.py --model=resnet50_qdq.onnx --peer=openvino --batch=8 --nodes \
      --group_regex='/layer\d+/layer\d+\.\d+'
"""
import argparse
import collections
import json
import os
import re
import statistics
import subprocess
import sys
import time

import numpy as np
import onnxruntime as ort

try:
    import openvino as ov
except ImportError:  # --peer=openvino needs it
    ov = None

SE_PATTERN = re.compile(r"(avgpool|/fc1/|/fc2/|/Mul$|/Mul_|squeeze|/se/)", re.IGNORECASE)


def pick(values, statistic):
    """The median of the runs, or the fastest run ("min": on a shared machine, the run no neighbour interrupted)."""
    return min(values) if statistic == "min" else statistics.median(values)


def ort_node_times(model, batch, threads, runs, statistic="median"):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.enable_profiling = True
    opts.profile_file_prefix = "/tmp/ort_layer_profile"
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    inp = sess.get_inputs()[0]
    shape = [batch if not isinstance(d, int) else d for d in inp.shape]
    shape[0] = batch
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    for _ in range(5):
        sess.run(None, {inp.name: x})
    wall = []
    for _ in range(runs):
        start = time.perf_counter()
        sess.run(None, {inp.name: x})
        wall.append((time.perf_counter() - start) * 1e3)
    path = sess.end_profiling()
    with open(path) as f:
        events = json.load(f)
    os.remove(path)
    per_node = collections.defaultdict(list)
    op_of = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        per_node[name].append(e["dur"] / 1e3)
        op_of[name] = e.get("args", {}).get("op_name", "?")
    # The first 5 runs were warm-up: keep each node's last `runs` samples.
    return ({n: pick(v[-runs:], statistic) for n, v in per_node.items()}, op_of, pick(wall, statistic))


def ov_node_name(name):
    """The ONNX node an OpenVINO node is named after: its friendly name less the suffixes its transformations add."""
    return re.sub(r"/(WithoutBiases|DequantizationMultiply).*$", "", name)


def ov_node_times(model, batch, threads, runs, statistic="median", block=10):
    """({node: ms}, {node: exec_type}, wall ms) of OpenVINO's CPU plugin, nodes named by ov_node_name.

    OpenVINO's `real_time` of a node is the running mean, in whole microseconds, of all inferences of the compiled
    model so far (every request shares the counters), not the last run's. The time of runs k1+1..k2 is therefore
    (k2 * mean_k2 - k1 * mean_k1) / (k2 - k1), within (k1 + k2) / (k2 - k1) us of the truth. "median": the mean over
    the `runs` timed runs after the warm-up; "min": the fastest block of `block` consecutive runs' mean (on a shared
    machine, the block no neighbour interrupted)."""
    if ov is None:
        sys.exit("--peer=openvino needs the openvino package")
    core = ov.Core()
    net = core.read_model(model)
    shape = [d.get_length() if d.is_static else batch for d in net.inputs[0].get_partial_shape()]
    shape[0] = batch
    net.reshape(shape)
    compiled = core.compile_model(net, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                               "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": True})
    request = compiled.create_infer_request()
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)

    def running_means():  # {node: mean us so far}, {node: exec_type}
        means, kinds, seen = {}, {}, collections.Counter()
        for p in request.get_profiling_info():
            if p.status != ov.ProfilingInfo.Status.EXECUTED:
                continue
            name = ov_node_name(p.node_name)
            seen[name] += 1
            if seen[name] > 1:  # two nodes with one name (a reorder and its node): keep both apart
                name = f"{name}#{seen[name]}"
            means[name] = p.real_time.total_seconds() * 1e6
            kinds[name] = f"{p.node_type} {p.exec_type}"
        return means, kinds

    warmup = 5
    for _ in range(warmup):
        request.infer({0: x})
    done, (start_means, exec_type) = warmup, running_means()
    block = max(1, min(block, runs)) if statistic == "min" else runs
    per_node, wall = collections.defaultdict(list), []
    while done < warmup + runs:
        count = min(block, warmup + runs - done)
        start = time.perf_counter()
        for _ in range(count):
            request.infer({0: x})
        wall.append((time.perf_counter() - start) * 1e3 / count)
        end_means, _ = running_means()
        for name, mean in end_means.items():
            total = (done + count) * mean - done * start_means.get(name, 0.0)
            per_node[name].append(total / count / 1e3)
        done, start_means = done + count, end_means
    return ({n: min(v) for n, v in per_node.items()}, exec_type, min(wall))


def convoy_step_times(convoy, model, batch, threads, runs, layout, extra):
    cmd = [convoy, "inspect", f"--model={model}", f"--threads={threads}", "--tune", f"--profile_batch={batch}",
           f"--profile_runs={runs}"] + ([f"--layout={layout}"] if layout else []) + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    steps, ops, in_table = {}, {}, False
    impl, current = {}, None
    for line in out.split("== measured step times")[0].splitlines():  # the plan listing: each step's implementation
        m = re.match(r"\s+\[\d+\] (\S+) \(\w+\):", line)
        if m:
            current = m.group(1)
        elif current and line.strip().startswith("algorithm "):
            impl[current] = line.strip().split()[1].rstrip(",")
        elif current and line.strip().startswith("launch oneDNN "):
            impl[current] += " [" + line.strip()[len("launch oneDNN "):] + "]"
    for line in out.splitlines():
        if line.startswith("== measured step times"):
            in_table = True
            continue
        m = re.match(r"\s+\[\d+\]\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9.]+)$", line)
        if in_table and m:
            steps[m.group(1)] = float(m.group(4))
            ops[m.group(1)] = impl.get(m.group(1), f"{m.group(2)} {m.group(3)}")
    if not steps:
        sys.exit("no step times in convoy inspect's output:\n" + out[-2000:])
    return steps, ops


def group_of(name, regex):
    m = re.search(regex, name)
    if m:
        block = m.group(0)
    else:
        parts = [p for p in name.split("/") if p]
        block = "/" + parts[0] if parts else name
    return block, "se" if SE_PATTERN.search(name) else "conv"


def print_nodes(convoy, convoy_ops, peer, peer_ops, peer_name):
    """Node by node in Convoy's step order, matched by name; the peer's unmatched nodes after."""
    print(f"\n{'node':<56} {'convoy ms':>9} {peer_name + ' ms':>9} {'ratio':>6}  convoy implementation | {peer_name}")
    for name, ms in convoy.items():
        other = peer.get(name)
        ratio = f"{ms / other:6.2f}" if other else "      "
        other_ms = f"{other:9.4f}" if other is not None else " " * 9
        print(f"{name[-56:]:<56} {ms:9.4f} {other_ms} {ratio}  {convoy_ops.get(name, '')} | {peer_ops.get(name, '')}")
    for name, ms in peer.items():
        if name not in convoy:
            print(f"{name[-56:]:<56} {'':>9} {ms:9.4f} {'':>6}  | {peer_ops.get(name, '')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy")
    ap.add_argument("--peer", default="onnxruntime", choices=["onnxruntime", "openvino"])
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--layout", default="", help="Convoy's --layout (default: its CPU default)")
    ap.add_argument("--convoy_args", default="", help="extra arguments for convoy inspect, space separated")
    ap.add_argument("--group_regex", default=r"/features/features\.\d+/features\.\d+\.\d+")
    ap.add_argument("--nodes", action="store_true", help="also print the node-by-node table with implementations")
    ap.add_argument("--statistic", choices=["median", "min"], default="median",
                    help="each step's / node's median over the runs, or its fastest run (a shared machine)")
    args = ap.parse_args()

    peer_name = "ort" if args.peer == "onnxruntime" else "ov"
    print(f"load average {os.getloadavg()[0]:.2f}; onnxruntime {ort.__version__}; "
          f"openvino {ov.__version__ if ov is not None else '(not installed)'}; peer {args.peer}; batch {args.batch}; "
          f"threads {args.threads}; runs {args.runs}; statistic {args.statistic}")
    convoy, convoy_ops = convoy_step_times(args.convoy, args.model, args.batch, args.threads, args.runs, args.layout,
                                           args.convoy_args.split() + [f"--max_batch_size={max(args.batch, 1)}",
                                                                       f"--profile_statistic={args.statistic}"])
    times = ort_node_times if args.peer == "onnxruntime" else ov_node_times
    peer, peer_ops, peer_wall = times(args.model, args.batch, args.threads, args.runs, args.statistic)
    print(f"load average {os.getloadavg()[0]:.2f}")
    if args.nodes:
        print_nodes(convoy, convoy_ops, peer, peer_ops, peer_name)
    groups = collections.OrderedDict()
    for engine, engine_times in (("convoy", convoy), ("peer", peer)):
        for name, ms in engine_times.items():
            key = group_of(name, args.group_regex)
            groups.setdefault(key, {"convoy": 0.0, "peer": 0.0, "convoy_n": 0, "peer_n": 0})
            groups[key][engine] += ms
            groups[key][engine + "_n"] += 1
    print(f"\n{'group':<44} {'role':<5} {'convoy ms':>10} {'steps':>5} {peer_name + ' ms':>9} {'nodes':>5} {'ratio':>6}")
    roles = collections.defaultdict(lambda: [0.0, 0.0, 0, 0])
    for (block, role), g in sorted(groups.items(), key=lambda kv: kv[0]):
        ratio = g["convoy"] / g["peer"] if g["peer"] > 0 else float("inf")
        print(f"{block:<44} {role:<5} {g['convoy']:10.4f} {g['convoy_n']:5d} {g['peer']:9.4f} {g['peer_n']:5d} "
              f"{ratio:6.2f}")
        r = roles[role]
        r[0] += g["convoy"]
        r[1] += g["peer"]
        r[2] += g["convoy_n"]
        r[3] += g["peer_n"]
    print()
    for role, (c, o, cn, on) in sorted(roles.items()):
        print(f"all {role:<5} convoy {c:.3f} ms in {cn} steps, {args.peer} {o:.3f} ms in {on} nodes, ratio {c / o:.2f}")
    print(f"sum of step times: convoy {sum(convoy.values()):.3f} ms ({len(convoy)} steps), {args.peer} "
          f"{sum(peer.values()):.3f} ms ({len(peer)} nodes); {args.peer}'s {args.statistic} wall time per run "
          f"{peer_wall:.3f} ms (profiling on)")
    ops = collections.Counter(peer_ops.values())
    print(f"{args.peer} node kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))


if __name__ == "__main__":
    main()
