#!/usr/bin/env python3
"""Small PyTorch modules that pad the way real models do (F.pad in every mode, asymmetric and negative pads,
"same" padding of even kernels, TensorFlow-style "same" blocks with static and shape-computed padding), exported
to ONNX (opset 13, dynamic batch) with random weights, for tests/python/test_padded_exports.py. torch.onnx writes
each F.pad as an integer subgraph (ConstantOfShape, Concat, Reshape, Slice with a negative step, Transpose, Cast)
feeding Pad, and shape-computed padding as Shape -> Gather -> arithmetic: Convoy's importer must evaluate both at
load time. Run with Debian's python (torch 1.13):

  /usr/bin/python3 tools/models/export_padded_modules.py --out DIR [--modules constant_pad_conv ...] [--seed 0]

Writes DIR/<module>.onnx; the test computes the references with onnxruntime.
"""
import argparse
import math
import pathlib

import torch
import torch.nn.functional as F
from torch import nn

from torch_export import export_with_dynamic_batch


class ConstantPadConv(nn.Module):
    """F.pad with zeros, asymmetric (left 1, right 2, top 0, bottom 3): the bottom 3 exceed a 3x3 kernel's reach,
    so this Pad stays a Pad; the second (1, 1, 1, 0) folds into its conv."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 3)
        self.b = nn.Conv2d(8, 6, 3, stride=2)

    def forward(self, x):
        x = torch.relu(self.a(F.pad(x, [1, 2, 0, 3])))
        return self.b(F.pad(x, [1, 1, 1, 0]))


class ReflectAndEdgePads(nn.Module):
    """F.pad in reflect and replicate (ONNX edge) modes, and a constant pad of 0.5: none of them is a conv's zero
    padding, so all three stay Pad ops."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 6, 5)
        self.b = nn.Conv2d(6, 6, 3, groups=6)
        self.c = nn.Conv2d(6, 4, 3)

    def forward(self, x):
        x = torch.relu(self.a(F.pad(x, [2, 2, 1, 3], mode="reflect")))
        x = torch.relu(self.b(F.pad(x, [1, 0, 2, 1], mode="replicate")))
        return self.c(F.pad(x, [1, 1, 1, 1], value=0.5))


