"""`convoy calibrate` and `precision: int8` end to end (server/tools/model_calibration.h,
server/runtime/calibrated_quantization.h, docs/model_config.md "Quantizing a model").

- Photos given to `convoy calibrate --images` are prepared exactly as the server prepares an encoded-image input of
  the model: the table made from the photos equals, byte for byte, the table made from the pixels `convoy image`
  writes for them (min-max, so every value counts).
- `convoy run --precision=int8` with that table runs the convolutions and residual adds as INT8 steps (`convoy
  inspect` lists each with its scales), with UINT8 asymmetric or (`--activations=int8`) INT8 symmetric activations; a
  missing table, a malformed one and one made for another model fail with the file and the entry named.
- ResNet's relu(conv + x) (torchvision ResNet-18): every convolution and residual add INT8, the ReLU as the add's
  UINT8 saturation.
- The server: a model whose config says `precision: int8` with its table beside the model file serves INT8 answers
  close to the FP32 model's; the same model without a table and with a broken one is UNAVAILABLE with the reason
  while the others serve.
- Accuracy, a small version of bench/int8_accuracy.py (the full run's table is in docs/performance.md): the pretrained
  EfficientNet-Lite0 calibrated by `convoy calibrate` (entropy) on 32 crops of some photos, judged on 128 crops of
  other photos against FP32; beside it onnxruntime's quantize_static INT8 calibrated on the same crops and Convoy
  running onnxruntime's QDQ file. Bars (the issue's): Convoy's top-1 agreement on confident crops (FP32 top-1
  probability >= 0.5) at least 0.97, over all crops no worse than onnxruntime's; Convoy on onnxruntime's QDQ file
  agrees with FP32 as well as onnxruntime does, to within one crop in 64.
"""
import pathlib
import re
import shutil
import sys
import time

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conftest import ConvoyServer, make_repository, pretrained_model_dir, sample_photo
from test_cli import cli_path, convoy

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
RNG = np.random.default_rng()


def calibrate(*args, check=True):
    return convoy("calibrate", *args, "--threads=2", check=check)


def test_photos_are_prepared_as_the_server_prepares_them(tmp_path):
    model = pretrained_model_dir()
    photos = [sample_photo(name) for name in ("chelsea", "coffee", "astronaut")]
    calibrate(f"--model={model}", f"--images={','.join(map(str, photos))}", "--method=minmax",
              f"--output={tmp_path / 'from_photos.yaml'}")
    pixels = []
    for i, photo in enumerate(photos):
        convoy("image", f"--image={photo}", "--height=224", "--width=224", "--crop_fraction=0.875",
               f"--output={tmp_path / f'p{i}.npy'}")
        pixels.append(np.load(tmp_path / f"p{i}.npy"))
    np.save(tmp_path / "pixels.npy", np.concatenate(pixels))
    proc = calibrate(f"--model={model}", f"--inputs={tmp_path / 'pixels.npy'}", "--method=minmax",
                     f"--output={tmp_path / 'from_pixels.yaml'}")
    assert "wrote" in proc.stdout and "(minmax, 3 samples)" in proc.stdout, proc.stdout
    assert re.search(r"calibrate: 3 of 3 samples in [0-9.]+ s", proc.stderr), proc.stderr
    from_photos = (tmp_path / "from_photos.yaml").read_text()
    assert from_photos == (tmp_path / "from_pixels.yaml").read_text()
    # Every convolution and residual add of EfficientNet-Lite0 can run INT8: 49 convolutions, 9 residual adds, and
    # the classifier's pool and Gemm.
    assert from_photos.count("{precision: int8, add: true}") == 9
    assert len(re.findall(r"\{precision: int8, weight_scales: \[", from_photos)) == 49
    assert from_photos.count("{precision: int8, op: global_average_pool}") == 1
    assert len(re.findall(r"\{precision: int8, op: gemm, weight_scales: \[", from_photos)) == 1


