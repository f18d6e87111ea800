#!/usr/bin/env python3
"""Exports torchvision's segmentation models with random weights (no pretrained download: weights_backbone=None)
and non-trivial batch-norm statistics to ONNX, for the whole-model tests that compare Convoy with onnxruntime. Run
with Debian's python (torch 1.13, torchvision 0.14):

  /usr/bin/python3 tools/models/export_torchvision_segmentation.py --out /tmp/seg --size 64 [--models ...]

Writes <out>/<model>.onnx (opset 13, dynamic batch): input `images`, output `logits` (the models' "out" map,
[N, classes, size, size]). Their bilinear upsamplings export as Resize with sizes computed from the input's shape.
"""

import torch
import torchvision

import export_torchvision
from export_torchvision import randomize_batch_norm

# name -> constructor kwargs (5 classes keep the files small; no auxiliary head).
MODELS = {
    "lraspp_mobilenet_v3_large": dict(num_classes=5, weights_backbone=None),
    "deeplabv3_mobilenet_v3_large": dict(num_classes=5, weights_backbone=None, aux_loss=False),
    "fcn_resnet50": dict(num_classes=5, weights_backbone=None, aux_loss=False),
}


class OutputMap(torch.nn.Module):
    """The segmentation model's "out" entry as the only output (torchvision returns a dict)."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x)["out"]


def export(name, out_dir, size, seed):
    return export_torchvision.export_randomized(
        lambda: OutputMap(getattr(torchvision.models.segmentation, name)(**MODELS[name])), randomize_batch_norm, name,
        out_dir, size, seed)


if __name__ == "__main__":
    export_torchvision.main(MODELS, export, __doc__)
