#!/usr/bin/env python3
"""Exports torchvision's ConvNeXt-Tiny with random weights to ONNX, for the whole-model test that compares Convoy with
onnxruntime (tests/python/test_torchvision_convnext.py). Run with Debian's python (torch 1.13, torchvision 0.14):

  /usr/bin/python3 tools/models/export_torchvision_convnext.py --out /tmp/convnext --size 64

Writes <out>/convnext_tiny.onnx (opset 13, dynamic batch): input `images`, output `logits` [N, 10]. At opset 13 its
LayerNorms (over the channels of the NHWC-permuted blocks, and LayerNorm2d's channels-last LayerNorm between
permutes) export decomposed (ReduceMean, Sub, Pow, Sqrt, Div, Mul, Add), its Linear layers as MatMul of the
[N, H, W, C] tensor by the [C, 4C] weight plus an Add of the bias along the last axis, and GELU as its Erf form.
The layer scales (1e-6 at initialization, which would hide every block behind its residual) and the LayerNorms'
affine parameters are drawn at random, so each block's output matters.
"""

import torch
import torchvision

import export_torchvision

MODELS = {"convnext_tiny": dict(num_classes=10)}


def randomize_scales(model, seed):
    gen = torch.Generator().manual_seed(seed)
    for name, p in model.named_parameters():
        if name.endswith("layer_scale"):
            p.data = torch.rand(p.shape, generator=gen) * 0.5 + 0.25
    for m in model.modules():
        if isinstance(m, torch.nn.LayerNorm):
            m.weight.data = torch.rand(m.weight.shape, generator=gen) * 0.5 + 0.75
            m.bias.data = torch.randn(m.bias.shape, generator=gen) * 0.1


def export(name, out_dir, size, seed):
    return export_torchvision.export_randomized(lambda: getattr(torchvision.models, name)(**MODELS[name]),
                                                randomize_scales, name, out_dir, size, seed)


if __name__ == "__main__":
    export_torchvision.main(MODELS, export, __doc__)