@pytest.fixture(scope="module")
def entropy_table(tmp_path_factory):
    """A table of the sample model from 8 random photo-like crops (the bench's crop machinery)."""
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import int8_accuracy
    model = pretrained_model_dir()
    out = tmp_path_factory.mktemp("table")
    np.save(out / "x.npy", int8_accuracy.normalise(int8_accuracy.photo_crops(["astronaut", "rocket"], 8, seed=7)))
    calibrate(f"--model={model / '1/model.onnx'}", f"--inputs={out / 'x.npy'}", "--method=entropy",
              f"--output={out / 'calibration.yaml'}")
    return out / "calibration.yaml"


def test_precision_int8_runs_int8_steps_and_inspect_lists_scales(entropy_table, tmp_path):
    model = pretrained_model_dir() / "1/model.onnx"
    proc = convoy("inspect", f"--model={model}", "--precision=int8", f"--calibration_table={entropy_table}",
                  "--threads=2")
    assert ("49 of 49 convolutions, 9 of 9 residual adds and 2 of 2 classifier pool / Gemm layers quantized"
            in proc.stderr), proc.stderr
    assert "== precision int8: convolutions, residual adds, classifier pool and Gemm" in proc.stdout
    assert re.search(r"/model/_avg_pooling/GlobalAveragePool: INT8 in UINT8 .* as a depthwise convolution with unit "
                     r"weights", proc.stdout), proc.stdout[-3000:]
    assert re.search(r"/model/_fc/Gemm: INT8 in UINT8 scale [0-9.e-]+ zero point \d+, out FP32, weights INT8 per "
                     r"channel \(1000 scales", proc.stdout), proc.stdout[-3000:]
    assert re.search(r"/model/_conv_stem/Conv: INT8 in UINT8 scale [0-9.e-]+ zero point \d+, out UINT8 scale "
                     r"[0-9.e-]+ zero point 0, weights INT8 per channel \(32 scales", proc.stdout), proc.stdout[:3000]
    assert re.search(r"quantization: 49 of 49 quantized convolutions and 9 of 9 quantized adds run INT8, and 2 of 2 "
                     r"quantized pooling and Gemm layers", proc.stdout), proc.stdout[-3000:]
    # Two crops of the cat photo: INT8 logits close to FP32's.
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import int8_accuracy
    x = int8_accuracy.normalise(int8_accuracy.photo_crops(["chelsea"], 2, seed=3))
    np.save(tmp_path / "x.npy", x)
    (tmp_path / "fp32").mkdir()
    (tmp_path / "int8").mkdir()
    convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'fp32'}",
           "--max_batch_size=2")
    convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'int8'}",
           "--max_batch_size=2", "--precision=int8", f"--calibration_table={entropy_table}")
    fp32, int8 = np.load(tmp_path / "fp32/0.npy"), np.load(tmp_path / "int8/0.npy")
    # A cat either way: INT8's top class is among FP32's top 5 (two cat classes can swap on a crop FP32 is unsure of).
    for f, i in zip(fp32, int8):
        assert i.argmax() in np.argsort(-f)[:5], (np.argsort(-f)[:5], i.argmax())
    assert np.abs(int8 - fp32).max() <= 0.25 * np.abs(fp32).max()


def test_missing_malformed_and_foreign_tables_fail_naming_file_and_entry(entropy_table, tmp_path):
    model = pretrained_model_dir() / "1/model.onnx"
    np.save(tmp_path / "x.npy", RNG.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32))
    run = ["run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path}", "--quiet",
           "--precision=int8"]
    missing = tmp_path / "nowhere.yaml"
    proc = convoy(*run, f"--calibration_table={missing}", check=False)
    assert proc.returncode == 1
    assert f"precision int8 needs a calibration table, and {missing} does not exist" in proc.stderr, proc.stderr
    assert "convoy calibrate --model=" in proc.stderr
    text = entropy_table.read_text()
    broken = tmp_path / "broken.yaml"
    broken.write_text(re.sub(r'("images": \{[^}]*scale: )[0-9.e-]+', r"\g<1>-1", text, count=1))
    proc = convoy(*run, f"--calibration_table={broken}", check=False)
    assert proc.returncode == 1
    line = next(i for i, l in enumerate(broken.read_text().splitlines(), 1) if l.startswith('  "images"'))
    assert re.search(rf"{re.escape(str(broken))}:{line}:\d+: tensors\['images'\]\.scale: must be positive and "
                     r"finite, got -1", proc.stderr), proc.stderr
    foreign = tmp_path / "foreign.yaml"
    foreign.write_text(text.replace('"/model/_blocks.1/_swish/Clip_output_0"', '"/other/tensor"', 1))
    proc = convoy(*run, f"--calibration_table={foreign}", check=False)
    assert proc.returncode == 1
    assert "tensors['/other/tensor']: the model has no tensor of that name" in proc.stderr, proc.stderr
    proc = calibrate(f"--model={model}", f"--inputs={tmp_path / 'x.npy'}", "--keep_fp32=/model/nope", check=False)
    assert ("--keep_fp32: '/model/nope' is not a convolution, residual add, classifier pool or Gemm of the model"
            in proc.stderr), proc.stderr


