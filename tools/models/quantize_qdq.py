#!/usr/bin/env python3
"""Quantizes an FP32 ONNX model with onnxruntime's own static quantizer into the QDQ form exporters write
(QuantizeLinear -> DequantizeLinear around every quantized op, INT8 weights with per-channel scales, UINT8
activations, INT32 biases), calibrated by min-max on a few seeded random inputs; `--format qoperator` writes the
QOperator form instead (QLinearConv, QLinearAdd, QLinearGlobalAveragePool, QGemm nodes on 8-bit tensors). Run with the
project's venv (onnxruntime, onnx, numpy):

  .venv/bin/python tools/models/quantize_qdq.py --model resnet18.onnx --out resnet18_qdq.onnx [--size 64]

The whole-model tests (tests/python/test_quantized_models.py) and bench/onnxruntime_compare.py use it.
"""
import argparse
import pathlib
import tempfile

import numpy as np
import onnx
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
from onnxruntime.quantization.shape_inference import quant_pre_process


class RandomImages(CalibrationDataReader):
    """`count` batches of one image each, uniform in [-1, 1] (the range the whole-model tests feed)."""

    def __init__(self, input_name, shape, count, seed):
        rng = np.random.default_rng(seed)
        self._batches = iter([{input_name: rng.uniform(-1, 1, size=shape).astype(np.float32)} for _ in range(count)])

    def get_next(self):
        return next(self._batches, None)


def quantize(model_path, out_path, size=64, calibration_count=8, seed=0, quant_format="qdq"):
    """onnxruntime's quantize_static of model_path into out_path: QDQ form (quant_format "qdq") or QOperator form
    ("qoperator": QLinearConv, QLinearAdd, QGemm, ... nodes)."""
    model = onnx.load(str(model_path))
    graph_input = model.graph.input[0]
    channels = graph_input.type.tensor_type.shape.dim[1].dim_value
    with tempfile.TemporaryDirectory() as tmp:
        # onnxruntime's recommended pre-processing (shape inference, graph optimization) before quantization.
        prepared = pathlib.Path(tmp) / "prepared.onnx"
        quant_pre_process(str(model_path), str(prepared), skip_symbolic_shape=True)
        reader = RandomImages(graph_input.name, (1, channels, size, size), calibration_count, seed)
        formats = {"qdq": QuantFormat.QDQ, "qoperator": QuantFormat.QOperator}
        quantize_static(str(prepared), str(out_path), reader, quant_format=formats[quant_format], per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return out_path


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, type=pathlib.Path)
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--size", type=int, default=64, help="calibration image height and width")
    parser.add_argument("--calibration-count", type=int, default=8)
    parser.add_argument("--format", choices=["qdq", "qoperator"], default="qdq")
    args = parser.parse_args()
    print(quantize(args.model, args.out, args.size, args.calibration_count, quant_format=args.format))


if __name__ == "__main__":
    main()
