#!/usr/bin/env python3
"""Convoy's CPU backend against onnxruntime and OpenVINO: conv layers, and whole models side by side in one run.

For every layer listed by `kernels_benchmark --list` (shape, stride, groups, use count) and each batch size, this
script builds a one-node ONNX model (Conv with bias, then Relu / Clip(0, 6) / nothing, which onnxruntime fuses like
Convoy's epilogue), times it in onnxruntime on the CPU with the same thread count as Convoy (intra_op_num_threads=2,
sequential execution, all graph optimizations), and times Convoy's tuned choice on the same layer through
`conv_layer_bench`. It then exports torchvision's ResNet-50 and MobileNetV2 to ONNX with Debian's python3 (torch
1.13 / torchvision 0.14, random weights) and times the same ONNX files end to end in onnxruntime and in Convoy
(`convoy tune` for the batch sizes, then `convoy run --cache --threads=2 --repeat=N`, which prints the median of N
timed runs after a warm-up run), in onnxruntime, and in OpenVINO (its CPU plugin reading the same ONNX file, 2
inference threads, one stream, latency hint) twice: with INFERENCE_PRECISION_HINT=f32 set explicitly and with its
default (bf16 on CPUs with AMX/AVX512-BF16, f32 elsewhere). With `--precisions=...,int8` each model is also
quantized by onnxruntime's quantize_static (tools/models/quantize_qdq.py: QDQ format, per-channel INT8 weights, UINT8
activations, calibrated on 4 random 224x224 images) and that one QDQ file is timed in Convoy (which runs QDQ models in
FP32 with each quantization simulated), in onnxruntime (its INT8 kernels after its QDQ fusion) and in OpenVINO (its
default, which runs the QDQ file's convolutions in INT8). ResNet-50, MobileNetV2 and EfficientNet-B0 (plus
--extra_models=NAME=PATH.onnx, e.g. the EfficientNet-Lite0 sample model), batch 1 and 8, FP32 and (--precisions)
BF16: Convoy --precision=bf16 against OpenVINO with the bf16 hint and its default. Each round times every engine
once (the engines alternate within the round, seconds apart); the median of --model_rounds rounds is reported, with
the 1-minute load average at each round (the machine is shared), and then, round by round, the median of the
per-round ratios Convoy / peer, how many rounds Convoy was faster in, and each engine's fastest round: where the host
switches between speeds from one round to the next, each round's ratio still compares the engines in one state. The model rows also compare the sum of Convoy's
per-layer conv times (each layer times its use count) with onnxruntime's per-layer sum.

Run from the repository root with the project's virtualenv:
  bazel build //kernels/benchmarks:kernels_benchmark //kernels/benchmarks:conv_layer_bench //server/tools:convoy
  .venv/bin/python bench/onnxruntime_compare.py --bin_dir=bazel-bin/kernels/benchmarks [--batches=1,8] \
      [--convoy=bazel-bin/server/tools/convoy]
"""
import argparse
import collections
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools", "models"))
try:
    import openvino as ov
except ImportError:  # the comparison still runs without it, with the OpenVINO columns empty
    ov = None
from onnx import TensorProto, helper, numpy_helper

THREADS = 2
# How a timed series becomes one number: "median" (the default), or "min", the fastest run, which a busy shared
# machine disturbs least (a run only gets faster by having the cores to itself).
STATISTIC = "median"


def summarize(times):
    return min(times) if STATISTIC == "min" else statistics.median(times)


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
    return time_ort_session(ort_session(model_bytes), input_shape, reps)


def time_ort_session(sess, input_shape, reps):
    name = sess.get_inputs()[0].name
    x = np.random.default_rng(1).uniform(-1, 1, input_shape).astype(np.float32)
    for _ in range(3):
        sess.run(None, {name: x})
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - start) * 1e3)
    return summarize(times)


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
torch.manual_seed(0)  # the same random weights every run: the same QDQ file (and scales) from one run to the next
model = {"resnet50": torchvision.models.resnet50, "resnet18": torchvision.models.resnet18,
         "mobilenetv2": torchvision.models.mobilenet_v2, "efficientnet_b0": torchvision.models.efficientnet_b0}[name]()
model.eval()
torch.onnx.export(model, torch.randn(1, 3, 224, 224), path, opset_version=13, input_names=["x"], output_names=["y"],
                  dynamic_axes={"x": {0: "n"}, "y": {0: "n"}})
