"""bench/onnxruntime_compare.py's round-by-round summary (the measurement itself needs minutes and is not run here):
the median of the per-round ratios and the count of rounds Convoy was faster in, from fresh random times, and the
table line that prints them."""
import random
import statistics
import sys

import pytest

from conftest import REPO_ROOT


@pytest.fixture(scope="module")
def compare():
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import onnxruntime_compare as module
    return module


def test_paired_rounds(compare):
    rng = random.Random()
    rounds = rng.choice([1, 3, 5, 15])
    convoy = [rng.uniform(1, 100) for _ in range(rounds)]
    peer = [rng.uniform(1, 100) for _ in range(rounds)]
    ratio, ahead, count = compare.paired_rounds(convoy, peer)
    assert count == rounds
    assert ratio == pytest.approx(statistics.median(c / p for c, p in zip(convoy, peer)))
    assert ahead == sum(c < p for c, p in zip(convoy, peer))


def test_two_speed_rounds_compare_within_each_round(compare):
    # Convoy 10 % faster in every round, while the machine's speed halves for some rounds: the medians of each
    # engine's times can land in different speeds, the per-round ratios cannot.
    rng = random.Random()
    speeds = [rng.choice([1.0, 2.0]) for _ in range(7)]
    peer = [30.0 * s for s in speeds]
    convoy = [27.0 * s for s in speeds]
    ratio, ahead, count = compare.paired_rounds(convoy, peer)
    assert ratio == pytest.approx(0.9)
    assert (ahead, count) == (7, 7)


def test_table_prints_the_round_by_round_line(compare, capsys):
    key = ("resnet50", "int8", 8)
    compare.round_times.clear()
    compare.implementations.clear()
    compare.round_times[key] = {"convoy": [31.0, 55.0, 30.0], "onnxruntime": [70.0, 90.0, 72.0],
                                "openvino_default(bf16)": [25.0, 52.0, 60.0]}
    whole = {key: {name: statistics.median(ms) for name, ms in compare.round_times[key].items()}}
    compare.print_whole_model_table(whole)
    out = capsys.readouterr().out
    assert "convoy/openvino_default(bf16) 1.06 (faster in 1 of 3)" in out
    assert "convoy/onnxruntime 0.44 (faster in 3 of 3)" in out
    assert "convoy fastest 30.00" in out
    compare.round_times.clear()


def test_layout_entries_carry_cli_options(compare):
    assert compare.layout_flags("default") == []
    assert compare.layout_flags("nhwc") == ["--layout=nhwc"]
    assert compare.layout_flags("default+int8_residual_add=single_rounding") == [
        "--int8_residual_add=single_rounding"]
    assert compare.layout_flags("nchw8c+int8=false+threads=1") == ["--layout=nchw8c", "--int8=false", "--threads=1"]


def test_layer_profile_names_fused_nodes_after_the_conv(tmp_path):
    # onnxruntime reports a Conv fused with its Clip / Relu under the activation's node name, or with its NCHWc layout
    # under the activation's output tensor plus "_nchwc"; bench/layer_profile_compare.py renames both back to the Conv
    # Convoy's step is named after, and adds up the times that land on one name.
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    sys.path.insert(0, str(REPO_ROOT / "bench"))
    import layer_profile_compare as lpc
    rng = random.Random()
    names = [f"/features.{i}/{rng.randrange(1000)}" for i in range(4)]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["c0"], name=names[0] + "/Conv"),
        helper.make_node("Clip", ["c0", "lo", "hi"], ["a0"], name=names[1] + "/Clip"),
        helper.make_node("Conv", ["a0", "w1"], ["c1"], name=names[2] + "/Conv"),
        helper.make_node("Relu", ["c1"], ["y"], name=names[3] + "/Relu"),
        helper.make_node("Relu", ["x"], ["z"], name="/standalone/Relu"),  # no Conv before it: keeps its name
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [helper.make_tensor("w0", TensorProto.FLOAT, [4, 4, 1, 1], [0.0] * 16),
         helper.make_tensor("w1", TensorProto.FLOAT, [4, 4, 1, 1], [0.0] * 16),
         helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]), helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    aliases = lpc.onnx_node_aliases(str(path))
    t = [rng.uniform(0.1, 2.0) for _ in range(5)]
    times = {names[1] + "/Clip": t[0], "a0_nchwc": t[1], names[3] + "/Relu": t[2], "/standalone/Relu": t[3],
             "/ReorderOutput": t[4]}
    ops = {name: "Conv" for name in times}
    merged, merged_ops = lpc.canonical_node_times(times, ops, aliases)
    assert merged == pytest.approx({names[0] + "/Conv": t[0] + t[1], names[2] + "/Conv": t[2],
                                    "/standalone/Relu": t[3], "/ReorderOutput": t[4]})
    assert set(merged_ops) == set(merged)
