#!/usr/bin/env python3
"""How closely Convoy's and OpenVINO's INT8 runs of a QDQ file reproduce onnxruntime's, logit by logit.

Each engine runs the same QDQ file (e.g. the ones bench/onnxruntime_compare.py --precisions=int8 writes) on the same
random images; onnxruntime's INT8 output is the reference. Printed per engine: the logits identical to onnxruntime's,
those within one quantization step (the smallest gap between distinct onnxruntime logits), the largest distance in
steps, and the top-1 agreement. Convoy computes onnxruntime's integer arithmetic (docs/model_formats.md, "Quantized
models"); OpenVINO's post-op chains round in their own order, so a speed comparison with it compares engines that do
not compute the same numbers.

  .venv/bin/python bench/int8_peer_agreement.py --convoy=bazel-bin/server/tools/convoy resnet50_qdq.onnx mobilenetv2_qdq.onnx
  # and Convoy with a residual add rounded once (a further row):
  .venv/bin/python bench/int8_peer_agreement.py --convoy_options=int8_residual_add=single_rounding resnet50_qdq.onnx
"""
import argparse
import os
import subprocess
import tempfile

import numpy as np
import onnxruntime as ort

try:
    import openvino as ov
except ImportError:
    ov = None


def convoy_run(convoy, model, x, threads, options=()):
    with tempfile.TemporaryDirectory() as tmp:
        np.save(os.path.join(tmp, "x.npy"), x)
        subprocess.run([convoy, "run", f"--model={model}", f"--input={os.path.join(tmp, 'x.npy')}",
                        f"--output_dir={tmp}", f"--max_batch_size={len(x)}", f"--threads={threads}", "--quiet",
                        *options], check=True, capture_output=True)
        return np.load(os.path.join(tmp, "0.npy"))  # --output_dir writes output i to i.npy


def openvino_run(model, x, threads):
    core = ov.Core()
    net = core.read_model(model)
    net.reshape(list(x.shape))
    compiled = core.compile_model(net, "CPU", {"INFERENCE_NUM_THREADS": threads, "NUM_STREAMS": 1,
                                               "PERFORMANCE_HINT": "LATENCY"})
    return compiled.create_infer_request().infer({0: x})[0]  # the first output


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("models", nargs="+", help="QDQ ONNX files with one [N, 3, H, W] input")
    ap.add_argument("--convoy", default="bazel-bin/server/tools/convoy")
    ap.add_argument("--images", type=int, default=8)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--convoy_options", default="",
                    help="OPTION=VALUE,...: Convoy again with each of these CLI options, a row each "
                         "(e.g. int8_residual_add=single_rounding)")
    args = ap.parse_args()
    print(f"onnxruntime {ort.__version__}; openvino {ov.__version__ if ov is not None else '(not installed)'}")
    for model in args.models:
        x = np.random.default_rng().uniform(-1, 1, (args.images, 3, args.size, args.size)).astype(np.float32)
        session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
        output = session.get_outputs()[0].name
        want = session.run([output], {session.get_inputs()[0].name: x})[0]
        engines = {"convoy": convoy_run(args.convoy, model, x, args.threads)}
        for option in filter(None, args.convoy_options.split(",")):
            engines[f"convoy[{option}]"] = convoy_run(args.convoy, model, x, args.threads, [f"--{option}"])
        if ov is not None:
            engines["openvino"] = openvino_run(model, x, args.threads)
        for engine, got in engines.items():
            print(f"{os.path.basename(model)} {engine} vs onnxruntime ({output}): {int((got == want).sum())} of "
                  f"{want.size} values identical, largest difference {np.abs(got - want).max():.4g} (values span "
                  f"{want.min():.4g} to {want.max():.4g}); top-1 agrees on "
                  f"{int((got.argmax(1) == want.argmax(1)).sum())} of {len(x)} images")


if __name__ == "__main__":
    main()
