"""Whole-model tests: torchvision architectures with random weights (tools/models/export_torchvision.py, run with
Debian's torch) imported and optimized by Convoy and evaluated by its reference interpreter must match onnxruntime
within 1e-4 relative error (max |diff| / max |ref|), batch 2, 64x64 inputs. Fresh random inputs each run.

The export (shared with test_whole_models.py through torchvision_export.py, so it runs once per session) takes a minute
or so on 2 cores; set CONVOY_TORCHVISION_MODELS="resnet18 mobilenet_v2" to run a subset.
"""
import pathlib
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from reference_engine import inspect_model, relative_error, run_model
from torchvision_export import MODELS, exported_models


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return exported_models(tmp_path_factory)


@pytest.mark.parametrize("name", MODELS)
def test_matches_onnxruntime(exported, name):
    path = pathlib.Path(exported) / f"{name}.onnx"
    x = np.random.default_rng().uniform(-1, 1, size=(2, 3, 64, 64)).astype(np.float32)
    expected = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"images": x})[0]
    actual = run_model(path, {"images": x})[0]
    assert actual.shape == expected.shape
    err = relative_error(actual, expected)
    assert err <= 1e-4, f"{name}: relative error {err}"
    rc, text = inspect_model(path)
    assert rc == 0, text
    # Every BatchNormalization that follows a Conv is folded into it; only those reading another op's output
    # (densenet's BNs after a Concat) remain, and no remaining one reads a Conv.
    remaining = remaining_batch_norm_inputs(text)
    assert "Conv2d" not in remaining, f"{name}: a BatchNorm after a Conv was not folded: {remaining}"
    assert len(remaining) == unfoldable_batch_norms(path), (name, remaining)


def remaining_batch_norm_inputs(inspect_text):
    """The op producing the input of each BatchNorm node left in the optimized graph `convoy inspect` prints."""
    producer, inputs = {}, []
    for line in inspect_text.split("optimizations:")[0].splitlines():
        m = re.match(r"\s*node\s+\S+ = (\w+)\((.*?)\).* -> (\S+?)\[", line)
        if m:
            op, args, out = m.groups()
            producer[out] = op
            if op == "BatchNorm":
                inputs.append(args.split(",")[0].strip())
    return [producer.get(i, "graph input") for i in inputs]


def unfoldable_batch_norms(path):
    """BatchNormalization nodes of the ONNX file whose input is not produced by a Conv."""
    graph = onnx.load(str(path)).graph
    producer = {out: node.op_type for node in graph.node for out in node.output}
    return sum(1 for node in graph.node if node.op_type == "BatchNormalization" and producer.get(node.input[0]) != "Conv")
