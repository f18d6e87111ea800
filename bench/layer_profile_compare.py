#!/usr/bin/env python3
"""Where a model's time goes in Convoy and in onnxruntime, block by block, from each engine's own per-node profile.

Convoy: `convoy inspect --model=M --threads=T --tune --profile_batch=B --profile_runs=R` (each step's median over R
timed runs, steps run one by one with the device synchronized between them). onnxruntime: the same ONNX file in a
session like bench/onnxruntime_compare.py's (T intra-op threads, sequential, all graph optimizations) with
`SessionOptions.enable_profiling`, R runs after a warm-up, each node's median kernel time.

Both engines keep the ONNX node names (onnxruntime's fused nodes keep their first node's name; its layout reorders
are named after the node they serve), so each node is put in a group by its name: the network block it belongs to
(`--group_regex`, by default torchvision's `/features/features.N/features.N.M` blocks, else the first path component),
and within a block its role: `se` for a squeeze-and-excitation part (global average pool, fc1, fc2, the gate
multiply, Convoy's fused step), `conv` for everything else (convolutions with their fused activations, reorders).
The table prints per group Convoy ms, onnxruntime ms and their ratio, then the totals per role and the engines' own
totals (the sum of node times, which leaves out the engines' per-run overheads).

`--baseline_convoy=PATH` profiles a second Convoy binary (e.g. main's build) in the same run, as a column of its own;
`--rounds=N` repeats the engines' profiles N times one after the other (baseline, Convoy, onnxruntime; the load
average printed per round) and keeps each node's median (`--statistic=min`: fastest) over the rounds, so a busy
machine slows every engine alike;
`--openvino` adds OpenVINO f32's own per-node profile (`PERF_COUNT`, `get_profiling_info()`; its fused nodes keep
one of their ONNX names, as onnxruntime's do); `--per_node` adds a table with one row per node: each engine's time and what it ran there (Convoy's op and
algorithm, with the oneDNN implementation; onnxruntime's node kind).

  .venv/bin/python bench/layer_profile_compare.py --model=/tmp/meas/effb0.onnx --convoy=bazel-bin/server/tools/convoy
  .venv/bin/python bench/layer_profile_compare.py --model=resnet18.onnx --group_regex='/layer\d/layer\d\.\d+' \
      --baseline_convoy=/path/to/main/convoy --rounds=3 --per_node
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

SE_PATTERN = re.compile(r"(avgpool|/fc1/|/fc2/|/Mul$|/Mul_|squeeze|/se/)", re.IGNORECASE)


def ort_node_times(model, batch, threads, runs):
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
    return ({n: statistics.median(v[-runs:]) for n, v in per_node.items()}, op_of, statistics.median(wall))


def openvino_node_times(model, batch, threads, runs):
    """OpenVINO's CPU plugin (FP32: INFERENCE_PRECISION_HINT=f32, its default is BF16 on AVX512-BF16 CPUs; `threads`
    inference threads, one stream, the latency hint) with `enable_profiling`: per node its median real time over
    `runs` runs after a warm-up, and the kernel it ran (exec_type, e.g. "brgconv_avx512_f32"). Nodes OpenVINO fused
    away or did not run report status NOT_RUN and are left out."""
    import openvino as ov
    core = ov.Core()
    net = core.read_model(model)
    shape = [batch] + [d.get_length() for d in list(net.inputs[0].get_partial_shape())[1:]]
    net.reshape(shape)
    compiled = core.compile_model(net, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                               "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32",
                                               "PERF_COUNT": True})
    request = compiled.create_infer_request()
    x = np.random.default_rng(1).uniform(-1, 1, shape).astype(np.float32)
    for _ in range(5):
        request.infer({0: x})
    per_node = collections.defaultdict(list)
    kind = {}
    for _ in range(runs):
        request.infer({0: x})
        for info in request.get_profiling_info():
            if str(info.status).endswith("NOT_RUN"):
                continue
            # A convolution whose bias OpenVINO folded in is named "<ONNX node>/WithoutBiases".
            name = info.node_name.removesuffix("/WithoutBiases")
            per_node[name].append(info.real_time.total_seconds() * 1e3)
            kind[name] = f"{info.node_type} {info.exec_type}"
    return {n: statistics.median(v) for n, v in per_node.items()}, kind


def convoy_step_times(convoy, model, batch, threads, runs, layout, extra):
    cmd = [convoy, "inspect", f"--model={model}", f"--threads={threads}", "--tune", f"--profile_batch={batch}",
           f"--profile_runs={runs}"] + ([f"--layout={layout}"] if layout else []) + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    steps, ops, in_table = {}, {}, False
    for line in out.splitlines():
        if line.startswith("== measured step times"):
            in_table = True
            continue
        m = re.match(r"\s+\[\d+\]\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9.]+)$", line)
        if in_table and m:
            steps[m.group(1)] = float(m.group(4))
            ops[m.group(1)] = f"{m.group(2)} {m.group(3)}"
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


def over_rounds(rounds, statistic):
    """{node: median (or min) over the rounds} of a list of {node: ms} (a node missing from a round is left out
    there)."""
    names = []
    for r in rounds:
        names += [n for n in r if n not in names]
    reduce = min if statistic == "min" else statistics.median
    return {n: reduce([r[n] for r in rounds if n in r]) for n in names}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy")
    ap.add_argument("--baseline_convoy", default="", help="a second Convoy binary profiled in the same run")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1, help="profiles per engine, alternating; per node the median")
    ap.add_argument("--statistic", choices=["median", "min"], default="median",
                    help="per node over the rounds; min where other load slows some rounds")
    ap.add_argument("--openvino", action="store_true", help="also OpenVINO f32's own per-node profile")
    ap.add_argument("--per_node", action="store_true", help="also one row per node with what each engine ran")
    ap.add_argument("--layout", default="", help="Convoy's --layout (default: its CPU default)")
    ap.add_argument("--convoy_args", default="", help="extra arguments for convoy inspect, space separated")
    ap.add_argument("--group_regex", default=r"/features/features\.\d+/features\.\d+\.\d+")
    args = ap.parse_args()

    print(f"load average {os.getloadavg()[0]:.2f}; onnxruntime {ort.__version__}")
    binaries = [("base", args.baseline_convoy)] if args.baseline_convoy else []
    binaries.append(("convoy", args.convoy))
    rounds = collections.defaultdict(list)
    ops = {}
    ort_walls = []
    for round_index in range(args.rounds):
        load = os.getloadavg()[0]
        for label, binary in binaries:
            steps, ops[label] = convoy_step_times(binary, args.model, args.batch, args.threads, args.runs, args.layout,
                                                  args.convoy_args.split())
            rounds[label].append(steps)
        node_times, ops["ort"], wall = ort_node_times(args.model, args.batch, args.threads, args.runs)
        rounds["ort"].append(node_times)
        ort_walls.append(wall)
        if args.openvino:
            ov_times, ops["ov"] = openvino_node_times(args.model, args.batch, args.threads, args.runs)
            rounds["ov"].append(ov_times)
        print(f"round {round_index} load average {load:.2f} -> {os.getloadavg()[0]:.2f}: " +
              ", ".join(f"{label} {sum(r[-1].values()):.3f} ms" for label, r in rounds.items()))
    engines = [label for label, _ in binaries] + ["ort"] + (["ov"] if args.openvino else [])
    times = {label: over_rounds(rounds[label], args.statistic) for label in engines}
    convoy, ortt, ort_wall = times["convoy"], times["ort"], statistics.median(ort_walls)

    groups = collections.OrderedDict()
    for engine in engines:
        for name, ms in times[engine].items():
            key = group_of(name, args.group_regex)
            groups.setdefault(key, collections.defaultdict(float))
            groups[key][engine] += ms
            groups[key][engine + "_n"] += 1
    base_header = f" {'base ms':>9}" if args.baseline_convoy else ""
    ov_header = f" {'ov ms':>9} {'nodes':>5} {'/ov':>6}" if args.openvino else ""
    print(f"\n{'group':<44} {'role':<5}{base_header} {'convoy ms':>10} {'steps':>5} {'ort ms':>9} {'nodes':>5} "
          f"{'ratio':>6}{ov_header}")
    roles = collections.defaultdict(lambda: collections.defaultdict(float))
    for (block, role), g in sorted(groups.items(), key=lambda kv: kv[0]):
        ratio = g["convoy"] / g["ort"] if g["ort"] > 0 else float("inf")
        base = f" {g['base']:9.4f}" if args.baseline_convoy else ""
        ov = ""
        if args.openvino:
            ov_ratio = g["convoy"] / g["ov"] if g["ov"] > 0 else float("inf")
            ov = f" {g['ov']:9.4f} {int(g['ov_n']):5d} {ov_ratio:6.2f}"
        print(f"{block:<44} {role:<5}{base} {g['convoy']:10.4f} {int(g['convoy_n']):5d} {g['ort']:9.4f} "
              f"{int(g['ort_n']):5d} {ratio:6.2f}{ov}")
        for key, value in g.items():
            roles[role][key] += value
    print()
    for role, r in sorted(roles.items()):
        base = f"baseline {r['base']:.3f} ms, " if args.baseline_convoy else ""
        print(f"all {role:<5} {base}convoy {r['convoy']:.3f} ms in {int(r['convoy_n'])} steps, onnxruntime "
              f"{r['ort']:.3f} ms in {int(r['ort_n'])} nodes, ratio {r['convoy'] / r['ort']:.2f}")
    if args.baseline_convoy:
        print(f"sum of step times: baseline {sum(times['base'].values()):.3f} ms ({len(times['base'])} steps)")
    print(f"sum of step times: convoy {sum(convoy.values()):.3f} ms ({len(convoy)} steps), onnxruntime "
          f"{sum(ortt.values()):.3f} ms ({len(ortt)} nodes); onnxruntime's median wall time per run "
          f"{ort_wall:.3f} ms (profiling on)")
    if args.openvino:
        print(f"sum of node times: OpenVINO f32 {sum(times['ov'].values()):.3f} ms ({len(times['ov'])} nodes)")
    kinds = collections.Counter(ops["ort"].values())
    print("onnxruntime node kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if args.per_node:
        print_per_node(engines, times, ops)


def print_per_node(engines, times, ops):
    """One row per node (Convoy's step order, then onnxruntime's nodes it has no step for): each engine's ms and
    what it ran."""
    names = list(times["convoy"]) + [n for e in engines for n in times[e] if n not in times["convoy"]]
    names = list(dict.fromkeys(names))
    print("\nper node: ms (what ran); ratio = convoy / onnxruntime")
    for name in names:
        cells = []
        for engine in engines:
            ms = times[engine].get(name)
            what = ops[engine].get(name, "-") if name in times[engine] else "-"
            cells.append(f"{engine} {ms:.4f} ({what})" if ms is not None else f"{engine} -")
        c, o = times["convoy"].get(name), times["ort"].get(name)
        ratio = f"{c / o:.2f}" if c is not None and o else "-"
        print(f"{name:<56} {ratio:>5}  " + "  ".join(cells))


if __name__ == "__main__":
    main()
