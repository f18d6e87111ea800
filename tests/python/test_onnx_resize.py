"""Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) as single-op ONNX models, Convoy against onnxruntime on
every path test_onnx_ops.check runs (the reference interpreter with and without the passes, the CPU kernels in
NCHW, NHWC and NCHW8c, the CUDA kernels on the emulated GPU), FP32, 1e-5 relative error (max |diff| / max |ref|).
Every mode, nearest rounding and coordinate transformation, scales and sizes, sizes computed from the input's
shape, axes, keep_aspect_ratio_policy, antialias, cubic's coefficient and exclude_outside; fresh random inputs each
run. The refusals name the node, the opset and the attribute or input."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from reference_engine import run_model, run_on
from test_onnx_ops import KERNEL_PATHS, check, compare, make_model, rand, refusal

COORDINATES = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize_model(attrs, x_shape, scales=None, sizes=None, roi=None, opset=13, dynamic_batch=True):
    """A Resize-`opset` model of input x (constant roi / scales / sizes as initializers)."""
    if opset == 11:  # roi and scales are required inputs there: exporters write empty tensors
        roi = [] if roi is None else roi
        scales = [] if scales is None else scales
    inits = []
    names = ["x", "", "", ""]
    for i, (name, value) in enumerate([("roi", roi), ("scales", scales), ("sizes", sizes)], start=1):
        if value is not None:
            dtype = np.int64 if name == "sizes" else np.float32
            inits.append((name, np.array(value, dtype=dtype)))
            names[i] = name
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], name="resize", **attrs)
    x = {"x": rand(*x_shape)}
    return make_model([node], x, ["y"], inits, opset=opset, dynamic_batch=dynamic_batch), x


def check_onnx_reference(tmp_path, model, inputs, tol=1e-5):
    """As test_onnx_ops.check, with the expected outputs from onnx's own reference implementation
    (onnx.reference.ReferenceEvaluator, which generated ONNX's conformance data) instead of onnxruntime: for the
    one form where the two disagree (see test_resize_align_corners_fractional_length)."""
    path = tmp_path / "model.onnx"
    onnx.save(model, str(path))
    expected = ReferenceEvaluator(model).run(None, inputs)
    for optimize in (False, True):
        compare(f"reference optimize={optimize}", run_model(path, inputs, optimize=optimize), expected, tol)
    for name, binary, flags in KERNEL_PATHS:
        compare(name, run_on(binary(), path, inputs, *flags, "--precision=fp32"), expected, tol)


def check_resize(tmp_path, model, x, hw, scales, coordinates):
    """check against onnxruntime, or against ONNX's reference for align_corners with a fractional resized length
    (in * scale not an integer: test_resize_align_corners_fractional_length)."""
    fractional = any(float(n * s) != int(n * s) for n, s in zip(hw, scales[2:]))
    if coordinates == "align_corners" and fractional:
        check_onnx_reference(tmp_path, model, x)
    else:
        check(tmp_path, model, x)


@pytest.mark.parametrize("coordinates", COORDINATES)
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 3.0], [1, 1, 1.5, 0.75], [1, 1, 0.5, 0.45]])
def test_resize_scales(tmp_path, mode, coordinates, scales):
    model, x = resize_model(dict(mode=mode, coordinate_transformation_mode=coordinates), (2, 3, 6, 8), scales=scales)
    check_resize(tmp_path, model, x, (6, 8), scales, coordinates)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_align_corners_fractional_length(tmp_path, mode):
    """align_corners with scales whose in * scale is not an integer: ONNX's reference (and its conformance case
    test_resize_downsample_scales_linear_align_corners) divides by the fractional length in * scale - 1, onnxruntime
    by the integer output extent - 1. Convoy follows ONNX's reference; this pins the difference from onnxruntime."""
    model, x = resize_model(dict(mode=mode, coordinate_transformation_mode="align_corners"), (2, 3, 7, 9),
                            scales=[1, 1, 1.6, 0.7])
    check_onnx_reference(tmp_path, model, x)


