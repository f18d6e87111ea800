#!/usr/bin/env python3
"""Generates the sample models' weights from fixed seeds.

  tools/models/make_sample_models.py simple_cnn          # model_repo/simple_cnn/1/model.safetensors (committed)
  /usr/bin/python3 tools/models/make_sample_models.py resnet_classifier
                                                         # model_repo/resnet_classifier/1/model.onnx (needs torch)

simple_cnn needs only numpy. resnet_classifier is a width-reduced ResNet-18 (torchvision's BasicBlock layout, base
width 16, 224x224 input, 1000 classes) with random weights and non-trivial batch-norm statistics, exported with
torch.onnx (opset 13, dynamic batch); about 3 MB, so it is committed too.
"""
import argparse
import pathlib
import sys

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from safetensors_writer import save_safetensors  # noqa: E402


def make_simple_cnn(out_dir):
    rng = np.random.default_rng(20240601)

    def he(*shape):
        fan_in = int(np.prod(shape[1:]))
        return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)

    tensors = {
        "conv1.weight": he(32, 3, 3, 3), "conv1.bias": (rng.standard_normal(32) * 0.05).astype(np.float32),
        "conv2.weight": he(64, 32, 3, 3), "conv2.bias": (rng.standard_normal(64) * 0.05).astype(np.float32),
        "fc.weight": he(10, 64 * 8 * 8), "fc.bias": (rng.standard_normal(10) * 0.05).astype(np.float32),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    save_safetensors(out_dir / "model.safetensors", tensors, {"seed": 20240601})
    print(f"wrote {out_dir / 'model.safetensors'}")


def make_resnet_classifier(out_path, width=16, num_classes=1000):
    import torch
    from export_torchvision import randomize_batch_norm

    torch.manual_seed(20240601)
    model = _narrow_resnet18(width, num_classes)
    randomize_batch_norm(model, seed=7)
    model.eval()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    example = torch.randn(1, 3, 224, 224)
    torch.onnx.export(model, example, str(out_path), opset_version=13, input_names=["images"],
                      output_names=["logits"], dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}})
    print(f"wrote {out_path} ({out_path.stat().st_size} bytes)")


def _narrow_resnet18(width, num_classes):
    import torch.nn as nn
    from torchvision.models.resnet import BasicBlock

    class NarrowResNet18(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
            self.bn1 = nn.BatchNorm2d(width)
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.MaxPool2d(3, 2, 1)
            layers, in_ch = [], width
            for i, mult in enumerate([1, 2, 4, 8]):
                out_ch, stride = width * mult, (1 if i == 0 else 2)
                down = None
                if stride != 1 or in_ch != out_ch:
                    down = nn.Sequential(nn.Conv2d(in_ch, out_ch, 1, stride, bias=False), nn.BatchNorm2d(out_ch))
                layers.append(nn.Sequential(BasicBlock(in_ch, out_ch, stride, down), BasicBlock(out_ch, out_ch)))
                in_ch = out_ch
            self.layers = nn.Sequential(*layers)
            self.avgpool = nn.AdaptiveAvgPool2d(1)
            self.fc = nn.Linear(in_ch, num_classes)

        def forward(self, x):
            import torch
            x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
            return self.fc(torch.flatten(self.avgpool(self.layers(x)), 1))

    return NarrowResNet18()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="+", choices=["simple_cnn", "resnet_classifier"])
    parser.add_argument("--repo", type=pathlib.Path, default=REPO / "model_repo")
    args = parser.parse_args()
    for name in args.models:
        if name == "simple_cnn":
            make_simple_cnn(args.repo / "simple_cnn" / "1")
        else:
            make_resnet_classifier(args.repo / "resnet_classifier" / "1" / "model.onnx")


if __name__ == "__main__":
    main()
