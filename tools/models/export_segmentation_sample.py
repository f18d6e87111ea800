#!/usr/bin/env python3
"""The sample segmentation model model_repo/lraspp_mobilenet_v3: torchvision's LR-ASPP MobileNetV3-Large with PASCAL
VOC's 21 classes and RANDOM weights (no PyPI package ships pretrained segmentation weights, and nothing is downloaded).
It shows how a dense-prediction model is served (a photo in, a per-pixel class map out, drawn by tools/segment.py),
not what a trained model sees: its masks are patterns of the photo's texture, not objects. tools/setup.sh runs it
with Debian's torch (python3-torch):

  /usr/bin/python3 tools/models/export_segmentation_sample.py --out model_repo/lraspp_mobilenet_v3

Writes <out>/1/model.onnx (opset 13, dynamic batch; input `images` [N, 3, SIZE, SIZE] normalised RGB, output
`classes` [N, 21, SIZE, SIZE] scores) and <out>/labels.txt (one VOC class per line). The weights are drawn from a
fixed seed, so every machine generates the same file.
"""
import argparse
import pathlib

import torch
import torchvision

from export_torchvision import randomize_batch_norm
from export_torchvision_segmentation import OutputMap
from torch_export import export_with_dynamic_batch

SIZE = 320  # model_repo/lraspp_mobilenet_v3/config.yaml's input dims
SEED = 2024
VOC_CLASSES = ["background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat", "chair", "cow",
               "diningtable", "dog", "horse", "motorbike", "person", "pottedplant", "sheep", "sofa", "train",
               "tvmonitor"]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=pathlib.Path, required=True, help="the model folder")
    args = parser.parse_args()
    torch.manual_seed(SEED)
    model = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
        num_classes=len(VOC_CLASSES), weights=None, weights_backbone=None)
    randomize_batch_norm(model, SEED)
    model = OutputMap(model).eval()
    (args.out / "1").mkdir(parents=True, exist_ok=True)
    export_with_dynamic_batch(model, torch.randn(1, 3, SIZE, SIZE), args.out / "1" / "model.onnx", "images",
                              ["classes"])
    (args.out / "labels.txt").write_text("\n".join(VOC_CLASSES) + "\n")
    print(f"wrote {args.out / '1' / 'model.onnx'} and {args.out / 'labels.txt'}")


if __name__ == "__main__":
    main()
