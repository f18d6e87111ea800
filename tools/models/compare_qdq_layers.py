"""Compares a QDQ model's activations layer by layer between Convoy and onnxruntime.

Every QuantizeLinear -> DequantizeLinear pair on an activation is exposed as a graph output: onnxruntime's copy of the
model outputs the QuantizeLinear's 8-bit tensor (its optimizations still fuse the QDQ patterns into QLinearConv,
QLinearAdd, ...; the script checks that the model's own outputs do not change), Convoy's copy the DequantizeLinear's
FP32 tensor (its INT8 steps still fold; `convoy run` logs how many), which the script quantizes back with the same
scale and zero point. For each pair, in graph order, it prints what produces the quantized tensor and the fraction of
elements that are identical and within one step, and the largest difference in steps: the first layer that differs is
where the two engines' arithmetic parts.

  python tools/models/compare_qdq_layers.py --model=resnet18_qdq.onnx --convoy=bazel-bin/server/tools/convoy \
      [--batch=8] [--size=64] [--seed=0] [--convoy_flag=--layout=nhwc ...]
"""
import argparse
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper


def activation_pairs(model):
    """(QuantizeLinear, DequantizeLinear, producer op type) for each quantized activation, in graph order."""
    initializers = {i.name for i in model.graph.initializer}
    consumers, producers = {}, {}
    for node in model.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
        for name in node.output:
            producers[name] = node
    pairs = []
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or node.input[0] in initializers:
            continue
        dq = [c for c in consumers.get(node.output[0], []) if c.op_type == "DequantizeLinear"]
        if dq:
            producer = producers.get(node.input[0])
            pairs.append((node, dq[0], producer.op_type if producer is not None else "input"))
    return pairs


def quantization(model, q_node):
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    scale = float(values[q_node.input[1]])
    zero_point = values[q_node.input[2]] if len(q_node.input) > 2 else np.uint8(0)
    return scale, int(zero_point), zero_point.dtype


def with_outputs(model, names_and_types):
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    existing = {o.name for o in copy.graph.output}
    for name, elem_type in names_and_types:
        if name not in existing:
            copy.graph.output.append(helper.make_tensor_value_info(name, elem_type, None))
    return copy


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--convoy", required=True, help="the convoy CLI binary")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--convoy_flag", action="append", default=[])
    args = parser.parse_args()

    model = onnx.load(args.model)
    pairs = activation_pairs(model)
    input_name = model.graph.input[0].name
    x = np.random.default_rng(args.seed).uniform(-1, 1, size=(args.batch, 3, args.size, args.size)).astype(np.float32)
    model_outputs = [o.name for o in model.graph.output]

    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        # onnxruntime: the QuantizeLinear outputs.
        elem = {np.dtype(np.uint8): onnx.TensorProto.UINT8, np.dtype(np.int8): onnx.TensorProto.INT8}
        ort_model = with_outputs(model, [(q.output[0], elem[quantization(model, q)[2]]) for q, _, _ in pairs])
        onnx.save(ort_model, tmp / "ort.onnx")
        session = ort.InferenceSession(str(tmp / "ort.onnx"), providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        ort_values = dict(zip(names, session.run(None, {input_name: x})))
        plain = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"]).run(None, {input_name: x})
        for name, value in zip(model_outputs, plain):
            same = np.array_equal(value, ort_values[name])
            print(f"onnxruntime's '{name}' with the activations exposed: {'unchanged' if same else 'CHANGED'}")

        # Convoy: the DequantizeLinear outputs.
        convoy_model = with_outputs(model, [(dq.output[0], onnx.TensorProto.FLOAT) for _, dq, _ in pairs])
        onnx.save(convoy_model, tmp / "convoy.onnx")
        np.save(tmp / "x.npy", x)
        (tmp / "out").mkdir()
        proc = subprocess.run([args.convoy, "run", f"--model={tmp / 'convoy.onnx'}", f"--input={tmp / 'x.npy'}",
                               f"--output_dir={tmp / 'out'}", f"--max_batch_size={args.batch}", *args.convoy_flag],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(proc.stderr[-3000:])
        for line in proc.stderr.splitlines():
            if "run INT8" in line:
                print("convoy:", line.strip())
        convoy_names = [o.name for o in convoy_model.graph.output]
        convoy_values = {name: np.load(tmp / "out" / f"{i}.npy") for i, name in enumerate(convoy_names)}

    print(f"{'#':>3} {'producer':<20} {'tensor':<48} {'identical':>9} {'within 1':>9} {'max':>5}")
    for index, (q, dq, producer) in enumerate(pairs):
        scale, zero_point, _ = quantization(model, q)
        expected = ort_values[q.output[0]].astype(np.int32)
        actual = np.rint(convoy_values[dq.output[0]].astype(np.float64) / scale).astype(np.int32) + zero_point
        diff = np.abs(actual - expected.reshape(actual.shape))
        print(f"{index:>3} {producer:<20} {q.output[0][:48]:<48} {np.mean(diff == 0):>9.5f} {np.mean(diff <= 1):>9.5f} "
              f"{diff.max():>5}")
    for name in model_outputs:
        print(f"output '{name}': max |convoy - onnxruntime| = "
              f"{np.abs(convoy_values[name] - ort_values[name]).max():.4g}")


if __name__ == "__main__":
    main()
