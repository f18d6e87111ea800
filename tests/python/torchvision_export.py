"""The torchvision models shared by the whole-model tests (test_torchvision_models.py: reference interpreter;
test_whole_models.py: the real CPU runtime), exported ONCE per pytest session.

`exported_models(tmp_path_factory)` runs tools/models/export_torchvision.py (Debian's torch, 64x64, the models in
MODELS) the first time it is called and returns the same directory of <name>.onnx files on every later call, so the
export (~1 minute on 2 cores) is paid once however many test modules use it. Each module wraps it in its own fixture.

Set CONVOY_TORCHVISION_MODELS="resnet18 mobilenet_v2" to export (and test) a subset.
"""
import os
import pathlib
import subprocess

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
ALL_MODELS = ["resnet18", "mobilenet_v2", "squeezenet1_1", "densenet121", "efficientnet_b0", "googlenet",
              "shufflenet_v2_x0_5", "mnasnet0_5", "regnet_y_400mf"]
MODELS = os.environ.get("CONVOY_TORCHVISION_MODELS", " ".join(ALL_MODELS)).split()
SIZE = 64
SYSTEM_PYTHON = "/usr/bin/python3"

_exported_dir = None


def exported_models(tmp_path_factory):
    """Directory holding <name>.onnx for every name in MODELS; exports on the first call of the session."""
    global _exported_dir
    if _exported_dir is None:
        out = tmp_path_factory.mktemp("torchvision")
        subprocess.run([SYSTEM_PYTHON, str(REPO_ROOT / "tools/models/export_torchvision.py"), "--out", str(out),
                        "--size", str(SIZE), "--models", *MODELS], check=True, capture_output=True, timeout=900)
        _exported_dir = out
    return _exported_dir