def test_server_serves_precision_int8_and_reports_broken_tables(tmp_path):
    """simple_cnn (random weights, 32x32) as FP32, as INT8 with its table, without a table, with a broken one."""
    repo = make_repository(tmp_path / "repo", ["simple_cnn"])
    x = RNG.standard_normal((16, 3, 32, 32)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    calibrate(f"--model={repo / 'simple_cnn'}", f"--inputs={tmp_path / 'x.npy'}", "--method=minmax",
              f"--output={tmp_path / 'table.yaml'}")
    config = (repo / "simple_cnn/config.yaml").read_text()
    for name in ("cnn_int8", "cnn_no_table", "cnn_broken_table"):
        shutil.copytree(repo / "simple_cnn", repo / name)
        (repo / name / "config.yaml").write_text(
            config.replace("name: simple_cnn", f"name: {name}") + "optimization:\n  precision: int8\n")
    shutil.copy(tmp_path / "table.yaml", repo / "cnn_int8/1/calibration.yaml")
    (repo / "cnn_broken_table/1/calibration.yaml").write_text(
        (tmp_path / "table.yaml").read_text().replace("method: minmax", "method: median"))
    server = ConvoyServer(repo, tmp_path / "server.log", flags=["--strict_readiness=false"])
    server.start(wait_for="liveness")
    try:
        with server.client() as client:
            index = {m.name: m for m in client.get_model_repository_index().models}
            for _ in range(600):
                if all(m.state not in ("LOADING", "UNLOADING", "") for m in index.values()):
                    break
                time.sleep(0.1)
                index = {m.name: m for m in client.get_model_repository_index().models}
            assert index["simple_cnn"].state == "READY"
            assert index["cnn_int8"].state == "READY", index["cnn_int8"].reason
            assert index["cnn_no_table"].state == "UNAVAILABLE"
            assert "cnn_no_table/1/calibration.yaml does not exist" in index["cnn_no_table"].reason
            assert index["cnn_broken_table"].state == "UNAVAILABLE"
            assert re.search(r"cnn_broken_table/1/calibration.yaml:\d+:\d+: method: unknown calibration method "
                             r"'median'", index["cnn_broken_table"].reason), index["cnn_broken_table"].reason
            batch = RNG.standard_normal((4, 3, 32, 32)).astype(np.float32)
            outputs = {}
            for name in ("simple_cnn", "cnn_int8"):
                inp = grpcclient.InferInput("images", list(batch.shape), "FP32")
                inp.set_data_from_numpy(batch)
                outputs[name] = client.infer(name, [inp]).as_numpy("probabilities")
            # Probabilities of a random-weight CNN on inputs like the calibration's: INT8 within 0.05 of FP32.
            assert np.abs(outputs["cnn_int8"] - outputs["simple_cnn"]).max() < 0.05
        log = server.log_tail(400)
        assert re.search(r"cnn_int8: precision int8 from .*cnn_int8/1/calibration.yaml \(minmax, 16 samples\): "
                         r"2 of 2 convolutions", log), log
    finally:
        assert server.stop() == 0


def test_accuracy_against_fp32_and_onnxruntime():
    """The small version of bench/int8_accuracy.py (module docstring)."""
    pretrained_model_dir()
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import int8_accuracy
    rows, confident = int8_accuracy.measure(cli_path(), 32, 128, ["entropy"], log=print)
    for row in rows:
        print("| " + " | ".join(str(v) if isinstance(v, str) else f"{v:.3f}" for v in row) + " |")
    by_label = {row[0].split(",")[0] if row[0].startswith("Convoy INT8") else row[0]: row for row in rows}
    convoy_fp32 = by_label["Convoy FP32"]
    convoy_int8 = by_label["Convoy INT8"]
    ort_int8 = next(row for row in rows if row[0].startswith("onnxruntime INT8"))
    convoy_qdq = by_label["Convoy running onnxruntime's QDQ file"]
    assert confident >= 32, f"only {confident} confident crops"
    assert convoy_fp32[2] == 1.0  # Convoy's FP32 picks FP32's top-1 on every crop
    assert convoy_int8[3] >= 0.97, convoy_int8
    assert convoy_int8[2] >= ort_int8[2], (convoy_int8, ort_int8)
    assert convoy_qdq[2] >= ort_int8[2] - 1 / 64, (convoy_qdq, ort_int8)


def test_symmetric_int8_activations(tmp_path):
    """--activations=int8: INT8 symmetric activations (zero point 0) run as INT8 steps too."""
    model = REPO_ROOT / "model_repo/simple_cnn"
    np.save(tmp_path / "x.npy", RNG.standard_normal((8, 3, 32, 32)).astype(np.float32))
    calibrate(f"--model={model}", f"--inputs={tmp_path / 'x.npy'}", "--activations=int8",
              f"--output={tmp_path / 's8.yaml'}")
    table = (tmp_path / "s8.yaml").read_text()
    assert "activations: int8_symmetric" in table
    assert all(z == "0" for z in re.findall(r"zero_point: (-?\d+)", table))
    (tmp_path / "fp32").mkdir()
    (tmp_path / "int8").mkdir()
    convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'fp32'}")
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'int8'}",
                  "--precision=int8", f"--calibration_table={tmp_path / 's8.yaml'}")
    assert re.search(r"2 of 2 quantized convolutions run INT8", proc.stderr), proc.stderr
    fp32, int8 = np.load(tmp_path / "fp32/0.npy"), np.load(tmp_path / "int8/0.npy")
    assert np.abs(int8 - fp32).max() < 0.05  # probabilities


