"""The one torch.onnx.export call of the export scripts in tools/models/: opset 13, dimension 0 of the input and of
every output named "batch" (the dynamic batch Convoy's importer maps to the server's batch dimension). Runs with
Debian's torch (/usr/bin/python3)."""
import torch

OPSET = 13


def export_with_dynamic_batch(model, example, path, input_name, output_names):
    """Exports `model` (eval mode) traced on `example` to `path`."""
    with torch.no_grad():
        torch.onnx.export(model, example, str(path), opset_version=OPSET, input_names=[input_name],
                          output_names=list(output_names),
                          dynamic_axes={name: {0: "batch"} for name in [input_name, *output_names]})