"""


def export_whole_model(name, directory):
    path = os.path.join(directory, f"{name}.onnx")
    subprocess.run(["/usr/bin/python3", "-c", EXPORT_SCRIPT, name, path], check=True, capture_output=True)
    return path


def layout_flags(layout):
    """`convoy run` / `convoy tune` flags for a --convoy_layouts entry: an activation layout ("default": Convoy's own
    choice), then any CLI options joined with "+" ("default+int8_residual_add=single_rounding")."""
    layout, *options = layout.split("+")
    return ([] if layout == "default" else [f"--layout={layout}"]) + [f"--{o}" for o in options]


def time_convoy_model(convoy, model_path, cache, batch, reps, directory, precision="fp32", layout="default"):
    """Median ms of `reps` runs of the whole model at `batch` through `convoy run` (after one warm-up run)."""
    x_path = os.path.join(directory, f"x{batch}.npy")
    if not os.path.exists(x_path):
        np.save(x_path, np.random.default_rng(1).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32))
    out_dir = os.path.join(directory, "out")
    os.makedirs(out_dir, exist_ok=True)
    out = subprocess.run([convoy, "run", f"--model={model_path}", f"--input={x_path}", f"--output_dir={out_dir}",
                          f"--threads={THREADS}", f"--cache={cache}", f"--max_batch_size={batch}", "--quiet",
                          f"--precision={precision}", f"--repeat={reps}", *layout_flags(layout)], check=True,
                         capture_output=True,
                         text=True).stdout
    for line in out.splitlines():
        if line.startswith("timed "):
            return float(line.split("min " if STATISTIC == "min" else "median ")[1].split(" ms")[0])
    raise RuntimeError(f"no timing line in convoy run output:\n{out}")


def convoy_implementations(convoy, model_path, cache, batch, precision="fp32", layout="default"):
    """What each step of Convoy's plan at `batch` ran, counted: {"algorithm [oneDNN implementation]": steps}, from
    `convoy inspect` with the same cache, threads and flags as the timed runs (its plan listing names each step's
    algorithm and, for oneDNN's, the implementation the primitive got: brgconv_1x1:avx512_core, jit_dw:avx2, ...),
    and how many leading steps the batch runs image by image (that inspect's own choice, measured at its load)."""
    out = subprocess.run([convoy, "inspect", f"--model={model_path}", f"--threads={THREADS}", f"--cache={cache}",
                          f"--max_batch_size={batch}", f"--profile_batch={batch}", "--quiet",
                          f"--precision={precision}", *layout_flags(layout)], capture_output=True, text=True)
    if out.returncode != 0:
        return {f"(convoy inspect failed: {out.stderr.strip().splitlines()[-1:]})": 0}
    counts, algorithm = collections.Counter(), None
    for line in out.stdout.split("== measured step times")[0].splitlines():
        line = line.strip()
        if line.startswith("algorithm "):
            if algorithm is not None:
                counts[algorithm] += 1
            algorithm = line.split()[1].rstrip(",")  # "algorithm NAME, workspace ..."
        elif line.startswith("image by image at batch ") and ": the first " in line:
            counts["image by image (steps run one image at a time)"] = int(line.split(": the first ")[1].split()[0])
        elif line.startswith("launch oneDNN ") and algorithm is not None:
            counts[f"{algorithm} [{line[len('launch oneDNN '):]}]"] += 1
            algorithm = None
    if algorithm is not None:
        counts[algorithm] += 1
    return dict(counts.most_common())


def ov_compiled(path, batch, precision_hint):
    """OpenVINO's CPU plugin on the ONNX file at a static batch; precision_hint None keeps OpenVINO's default."""
    core = ov.Core()
    model = core.read_model(path)
    model.reshape([batch, 3, 224, 224])
    config = {"INFERENCE_NUM_THREADS": THREADS, "NUM_STREAMS": 1, "PERFORMANCE_HINT": "LATENCY"}
    if precision_hint is not None:
        config["INFERENCE_PRECISION_HINT"] = precision_hint
    compiled = core.compile_model(model, "CPU", config)
    return compiled, str(compiled.get_property("INFERENCE_PRECISION_HINT"))


def time_ov(compiled, batch, reps):
    request = compiled.create_infer_request()
    x = np.random.default_rng(1).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)
    for _ in range(3):
        request.infer({0: x})
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        request.infer({0: x})
        times.append((time.perf_counter() - start) * 1e3)
    return summarize(times)


def load_average():
    return os.getloadavg()[0]


def whole_models(args, models, batches):
    """{(model, precision, batch): {engine: median ms}}, each the median over args.model_rounds rounds in which every
    engine runs once, one after the other; also prints each round with the load average. Fills `implementations`
    with what each Convoy plan's steps ran (convoy_implementations)."""
    reps = max(5, args.reps // 2)
    variants = convoy_variants(args)  # (engine name, CLI path, layout)
    precisions = args.precisions.split(",")
    result = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {m: export_whole_model(m, tmp) for m in models}
        for extra in filter(None, args.extra_models.split(",")):
            name, path = extra.split("=", 1)
            paths[name] = path
        for model in paths:
            for precision in precisions:
                path = paths[model]
                if precision == "int8":  # onnxruntime's QDQ file of the model; Convoy runs it as given
                    from quantize_qdq import quantize
                    path = quantize(paths[model], os.path.join(tmp, f"{model}_qdq.onnx"), size=224,
                                    calibration_count=4)
                with open(path, "rb") as f:
                    data = f.read()
                convoy_precision = "fp32" if precision == "int8" else precision
                caches = {}
                for index, (engine, convoy, layout) in enumerate(variants):
                    caches[engine] = os.path.join(tmp, f"{model}.{precision}.{index}.cache")
                    subprocess.run([convoy, "tune", f"--model={path}", f"--batch_sizes={','.join(map(str, batches))}",
                                    f"--cache={caches[engine]}", f"--threads={THREADS}",
                                    f"--max_batch_size={max(batches)}", f"--precision={convoy_precision}", "--quiet",
                                    *layout_flags(layout)], check=True, capture_output=True)
                for batch in batches:
                    engines = {}
                    for engine, convoy, layout in variants:
                        engines[engine] = lambda b=batch, p=convoy_precision, c=caches[engine], m=path, x=convoy, l=layout: (
                            time_convoy_model(x, m, c, b, reps, tmp, p, l))
                    if precision in ("fp32", "int8"):
                        sess = ort_session(data)
                        engines["onnxruntime"] = lambda b=batch, s=sess: time_ort_session(s, [b, 3, 224, 224], reps)
                    if ov is not None and not args.skip_openvino:
                        hint = "f32" if precision == "fp32" else "bf16"
                        hints = ((f"openvino_{hint}", hint), ("openvino_default", None))
                        for label, h in hints if precision != "int8" else hints[1:]:
                            try:
                                compiled, effective = ov_compiled(path, batch, h)
                            except RuntimeError as e:
                                print(f"openvino {label} {model} batch {batch}: {e}")
                                continue
                            engines[f"{label}({effective})"] = lambda b=batch, c=compiled: time_ov(c, b, reps)
                    times = {name: [] for name in engines}
                    for round_index in range(args.model_rounds):
                        load = load_average()
                        for name, run in engines.items():
                            times[name].append(run())
                        print(f"whole {model} {precision} batch {batch} round {round_index} load {load:.2f}: " +
                              ", ".join(f"{n} {t[-1]:.2f}" for n, t in times.items()))
                        sys.stdout.flush()
                    result[(model, precision, batch)] = {n: statistics.median(t) for n, t in times.items()}
                    round_times[(model, precision, batch)] = times
                    for engine, convoy, layout in variants:
                        implementations[(model, precision, batch, engine)] = convoy_implementations(
                            convoy, path, caches[engine], batch, convoy_precision, layout)
    return result


def convoy_variants(args):
    """The Convoy configurations timed side by side: (engine name, CLI path, layout) for every --convoy binary
    (PATH, or LABEL=PATH,...) and every --convoy_layouts entry. The engine is "convoy" for one unlabelled binary in
    Convoy's default layout, else convoy[LABEL]/LAYOUT."""
    binaries = []
    for entry in filter(None, args.convoy.split(",")):
        label, path = entry.split("=", 1) if "=" in entry else ("", entry)
        if os.access(path, os.X_OK):
            binaries.append((label, path))
        else:
            print(f"(no convoy CLI at {path}: its whole-model rows are left out)")
    layouts = args.convoy_layouts.split(",")
    variants = []
    for label, path in binaries:
        for layout in layouts:
            name = "convoy" + (f"[{label}]" if label else "") + ("" if layout == "default" else f"/{layout}")
            variants.append((name, path, layout))
    return variants


implementations = {}  # (model, precision, batch, engine) -> {"algorithm [oneDNN implementation]": steps}
round_times = {}  # (model, precision, batch) -> {engine: [each round's ms]}


def paired_rounds(convoy_ms, peer_ms):
    """(median of the per-round ratios convoy / peer, rounds convoy was faster in, rounds): each round times the
    engines back to back, so its ratio compares them in one state of a machine whose speed changes between rounds."""
    ratios = [c / p for c, p in zip(convoy_ms, peer_ms)]
    return statistics.median(ratios), sum(r < 1 for r in ratios), len(ratios)


def print_whole_model_table(whole):
    print()
    print(f"whole models on {cpu_model()}: median over the rounds of each round's {STATISTIC} ms, and Convoy / peer "
          "ratios (lower is better)")
    for (model, precision, batch), times in sorted(whole.items()):
        cells = []
        for name, ms in times.items():
            cells.append(f"{name} {ms:.2f}")
        for name, ms in times.items():
            if not name.startswith("convoy"):
                continue
            for peer, peer_ms in times.items():
                if not peer.startswith("convoy"):
                    cells.append(f"{name}/{peer} {ms / peer_ms:.2f}")
        print(f"  {model:16} {precision:5} batch {batch}: " + "; ".join(cells))
    rounds_seen = [t for t in round_times.values() if any(len(ms) > 1 for ms in t.values())]
    if rounds_seen:
        print()
        print("the same, round by round: the median of the per-round ratios Convoy / peer, the rounds Convoy was "
              "faster in, and each engine's fastest round")
        for (model, precision, batch), times in sorted(round_times.items()):
            cells = [f"{name} fastest {min(ms):.2f}" for name, ms in times.items()]
            for name, ms in times.items():
                if not name.startswith("convoy"):
                    continue
                for peer, peer_ms in times.items():
                    if not peer.startswith("convoy"):
                        ratio, ahead, rounds = paired_rounds(ms, peer_ms)
                        cells.append(f"{name}/{peer} {ratio:.2f} (faster in {ahead} of {rounds})")
            print(f"  {model:16} {precision:5} batch {batch}: " + "; ".join(cells))
    print()
    print("what each Convoy plan's steps ran (algorithm [oneDNN implementation]: steps), from convoy inspect:")
    for (model, precision, batch, engine), counts in sorted(implementations.items()):
        print(f"  {model:16} {precision:5} batch {batch} {engine}: " +
              ", ".join(f"{name} x{n}" for name, n in counts.items()))


def cpu_model():
    """'Intel(R) Xeon(R) Processor (family 6 model 207), avx512f avx512_vnni ...' from /proc/cpuinfo."""
    info = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if ":" in line:
                    key, value = (part.strip() for part in line.split(":", 1))
                    info.setdefault(key, value)
    except OSError:
        return "unknown CPU"
    flags = set(info.get("flags", "").split())
    isa = [f for f in ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16") if f in flags]
    return (f"{info.get('model name', '?')} (family {info.get('cpu family', '?')} model {info.get('model', '?')}), "
            f"{' '.join(isa) or 'no AVX2'}")


def main():
    global STATISTIC, THREADS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin_dir", default="bazel-bin/kernels/benchmarks")
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--models", default="resnet50,mobilenetv2")
    parser.add_argument("--skip_whole_models", action="store_true")
    parser.add_argument("--skip_layers", action="store_true", help="whole models only")
    parser.add_argument("--convoy", default="bazel-bin/server/tools/convoy",
                        help="the convoy CLI, or LABEL=PATH,... to time several builds side by side")
    parser.add_argument("--convoy_layouts", default="default",
                        help="Convoy activation layouts for the whole models: default (Convoy's), nchw, nhwc, nchw8c; "
                             "each may add convoy CLI options after a +, as in default+int8_residual_add=single_rounding")
    parser.add_argument("--model_rounds", type=int, default=3)
    parser.add_argument("--whole_models", default="resnet50,mobilenetv2,efficientnet_b0",
                        help="torchvision models timed end to end (resnet50, resnet18, mobilenetv2, efficientnet_b0)")
    parser.add_argument("--extra_models", default="", help="NAME=PATH.onnx,... timed end to end as well")
    parser.add_argument("--precisions", default="fp32,bf16",
                        help="fp32, bf16 and/or int8 (onnxruntime's QDQ file of each model) whole-model rows")
    parser.add_argument("--skip_openvino", action="store_true", help="whole models against onnxruntime only")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help="threads of every engine (Convoy's pool, onnxruntime's intra-op, OpenVINO's inference)")
    parser.add_argument("--statistic", choices=["median", "min"], default="median",
                        help="per engine and round: the median of the timed runs, or the fastest (a busy machine)")
    args = parser.parse_args()
    STATISTIC = args.statistic
    THREADS = args.threads
    batches = [int(b) for b in args.batches.split(",")]
    models = args.models.split(",")
    layers = [] if args.skip_layers else [l for l in list_layers(args.bin_dir) if l["model"] in models]
    print(f"CPU: {cpu_model()}")
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
    print(f"openvino {ov.__version__ if ov is not None else '(not installed)'}; load average at start "
          f"{load_average():.2f}")
    whole = {} if args.skip_whole_models else whole_models(args, args.whole_models.split(","), batches)
    print()
    print(f"{'model':12} {'batch':>5} {'convoy conv sum':>16} {'ort conv sum':>13} {'ratio':>6}")
    for (model, batch), (convoy_sum, ort_sum) in sorted(sums.items()):
        print(f"{model:12} {batch:5d} {convoy_sum:16.2f} {ort_sum:13.2f} {convoy_sum / ort_sum:6.2f}")
    print_whole_model_table(whole)


if __name__ == "__main__":
    main()