def test_resnet_relu_after_the_residual_runs_int8(tmp_path_factory, tmp_path):
    """torchvision's ResNet-18 (random weights, 64x64): relu(conv + x) runs as an INT8 convolution and an INT8 add
    whose UINT8 output saturates at 0 (the ReLU): every convolution and add INT8, logits near FP32's."""
    from torchvision_export import exported_models
    model = pathlib.Path(exported_models(tmp_path_factory)) / "resnet18.onnx"
    if not model.exists():
        pytest.fail("resnet18 was not exported (CONVOY_TORCHVISION_MODELS leaves it out?)")
    np.save(tmp_path / "cal.npy", RNG.uniform(-1, 1, (16, 3, 64, 64)).astype(np.float32))
    np.save(tmp_path / "x.npy", RNG.uniform(-1, 1, (8, 3, 64, 64)).astype(np.float32))
    calibrate(f"--model={model}", f"--inputs={tmp_path / 'cal.npy'}", f"--output={tmp_path / 't.yaml'}")
    (tmp_path / "fp32").mkdir()
    (tmp_path / "int8").mkdir()
    convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'fp32'}")
    proc = convoy("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output_dir={tmp_path / 'int8'}",
                  "--precision=int8", f"--calibration_table={tmp_path / 't.yaml'}")
    assert ("20 of 20 convolutions, 8 of 8 residual adds and 2 of 2 classifier pool / Gemm layers quantized"
            in proc.stderr), proc.stderr
    assert ("20 of 20 quantized convolutions and 8 of 8 quantized adds run INT8, and 2 of 2 quantized pooling and "
            "Gemm layers" in proc.stderr), proc.stderr
    fp32, int8 = np.load(tmp_path / "fp32/0.npy"), np.load(tmp_path / "int8/0.npy")
    # Measured 0.035 of the largest logit (random weights, min-max on uniform inputs); asserted 0.1.
    assert np.abs(int8 - fp32).max() <= 0.1 * np.abs(fp32).max()
