"""bench/cpu_time_compare.py's argument parsing and its summary line (the measurement itself needs minutes and is
not run here): the --convoy and --models lists, and each engine's median over the rounds with its ratio to
onnxruntime's, from fresh random times."""
import random
import statistics
import sys

import pytest

from conftest import REPO_ROOT


@pytest.fixture(scope="module")
def cpu_time_compare():
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import cpu_time_compare as module
    return module


def test_convoy_binaries(cpu_time_compare):
    assert cpu_time_compare.parse_binaries("bazel-bin/server/tools/convoy") == [
        ("convoy", "bazel-bin/server/tools/convoy")]
    assert cpu_time_compare.parse_binaries("main=/a/convoy,new=/b/x=y/convoy,") == [
        ("main", "/a/convoy"), ("new", "/b/x=y/convoy")]


def test_models(cpu_time_compare):
    assert cpu_time_compare.parse_models("resnet18=/tmp/r18.onnx,resnet50=/tmp/r50.onnx") == [
        ("resnet18", "/tmp/r18.onnx"), ("resnet50", "/tmp/r50.onnx")]
    with pytest.raises(ValueError, match="NAME=PATH"):
        cpu_time_compare.parse_models("/tmp/r18.onnx")


def test_median_line(cpu_time_compare):
    rng = random.Random()
    times = {e: [rng.uniform(1, 100) for _ in range(rng.choice([1, 3, 5]))]
             for e in ["convoy[main]", "convoy[new]", "onnxruntime", "openvino_f32"]}
    line = cpu_time_compare.median_line("resnet18", 8, times)
    assert line.startswith("resnet18 batch 8 median: ")
    fields = line[len("resnet18 batch 8 median: "):].split(", ")
    assert len(fields) == 4
    base = statistics.median(times["onnxruntime"])
    for field, (engine, values) in zip(fields, times.items()):
        m = statistics.median(values)
        assert field == f"{engine} {m:.2f} ms ({m / base:.2f} of onnxruntime)"
    assert "onnxruntime" in line and "(1.00 of onnxruntime)" in fields[2]
