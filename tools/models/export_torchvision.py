#!/usr/bin/env python3
"""Exports torchvision-shaped models with random weights (and non-trivial batch-norm statistics) to ONNX, for the
whole-model tests that compare Convoy with onnxruntime. Run with Debian's python (torch 1.13, torchvision 0.14):

  /usr/bin/python3 tools/models/export_torchvision.py --out /tmp/tv --size 64 [--models resnet18 mobilenet_v2 ...]

Writes <out>/<model>.onnx (opset 13, dynamic batch). The reference outputs are computed by the test with
onnxruntime (in .venv), not here, so this script needs no onnxruntime.
"""
import argparse
import pathlib

import torch
import torchvision

from torch_export import export_with_dynamic_batch

# name -> constructor kwargs; small class counts keep the files small.
MODELS = {
    "resnet18": dict(num_classes=10),
    "mobilenet_v2": dict(num_classes=10),
    "squeezenet1_1": dict(num_classes=10),
    "densenet121": dict(num_classes=10),
    "efficientnet_b0": dict(num_classes=10),
    "googlenet": dict(num_classes=10, aux_logits=False, init_weights=True),
    "shufflenet_v2_x0_5": dict(num_classes=10),
    "mnasnet0_5": dict(num_classes=10),
    "regnet_y_400mf": dict(num_classes=10),
}


def randomize_batch_norm(model, seed):
    """Random affine parameters and running statistics, so folding batch norm is a real test (also used by
    make_sample_models.py for the sample ResNet)."""
    gen = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = torch.rand(c, generator=gen) * 0.5 + 0.75
            m.bias.data = torch.randn(c, generator=gen) * 0.1
            m.running_mean = torch.randn(c, generator=gen) * 0.1
            m.running_var = torch.rand(c, generator=gen) * 0.5 + 0.75


def export_randomized(build, randomize, name, out_dir, size, seed):
    """Builds a model with `build()` after seeding torch with `seed`, draws its parameters with
    `randomize(model, seed)` and writes <out_dir>/<name>.onnx with input `images` and output `logits`."""
    torch.manual_seed(seed)
    model = build()
    randomize(model, seed)
    model.eval()
    path = out_dir / f"{name}.onnx"
    export_with_dynamic_batch(model, torch.randn(1, 3, size, size), path, "images", ["logits"])
    return path


def export(name, out_dir, size, seed):
    return export_randomized(lambda: getattr(torchvision.models, name)(**MODELS[name]), randomize_batch_norm, name,
                             out_dir, size, seed)


def main(models=None, export_model=None, description=__doc__):
    """The command line: exports `models` (name -> constructor arguments) with `export_model(name, out, size, seed)`;
    tools/models/export_torchvision_segmentation.py runs it with its own."""
    models = MODELS if models is None else models
    export_model = export if export_model is None else export_model
    parser = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--size", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--models", nargs="*", default=list(models))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.models:
        print(export_model(name, args.out, args.size, args.seed))


if __name__ == "__main__":
    main()