@pytest.mark.parametrize("coordinates", COORDINATES + ["tf_crop_and_resize"])
@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("sizes", [[1, 3, 15, 10], [1, 3, 4, 5], [1, 3, 1, 6]])
def test_resize_sizes(tmp_path, mode, coordinates, sizes):
    attrs = dict(mode=mode, coordinate_transformation_mode=coordinates)
    roi = None
    if coordinates == "tf_crop_and_resize":
        roi = [0, 0, 0.1, -0.2, 1, 1, 0.8, 1.1]
        attrs["extrapolation_value"] = 2.5
    model, x = resize_model(attrs, (1, 3, 7, 9), sizes=sizes, roi=roi, opset=11, dynamic_batch=False)
    check(tmp_path, model, x)


@pytest.mark.parametrize("nearest_mode", NEAREST)
@pytest.mark.parametrize("coordinates", COORDINATES)
@pytest.mark.parametrize("scales", [[1, 1, 3.0, 2.5], [1, 1, 0.6, 0.5]])
def test_resize_nearest_modes(tmp_path, nearest_mode, coordinates, scales):
    attrs = dict(mode="nearest", nearest_mode=nearest_mode, coordinate_transformation_mode=coordinates)
    model, x = resize_model(attrs, (2, 2, 6, 8), scales=scales)
    check_resize(tmp_path, model, x, (6, 8), scales, coordinates)


@pytest.mark.parametrize("attrs", [dict(cubic_coeff_a=-0.5), dict(cubic_coeff_a=-0.5, exclude_outside=1),
                                   dict(exclude_outside=1, coordinate_transformation_mode="align_corners")])
@pytest.mark.parametrize("scales", [[1, 1, 1.7, 2.0], [1, 1, 0.6, 0.8]])
def test_resize_cubic_options(tmp_path, attrs, scales):
    model, x = resize_model(dict(mode="cubic", **attrs), (1, 4, 8, 7), scales=scales)
    check_resize(tmp_path, model, x, (8, 7), scales, attrs.get("coordinate_transformation_mode", "half_pixel"))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scales", [[1, 1, 2.0, 2.0], [1, 1, 0.5, 0.75], [1, 1, 1.5, 3.0]])
def test_resize_opset10(tmp_path, mode, scales):
    node = helper.make_node("Resize", ["x", "scales"], ["y"], name="resize", mode=mode)
    x = {"x": rand(2, 3, 6, 8)}
    model = make_model([node], x, ["y"], [("scales", np.array(scales, np.float32))], opset=10)
    check(tmp_path, model, x)


@pytest.mark.parametrize("opset", [7, 9])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample(tmp_path, opset, mode):
    scales = [1.0, 1.0, 2.0, 3.0]
    x = {"x": rand(2, 3, 5, 4)}
    if opset == 7:
        node = helper.make_node("Upsample", ["x"], ["y"], name="up", mode=mode, scales=scales)
        model = make_model([node], x, ["y"], opset=7)
    else:
        node = helper.make_node("Upsample", ["x", "scales"], ["y"], name="up", mode=mode)
        model = make_model([node], x, ["y"], [("scales", np.array(scales, np.float32))], opset=9)
    check(tmp_path, model, x)


@pytest.mark.parametrize("opset", [18, 19])
@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("form", ["scales", "sizes"])
def test_resize_antialias(tmp_path, opset, mode, form):
    attrs = dict(mode=mode, antialias=1, axes=[2, 3])
    arg = {"scales": [0.4, 0.6]} if form == "scales" else {"sizes": [4, 13]}
    model, x = resize_model(attrs, (2, 3, 11, 10), opset=opset, **arg)
    check(tmp_path, model, x)


# Negative axes only with "stretch": onnxruntime 1.31 leaves the input unchanged for keep_aspect_ratio_policy with
# negative axes, and ONNX's reference fails on them (Convoy normalises them first, as the spec says).
@pytest.mark.parametrize("policy,axes", [(policy, axes) for policy in ["stretch", "not_larger", "not_smaller"]
                                         for axes in [[2, 3], [3, 2]]] + [("stretch", [-1, -2])])
def test_resize_axes_and_aspect_ratio(tmp_path, policy, axes):
    attrs = dict(mode="linear", axes=axes, keep_aspect_ratio_policy=policy)
    model, x = resize_model(attrs, (2, 3, 6, 9), sizes=[12, 10], opset=18)
    check(tmp_path, model, x)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_half_pixel_symmetric(tmp_path, mode):
    attrs = dict(mode=mode, coordinate_transformation_mode="half_pixel_symmetric")
    for scales in ([1, 1, 1.7, 2.3], [1, 1, 0.6, 0.45]):
        model, x = resize_model(attrs, (2, 3, 7, 9), scales=scales, opset=19)
        if mode == "nearest" and scales[2] < 1:
            # onnxruntime 1.31 picks other source pixels than ONNX's reference (the formula the spec gives) here.
            check_onnx_reference(tmp_path, model, x)
        else:
            check(tmp_path, model, x)


