#!/usr/bin/env python3
"""ConvNeXt-Tiny (torchvision, random weights, 224x224) on Convoy's CPU backend against onnxruntime, side by side in
one run: each round times every engine once (alternating, seconds apart), and the median of the rounds is printed
with the CPU's name and the 1-minute load average (the machine may be shared).

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

import onnxruntime_compare as compare

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--convoy", action="append", required=True, help="LABEL=PATH of a convoy binary")
    parser.add_argument("--batches", default="1")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    binaries = [spec.split("=", 1) for spec in args.convoy]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["/usr/bin/python3", os.path.join(REPO_ROOT, "tools/models/export_torchvision_convnext.py"),
                        "--out", tmp, "--size", "224"], check=True, capture_output=True)
        model = os.path.join(tmp, "convnext_tiny.onnx")
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
                    times[label].append(compare.time_convoy_model(path, model, cache, batch, args.reps, tmp))
                times["onnxruntime"].append(compare.time_ort_session(session, (batch, 3, 224, 224), args.reps))
                loads.append(compare.load_average())
            ort_ms = statistics.median(times["onnxruntime"])
            print(f"convnext_tiny batch {batch} (load average {min(loads):.1f}-{max(loads):.1f}):")
            for label, series in times.items():
                ms = statistics.median(series)
                print(f"  {label:>24}: {ms:9.2f} ms  ({ms / ort_ms:.2f}x onnxruntime)")


if __name__ == "__main__":
    sys.exit(main())
