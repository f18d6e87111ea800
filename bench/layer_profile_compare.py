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
`exec_type` (the kernel: brgconv_avx512_1x1_I8, jit_avx512_I8, ...). `--openvino` adds OpenVINO's profile in FP32
(INFERENCE_PRECISION_HINT f32: its default is BF16 on AVX512-BF16 CPUs) as a column of its own, whatever the peer.
OpenVINO names a node after the first original layer it fused (a convolution keeps its ONNX node name with
"/WithoutBiases" appended, a residual add and the QuantizeLinear nodes fuse into the convolution before them, which
`originalLayersNames` lists; its layout reorders are named after the node they serve).

onnxruntime and Convoy keep the ONNX node names (onnxruntime's layout reorders are named after the node they serve; a
Conv fused with its activation, reported under the activation's name or its output tensor's "_nchwc" twin, is renamed
back to the Conv, onnx_node_aliases), so each node is put in a group by its name: the network block it
belongs to (`--group_regex`, by default torchvision's `/features/features.N/features.N.M` blocks, else the first path
component), and within a block its role: `se` for a squeeze-and-excitation part (global average pool, fc1, fc2, the
gate multiply, Convoy's fused step), `conv` for everything else (convolutions with their fused activations,
reorders). The table prints per group each engine's ms and node count and Convoy's ratio to every other engine, then
the totals per role and the engines' own totals (the sum of node times, which leaves out the engines' per-run
overheads).