def test_resize_sizes_from_shape_subgraph(tmp_path):
    """torch.onnx's F.interpolate(size=...) with a dynamic batch: sizes = Concat(Shape(x)[0:2], [H, W])."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "starts", "ends"], ["nc"]),
             helper.make_node("Concat", ["nc", "hw"], ["sizes"], axis=0),
             helper.make_node("Resize", ["x", "", "", "sizes"], ["y"], name="resize", mode="linear",
                              coordinate_transformation_mode="pytorch_half_pixel")]
    inits = [("starts", np.array([0], np.int64)), ("ends", np.array([2], np.int64)),
             ("hw", np.array([23, 17], np.int64))]
    x = {"x": rand(3, 4, 6, 5)}
    check(tmp_path, make_model(nodes, x, ["y"], inits, opset=13), x)


def test_resize_scales_from_shape_subgraph(tmp_path):
    """Scales computed from the shape: Cast(target HW) / Cast(Shape(x)[2:4]), the form some exporters write."""
    nodes = [helper.make_node("Shape", ["x"], ["shape"]),
             helper.make_node("Slice", ["shape", "starts", "ends"], ["hw_in"]),
             helper.make_node("Cast", ["hw_in"], ["hw_in_f"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["hw_out", "hw_in_f"], ["hw_scales"]),
             helper.make_node("Concat", ["ones", "hw_scales"], ["scales"], axis=0),
             helper.make_node("Resize", ["x", "", "scales"], ["y"], name="resize", mode="nearest")]
    inits = [("starts", np.array([2], np.int64)), ("ends", np.array([4], np.int64)),
             ("hw_out", np.array([16.0, 15.0], np.float32)), ("ones", np.array([1.0, 1.0], np.float32))]
    x = {"x": rand(2, 3, 8, 5)}
    check(tmp_path, make_model(nodes, x, ["y"], inits, opset=13), x)


def test_resize_refusals(tmp_path):
    # A scales input computed at run time.
    nodes = [helper.make_node("GlobalAveragePool", ["x"], ["pooled"]),
             helper.make_node("Reshape", ["pooled", "shape"], ["m"]),
             helper.make_node("Resize", ["x", "", "m"], ["y"], name="resize")]
    x = {"x": rand(1, 4, 3, 3)}
    model = make_model(nodes, x, ["y"], [("shape", np.array([4], np.int64))], opset=13, dynamic_batch=False)
    message = refusal(tmp_path, model, x)
    assert "node 'resize' (Resize): input 2 ('m', the scales) is computed at run time" in message, message
    # Resizing the channels.
    model, x = resize_model(dict(mode="nearest"), (1, 2, 3, 3), scales=[1, 2, 1, 1])
    message = refusal(tmp_path, model, x)
    assert "node 'resize' (Resize): resizing axis 1 (the channels) of [N,2,3,3] to 4 (scale 2)" in message, message
    # An attribute of a later opset.
    model, x = resize_model(dict(mode="linear", antialias=1), (1, 2, 3, 3), scales=[1, 1, 2, 2], opset=13)
    message = refusal(tmp_path, model, x)
    assert ("node 'resize' (Resize): attribute 'antialias' is not part of Resize at opset 13 (it appears at opset 18)"
            in message), message
    # A coordinate transformation of opset 11 only.
    model, x = resize_model(dict(coordinate_transformation_mode="tf_half_pixel_for_nn"), (1, 2, 3, 3),
                            scales=[1, 1, 2, 2], roi=[], opset=11)
    message = refusal(tmp_path, model, x)
    assert ("node 'resize' (Resize): attribute 'coordinate_transformation_mode' value 'tf_half_pixel_for_nn' "
            "(opset 11) is not supported" in message), message
    # Both scales and sizes.
    model, x = resize_model({}, (1, 2, 3, 3), scales=[1, 1, 2, 2], sizes=[1, 2, 6, 6], opset=13, dynamic_batch=False)
    message = refusal(tmp_path, model, x)
    assert "node 'resize' (Resize): both scales and sizes are given" in message, message