class SamePaddingEvenKernels(nn.Module):
    """"Same" padding of even and dilated kernels, written as timm's Conv2dSame does it (PyTorch 1.13's exporter
    refuses nn.Conv2d(padding='same'), aten::_convolution_mode): F.pad with the extra row/column on the end side,
    then an unpadded conv. Pads (1, 2) for a 4-wide kernel, (1, 1) / (2, 2) for (2, 3) dilated by 2."""

    def __init__(self):
        super().__init__()
        self.a = nn.Conv2d(3, 8, 4)
        self.b = nn.Conv2d(8, 8, (2, 3), dilation=2)
        self.c = nn.Conv2d(8, 5, 3)

    @staticmethod
    def same(x, conv):
        (kh, kw), (dh, dw) = conv.kernel_size, conv.dilation
        th, tw = (kh - 1) * dh, (kw - 1) * dw
        return F.pad(x, [tw // 2, tw - tw // 2, th // 2, th - th // 2])

    def forward(self, x):
        x = torch.relu(self.a(self.same(x, self.a)))
        x = torch.relu(self.b(self.same(x, self.b)))
        return self.c(self.same(x, self.c))


def tf_same_pads(size, kernel, stride, dilation=1):
    """TensorFlow "same": output ceil(size / stride), the odd padding element at the end."""
    out = math.ceil(size / stride)
    total = max((out - 1) * stride + (kernel - 1) * dilation + 1 - size, 0)
    return total // 2, total - total // 2


class TfSameStaticBlock(nn.Module):
    """EfficientNet-PyTorch's Conv2dStaticSamePadding / MaxPool2dStaticSamePadding: nn.ZeroPad2d computed from the
    image size, then a strided conv (folds) and a max pool (a zero pad is not a pool's padding: stays)."""

    def __init__(self, height, width):
        super().__init__()
        t, b = tf_same_pads(height, 3, 2)
        l, r = tf_same_pads(width, 3, 2)
        self.pad_conv = nn.ZeroPad2d((l, r, t, b))
        self.conv = nn.Conv2d(3, 8, 3, stride=2)
        h2, w2 = math.ceil(height / 2), math.ceil(width / 2)
        t, b = tf_same_pads(h2, 3, 2)
        l, r = tf_same_pads(w2, 3, 2)
        self.pad_pool = nn.ZeroPad2d((l, r, t, b))
        self.dw = nn.Conv2d(8, 8, 5, groups=8)
        t, b = tf_same_pads(math.ceil(h2 / 2), 5, 1)
        l, r = tf_same_pads(math.ceil(w2 / 2), 5, 1)
        self.pad_dw = nn.ZeroPad2d((l, r, t, b))

    def forward(self, x):
        x = torch.clamp(self.conv(self.pad_conv(x)), 0, 6)
        x = F.max_pool2d(self.pad_pool(x), 3, 2)
        return torch.clamp(self.dw(self.pad_dw(x)), 0, 6)


class TfSameDynamicBlock(nn.Module):
    """EfficientNet-PyTorch's Conv2dDynamicSamePadding: the pads are computed from x.shape in the forward pass, so
    the export holds Shape -> Gather -> Sub/Mul/Add/Div/Max arithmetic on int64 feeding the Pad."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, stride=2)

    def forward(self, x):
        ih, iw = x.shape[-2], x.shape[-1]
        oh = torch.div(ih + 1, 2, rounding_mode="floor")  # ceil(ih / 2)
        ow = torch.div(iw + 1, 2, rounding_mode="floor")
        pad_h = torch.clamp((oh - 1) * 2 + 3 - ih, min=0)
        pad_w = torch.clamp((ow - 1) * 2 + 3 - iw, min=0)
        top = torch.div(pad_h, 2, rounding_mode="floor")
        left = torch.div(pad_w, 2, rounding_mode="floor")
        x = F.pad(x, [left, pad_w - left, top, pad_h - top])
        return self.conv(x)


class CropAndFlattenHead(nn.Module):
    """Negative F.pad (a crop) and a classifier head flattened with x.view(x.size(0), -1): the shape subgraph carries
    the dynamic batch through Shape -> Gather -> Unsqueeze -> Concat -> Reshape."""

    def __init__(self, height, width):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.fc = nn.Linear(4 * (height - 1) * (width - 1), 10)  # the pad below: H + 1 - 2, W - 1

    def forward(self, x):
        x = F.pad(torch.relu(self.conv(x)), [-1, 0, 1, -2])  # W: crop 1 left; H: 1 zero row on top, crop 2 at the bottom
        return self.fc(x.view(x.size(0), -1))


HEIGHT, WIDTH = 17, 22
MODULES = {
    "constant_pad_conv": ConstantPadConv,
    "reflect_and_edge_pads": ReflectAndEdgePads,
    "same_padding_even_kernels": SamePaddingEvenKernels,
    "tf_same_static_block": lambda: TfSameStaticBlock(HEIGHT, WIDTH),
    "tf_same_dynamic_block": TfSameDynamicBlock,
    "crop_and_flatten_head": lambda: CropAndFlattenHead(HEIGHT, WIDTH),
}


def export(name, out_dir, seed):
    torch.manual_seed(seed)
    model = MODULES[name]().eval()
    path = out_dir / f"{name}.onnx"
    export_with_dynamic_batch(model, torch.randn(2, 3, HEIGHT, WIDTH), path, "x", ["y"])
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--modules", nargs="*", default=list(MODULES), choices=list(MODULES))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.modules:
        print(export(name, args.out, args.seed))


if __name__ == "__main__":
    main()
