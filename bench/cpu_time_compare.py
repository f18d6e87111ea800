#!/usr/bin/env python3
"""CPU time per inference, one thread, for Convoy builds and their peers side by side: a comparison that a busy
machine disturbs far less than wall time.

On a shared machine a 2-thread engine's wall time measures the scheduler as much as the engine: an OpenMP team
waits at every barrier for a thread the OS has descheduled (docs/kernels.md, "How the autotuner times candidates").
With one thread there is no barrier and no spinning, and the CPU time the process is charged is its own work (what
other load still changes is the caches and the clock). This script runs every engine on one thread and reads the
CPU time it used per inference:

  Convoy  `convoy run --threads=1 --max_batch_size=B --repeat=R` (its plan from the heuristic, or tuned with
          `--tune`: `convoy tune --threads=1` first, on the same machine) twice, with R=1 and R=1+runs; the
          children's user+system time of the second minus the first, over `runs` (import, planning and the first
          run cancel out);
  onnxruntime  intra_op_num_threads=1, sequential, all graph optimizations: time.process_time() over `runs` runs
          after 3 warm-up runs;
  OpenVINO f32  INFERENCE_NUM_THREADS=1, one stream, INFERENCE_PRECISION_HINT=f32: the same.

Each round runs every engine once, one after the other; the table is the median of the rounds, with each engine's
time over onnxruntime's. The CPU and the load average head the output.

  .venv/bin/python bench/cpu_time_compare.py --models=resnet18=/tmp/resnet18.onnx \\
      --convoy=before=/path/to/other/convoy,after=bazel-bin/server/tools/convoy --batches=1,8 --runs=20 --rounds=3
"""
import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from onnxruntime_compare import cpu_model  # noqa: E402


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def convoy_cpu_ms(convoy, model, x_path, batch, runs, cache, directory):
    """CPU ms per inference of `convoy run` on one thread (see the module docstring)."""
    def run(repeat):
        before = children_cpu_seconds()
        cmd = [convoy, "run", f"--model={model}", f"--input={x_path}", f"--output_dir={directory}", "--threads=1",
               f"--max_batch_size={batch}", "--quiet", f"--repeat={repeat}"] + ([f"--cache={cache}"] if cache else [])
        subprocess.run(cmd, check=True, capture_output=True)
        return children_cpu_seconds() - before
    return (run(1 + runs) - run(1)) * 1e3 / runs


def process_cpu_ms(infer, runs):
    for _ in range(3):
        infer()
    start = time.process_time()
    for _ in range(runs):
        infer()
    return (time.process_time() - start) * 1e3 / runs


def ort_infer(model, x):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda: sess.run(None, {name: x})


def openvino_infer(model, x):
    import openvino as ov
    core = ov.Core()
    net = core.read_model(model)
    net.reshape(list(x.shape))
    compiled = core.compile_model(net, "CPU", {"INFERENCE_NUM_THREADS": 1, "NUM_STREAMS": 1,
                                               "PERFORMANCE_HINT": "LATENCY", "INFERENCE_PRECISION_HINT": "f32"})
    request = compiled.create_infer_request()
    return lambda: request.infer({0: x})


def parse_binaries(spec):
    """'PATH' or 'LABEL=PATH,...' -> [(label, path)]; a bare path is labelled 'convoy'."""
    return [tuple(e.split("=", 1)) if "=" in e else ("convoy", e) for e in spec.split(",") if e]


def parse_models(spec):
    """'NAME=PATH.onnx,...' -> [(name, path)]."""
    models = []
    for entry in spec.split(","):
        if not entry:
            continue
        if "=" not in entry:
            raise ValueError(f"--models entry {entry!r} is not NAME=PATH.onnx")
        models.append(tuple(entry.split("=", 1)))
    return models


def median_line(name, batch, times):
    """The summary line of one model and batch: each engine's median CPU ms and its ratio to onnxruntime's."""
    medians = {e: statistics.median(t) for e, t in times.items()}
    base = medians["onnxruntime"]
    return f"{name} batch {batch} median: " + ", ".join(
        f"{e} {m:.2f} ms ({m / base:.2f} of onnxruntime)" for e, m in medians.items())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", required=True, help="NAME=PATH.onnx,...")
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy", help="PATH or LABEL=PATH,...")
    ap.add_argument("--batches", default="1")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tune", action="store_true", help="tune each Convoy build on one thread first")
    ap.add_argument("--caches", default="", help="LABEL=FILE,...: the algorithm cache a --convoy label's plans load "
                    "(e.g. one binary under two labels, with and without a cache)")
    ap.add_argument("--skip_openvino", action="store_true")
    args = ap.parse_args()

    binaries = parse_binaries(args.convoy)
    models = parse_models(args.models)
    given_caches = dict(parse_binaries(args.caches))
    unknown = set(given_caches) - {label for label, _ in binaries}
    if unknown:
        ap.error(f"--caches names labels that --convoy does not: {', '.join(sorted(unknown))}")
    print(f"CPU: {cpu_model()}; onnxruntime {ort.__version__}; one thread per engine; CPU ms per inference; "
          f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, model in models:
            for batch in map(int, args.batches.split(",")):
                x = np.random.default_rng(1).uniform(-1, 1, (batch, 3, 224, 224)).astype(np.float32)
                x_path = os.path.join(tmp, f"x{batch}.npy")
                np.save(x_path, x)
                caches = {}
                for label, convoy in binaries:
                    caches[label] = given_caches.get(label)
                    if args.tune and caches[label] is None:
                        caches[label] = os.path.join(tmp, f"{name}.{label}.{batch}.cache")
                        subprocess.run([convoy, "tune", f"--model={model}", f"--batch_sizes={batch}",
                                        f"--cache={caches[label]}", "--threads=1", f"--max_batch_size={batch}",
                                        "--quiet"], check=True, capture_output=True)
                engines = {f"convoy[{label}]": (lambda c=convoy, k=caches[label], b=batch:
                                                convoy_cpu_ms(c, model, x_path, b, args.runs, k, tmp))
                           for label, convoy in binaries}
                infer = ort_infer(model, x)
                engines["onnxruntime"] = lambda: process_cpu_ms(infer, args.runs)
                if not args.skip_openvino:
                    ov_infer = openvino_infer(model, x)
                    engines["openvino_f32"] = lambda: process_cpu_ms(ov_infer, args.runs)
                times = {e: [] for e in engines}
                for r in range(args.rounds):
                    load = os.getloadavg()[0]
                    for engine, measure in engines.items():
                        times[engine].append(measure())
                    print(f"{name} batch {batch} round {r} load {load:.2f}: " +
                          ", ".join(f"{e} {t[-1]:.2f}" for e, t in times.items()))
                    sys.stdout.flush()
                print(median_line(name, batch, times))


if __name__ == "__main__":
    main()