`--baseline_convoy=PATH` profiles a second Convoy binary (e.g. main's build) in the same run, as a column of its own.
`--rounds=N` repeats the engines' profiles N times one after the other (baseline, Convoy, the peer, OpenVINO f32; the
load average printed per round) and keeps each node's median over the rounds, so a busy machine slows every engine
alike. `--statistic=min` takes, within each profile, Convoy's fastest run of each step (`convoy inspect
--profile_statistic=min`, passed only then, so a baseline binary without that flag still runs at the median),
onnxruntime's fastest of each node and OpenVINO's fastest block of 10 runs, and over the rounds each node's fastest.
`--nodes` (or `--per_node`) prints a table with one row per node in Convoy's step order (the other engines' unmatched
nodes after), matched by name (Convoy's steps are named after the ONNX node, its quantize / dequantize steps after the
tensor): each engine's ms and what it ran there (Convoy's algorithm and the oneDNN implementation its primitive got,
onnxruntime's node kind, OpenVINO's node type and exec_type).

  .venv/bin/python bench/layer_profile_compare.py --model=/tmp/meas/effb0.onnx --convoy=bazel-bin/server/tools/convoy
  .venv/bin/python bench/layer_profile_compare.py --model=resnet50_qdq.onnx --peer=openvino --batch=8 --nodes \
      --group_regex='/layer\d+/layer\d+\.\d+'
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

try:
    import openvino as ov
except ImportError:  # --peer=openvino and --openvino need it
    ov = None

SE_PATTERN = re.compile(r"(avgpool|/fc1/|/fc2/|/Mul$|/Mul_|squeeze|/se/)", re.IGNORECASE)


def pick(values, statistic):
    """The median of the runs, or the fastest run ("min": on a shared machine, the run no neighbour interrupted)."""
    return min(values) if statistic == "min" else statistics.median(values)


def ort_node_times(model, batch, threads, runs, statistic="median"):
    """({node: ms}, {node: op kind}, wall ms per run) of onnxruntime's CPU provider from its own profile."""
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
    times = {n: pick(v[-runs:], statistic) for n, v in per_node.items()}
    times, op_of = canonical_node_times(times, op_of, onnx_node_aliases(model))
    return times, op_of, pick(wall, statistic)


# Activations onnxruntime fuses into the convolution before them (its fused node takes the activation's name).
FUSED_ACTIVATIONS = {"Clip", "Relu", "LeakyRelu", "Sigmoid", "HardSigmoid", "Tanh"}


def onnx_node_aliases(model):
    """{name onnxruntime may report: the ONNX node Convoy's step is named after}. onnxruntime names a Conv fused with
    the activation after it by the activation's node, and with its NCHWc layout a node by its output tensor plus
    "_nchwc" (`.../conv.0.2/Clip_output_0_nchwc`); both are mapped back to the Conv."""
    import onnx
    graph = onnx.load(model, load_external_data=False).graph
    producer = {out: node for node in graph.node for out in node.output}
    aliases = {}
    for node in graph.node:
        target = node.name
        source = producer.get(node.input[0]) if node.input else None
        if node.op_type in FUSED_ACTIVATIONS and source is not None and source.op_type == "Conv":
            target = source.name
        if target != node.name:
            aliases[node.name] = target
        for out in node.output:
            aliases[out] = target
            aliases[out + "_nchwc"] = target
    return aliases


def canonical_node_times(times, ops, aliases):
    """times and ops with each node renamed by `aliases` (times of nodes that land on one name added up)."""
    merged, merged_ops = collections.defaultdict(float), {}
    for name, ms in times.items():
        canonical = aliases.get(name, name)
        merged[canonical] += ms
        merged_ops[canonical] = ops.get(name, "?")
    return dict(merged), merged_ops


def ov_node_name(name):
    """The ONNX node an OpenVINO node is named after: its friendly name less the suffixes its transformations add."""
    return re.sub(r"/(WithoutBiases|DequantizationMultiply).*$", "", name)


def ov_node_times(model, batch, threads, runs, statistic="median", block=10, precision=None):
    """({node: ms}, {node: "node_type exec_type"}, wall ms per run) of OpenVINO's CPU plugin, nodes named by
    ov_node_name. `precision`: None for OpenVINO's default inference precision, else its INFERENCE_PRECISION_HINT
    ("f32"). Nodes OpenVINO fused away or did not run are left out.

    OpenVINO's `real_time` of a node is the running mean, in whole microseconds, of all inferences of the compiled
    model so far (every request shares the counters), not the last run's. The time of runs k1+1..k2 is therefore
    (k2 * mean_k2 - k1 * mean_k1) / (k2 - k1), within (k1 + k2) / (k2 - k1) us of the truth. "median": the mean over
    the `runs` timed runs after the warm-up; "min": the fastest block of `block` consecutive runs' mean (on a shared
    machine, the block no neighbour interrupted)."""
    if ov is None:
        sys.exit("--peer=openvino and --openvino need the openvino package")
    core = ov.Core()
    net = core.read_model(model)
    shape = [d.get_length() if d.is_static else batch for d in net.inputs[0].get_partial_shape()]
    shape[0] = batch
    net.reshape(shape)
    config = {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY", "PERF_COUNT": True}
    if precision:
        config["INFERENCE_PRECISION_HINT"] = precision
    compiled = core.compile_model(net, "CPU", config)
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


def parse_inspect(out):
    """({step: ms}, {step: implementation}) from `convoy inspect --profile_runs` output: the measured step times, and
    from the plan listing before them each step's algorithm with the oneDNN implementation its primitive got (else the
    table's op and algorithm)."""
    head, _, table = out.partition("== measured step times")
    impl, current = {}, None
    for line in head.splitlines():
        m = re.match(r"\s+\[\d+\] (\S+) \(\w+\):", line)
        if m:
            current = m.group(1)
        elif current and line.strip().startswith("algorithm "):
            impl[current] = line.strip().split()[1].rstrip(",")
        elif current and current in impl and line.strip().startswith("launch oneDNN "):
            impl[current] += " [" + line.strip()[len("launch oneDNN "):] + "]"
    steps, ops = {}, {}
    for line in table.splitlines():
        m = re.match(r"\s+\[\d+\]\s+(\S+)\s+(\S+)\s+(\S+)\s+([0-9.]+)$", line)
        if m:
            steps[m.group(1)] = float(m.group(4))
            ops[m.group(1)] = impl.get(m.group(1), f"{m.group(2)} {m.group(3)}")
    return steps, ops


def convoy_step_times(convoy, model, batch, threads, runs, layout, extra, statistic="median"):
    """({step: ms}, {step: implementation}, None) of `convoy inspect`'s own profile."""
    cmd = [convoy, "inspect", f"--model={model}", f"--threads={threads}", "--tune", f"--profile_batch={batch}",
           f"--profile_runs={runs}", f"--max_batch_size={max(batch, 1)}"] + ([f"--layout={layout}"] if layout else [])
    if statistic != "median":  # the default: older binaries, e.g. a baseline's, lack the flag
        cmd.append(f"--profile_statistic={statistic}")
    out = subprocess.run(cmd + extra, check=True, capture_output=True, text=True).stdout
    steps, ops = parse_inspect(out)
    if not steps:
        sys.exit(f"no step times in the output of {' '.join(cmd + extra)}:\n" + out[-2000:])
    return steps, ops, None


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
    there), in the order the nodes first appear."""
    names = list(dict.fromkeys(n for r in rounds for n in r))
    return {n: pick([r[n] for r in rounds if n in r], statistic) for n in names}


Engine = collections.namedtuple("Engine", "label title unit profile")


def engines_of(args):
    """The engines in the order each round profiles them: baseline Convoy, Convoy, the peer, OpenVINO f32."""
    common = (args.model, args.batch, args.threads, args.runs)

    def convoy(binary):
        return lambda: convoy_step_times(binary, *common, args.layout, args.convoy_args.split(), args.statistic)

    engines = [Engine("base", "baseline", "steps", convoy(args.baseline_convoy))] if args.baseline_convoy else []
    engines.append(Engine("convoy", "convoy", "steps", convoy(args.convoy)))
    if args.peer == "onnxruntime":
        engines.append(Engine("ort", "onnxruntime", "nodes", lambda: ort_node_times(*common, args.statistic)))
    else:
        engines.append(Engine("ov", "openvino", "nodes", lambda: ov_node_times(*common, args.statistic)))
    if args.openvino:
        engines.append(Engine("ov_f32", "openvino f32", "nodes",
                              lambda: ov_node_times(*common, args.statistic, precision="f32")))
    return engines


def print_groups(engines, times, group_regex, peer):
    """Per (block, role) each engine's ms and node count and Convoy's ratio to every other engine; then per role."""
    others = [e for e in engines if e.label != "convoy"]
    groups = collections.OrderedDict()
    for e in engines:
        for name, ms in times[e.label].items():
            g = groups.setdefault(group_of(name, group_regex), collections.defaultdict(float))
            g[e.label] += ms
            g[e.label + "_n"] += 1

    def ratio(g, label):  # nan where X has no time there
        return g["convoy"] / g[label] if g[label] > 0 else float("nan")

    print(f"\n{'group':<44} {'role':<5}" + "".join(f" {e.label + ' ms':>10} {e.unit:>5}" for e in engines) +
          "".join(f" {'/' + e.label:>7}" for e in others) + "   (/X: convoy ms / X ms)")
    roles = collections.defaultdict(lambda: collections.defaultdict(float))
    for (block, role), g in sorted(groups.items(), key=lambda kv: kv[0]):
        print(f"{block:<44} {role:<5}" + "".join(f" {g[e.label]:10.4f} {int(g[e.label + '_n']):5d}" for e in engines) +
              "".join(f" {ratio(g, e.label):7.2f}" for e in others))
        for key, value in g.items():
            roles[role][key] += value
    print()
    for role, r in sorted(roles.items()):
        print(f"all {role:<5} " + ", ".join(f"{e.title} {r[e.label]:.3f} ms in {int(r[e.label + '_n'])} {e.unit}"
                                             for e in engines) +
              f"; convoy / {peer.title} {ratio(r, peer.label):.2f}")


def print_nodes(engines, times, ops, peer):
    """One row per node in Convoy's step order, then the other engines' nodes Convoy has no step for, matched by name:
    each engine's ms, Convoy's ratio to the peer, and what each engine ran there."""
    convoy = times["convoy"]
    names = list(dict.fromkeys(list(convoy) + [n for e in engines for n in times[e.label]]))
    print(f"\n{'node':<56}" + "".join(f" {e.label + ' ms':>10}" for e in engines) + f" {'/' + peer.label:>7}  " +
          " | ".join(f"{e.label} implementation" for e in engines))
    for name in names:
        cells = "".join(f" {times[e.label][name]:10.4f}" if name in times[e.label] else " " * 11 for e in engines)
        c, o = convoy.get(name), times[peer.label].get(name)
        ratio = f"{c / o:7.2f}" if c is not None and o else " " * 7
        what = " | ".join(ops[e.label].get(name, "-") if name in times[e.label] else "-" for e in engines)
        print(f"{name[-56:]:<56}{cells} {ratio}  {what}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy")
    ap.add_argument("--baseline_convoy", default="", help="a second Convoy binary profiled in the same run")
    ap.add_argument("--peer", default="onnxruntime", choices=["onnxruntime", "openvino"],
                    help="the engine Convoy's ratio is taken against (openvino: its default precision)")
    ap.add_argument("--openvino", action="store_true", help="also OpenVINO f32's own per-node profile")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=1, help="profiles per engine, alternating across the engines")
    ap.add_argument("--statistic", choices=["median", "min"], default="median",
                    help="each step's / node's median over the runs and the rounds, or its fastest (a shared machine)")
    ap.add_argument("--layout", default="", help="Convoy's --layout (default: its CPU default)")
    ap.add_argument("--convoy_args", default="", help="extra arguments for convoy inspect, space separated")
    ap.add_argument("--group_regex", default=r"/features/features\.\d+/features\.\d+\.\d+")
    ap.add_argument("--nodes", "--per_node", dest="nodes", action="store_true",
                    help="also print the node-by-node table with what each engine ran")
    args = ap.parse_args()
    if args.rounds < 1 or args.runs < 1:
        ap.error("--rounds and --runs must be at least 1")

    engines = engines_of(args)
    peer = engines[-2] if args.openvino else engines[-1]
    print(f"load average {os.getloadavg()[0]:.2f}; onnxruntime {ort.__version__}; "
          f"openvino {ov.__version__ if ov is not None else '(not installed)'}; peer {args.peer}; batch {args.batch}; "
          f"threads {args.threads}; runs {args.runs}; rounds {args.rounds}; statistic {args.statistic}")
    rounds, walls, ops = collections.defaultdict(list), collections.defaultdict(list), {}
    for round_index in range(args.rounds):
        load = os.getloadavg()[0]
        for e in engines:
            node_times, ops[e.label], wall = e.profile()
            rounds[e.label].append(node_times)
            if wall is not None:
                walls[e.label].append(wall)
        print(f"round {round_index} load average {load:.2f} -> {os.getloadavg()[0]:.2f}: " +
              ", ".join(f"{e.label} {sum(rounds[e.label][-1].values()):.3f} ms" for e in engines))
    times = {e.label: over_rounds(rounds[e.label], args.statistic) for e in engines}

    print_groups(engines, times, args.group_regex, peer)
    for e in engines:
        wall = walls.get(e.label)
        print(f"sum of node times: {e.title} {sum(times[e.label].values()):.3f} ms ({len(times[e.label])} {e.unit})" +
              (f"; {args.statistic} wall time per run {pick(wall, args.statistic):.3f} ms (profiling on)" if wall
               else ""))
    for e in (e for e in engines if e.unit == "nodes"):
        kinds = collections.Counter(ops[e.label].values())
        print(f"{e.title} node kinds: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if args.nodes:
        print_nodes(engines, times, ops, peer)


if __name__ == "__main__":
    main()
