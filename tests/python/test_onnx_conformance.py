"""ONNX's own node conformance cases (onnx/backend/test/data/node/<case>/: model.onnx and test_data_set_0/*.pb, as
onnx.backend.test.loader.load_model_tests(kind="node") lists them) run through Convoy and compared with the outputs
each case ships, at the tolerance stated below.

Every case of the installed onnx package (1.16.2: opsets up to 21) runs as a parameter of test_case, or is excluded
with its reason (not a test of its own; test_summary lists the exclusions by reason). Reasons come from two places,
both in this file:
  - rules that read the case's model: an op Convoy does not support yet, a graph input or output that is not FLOAT
    (a CNN server takes and returns floating-point tensors);
  - EXCLUDED, the cases of supported ops that Convoy refuses or cannot take in this form, each with its reason.
An excluded case is never counted as passing. test_summary records how many cases ran, passed and were excluded by
reason (printed, and as the JUnit test-suite property `onnx_conformance`); docs/model_formats.md quotes the numbers.

How a case becomes a Convoy model: the first graph input stays the model's input; the case's other inputs
(weights, axes, pads, shapes) become initializers with the values of test_data_set_0, since a CNN server takes one
image tensor and keeps its weights in the model. The model then runs on Convoy's reference path (import, the
optimization passes, the FP32 reference interpreter: `convoy run --engine=reference`), the path the importer's
semantics are judged on. Each case that runs also runs on the CPU kernel runtime (`convoy run --device=cpu
--precision=fp32`, the CPU's default layout: NHWC with AVX-512 for models without grouped convolutions, blocked
otherwise) at the same tolerance, except KERNEL_REFUSALS: cases the kernel library has no kernel for (none at
present), which must fail the load with the listed message naming the node; when a kernel appears the case fails
until it leaves that list.
"""
import collections
import pathlib

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx.backend.test.loader import load_model_tests

from reference_engine import cli_path, run_model, run_on

# Outputs must match the case's expected values within |actual - expected| <= ATOL + RTOL * |expected| (onnx's own
# backend runner allows rtol 1e-3, atol 1e-7; Convoy computes in FP32 with a different summation order at most).
RTOL = 1e-5
ATOL = 1e-6

# Ops the importer takes (onnx_importer.cc's handlers and the load-time evaluator's ops).
SUPPORTED_OPS = {
    "Abs", "Add", "And", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu", "Clip",
    "Concat", "Constant", "ConstantOfShape", "Conv", "ConvTranspose", "DepthToSpace", "Div", "Dropout", "Elu",
    "Equal", "Erf", "Exp", "Expand", "Flatten", "Floor", "Gather", "Gelu", "Gemm", "GlobalAveragePool",
    "GlobalMaxPool", "Greater", "GreaterOrEqual", "GroupNormalization", "HardSigmoid", "HardSwish", "Identity",
    "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Less", "LessOrEqual", "Log", "MatMul", "Max",
    "MaxPool", "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "PRelu", "Pad", "Pow", "QuantizeLinear",
    "DequantizeLinear", "QLinearConv", "QLinearMatMul", "Range", "Reciprocal", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum", "Relu", "Reshape", "Resize", "Round", "Selu",
    "Shape", "Sigmoid", "Sign", "Size", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt",
    "Squeeze", "Sub", "Sum", "Tanh", "ThresholdedRelu", "Tile", "Transpose", "Unsqueeze", "Upsample", "Where", "Xor",
}

FLOAT_TYPES = {TensorProto.FLOAT}

# Ops that compute on runtime tensors (onnx_importer.cc's handlers); the other supported ops run only at load time,
# on constants (shape arithmetic, padding computations), and a case where they compute on the graph input is
# excluded by rule.
RUNTIME_OPS = {
    "Abs", "Add", "ArgMax", "AveragePool", "BatchNormalization", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Concat",
    "Conv", "ConvTranspose", "DepthToSpace", "Div", "Dropout", "Elu", "Erf", "Exp", "Flatten", "Floor", "Gelu",
    "Gemm", "GlobalAveragePool", "GlobalMaxPool", "GroupNormalization", "HardSigmoid", "HardSwish", "Identity",
    "InstanceNormalization", "LayerNormalization", "LeakyRelu", "Log", "MatMul", "MaxPool", "Mish", "Mul", "Neg",
    "PRelu", "Pad", "Reciprocal", "ReduceMax", "ReduceMean", "Relu", "Reshape", "Resize", "Round", "Selu", "Shape",
    "Sigmoid", "Sign", "Slice", "Softmax", "Softplus", "Softsign", "SpaceToDepth", "Split", "Sqrt", "Squeeze", "Sub",
    "Tanh", "ThresholdedRelu", "Transpose", "Unsqueeze", "Upsample",
}

# Ops whose INT64 result Convoy computes as exact float indices (and serves as UINT8/INT32/INT64): a graph output they
# produce is compared by value.
INDEX_OPS = {"ArgMax"}

MIN_OPSET, MAX_OPSET = 1, 21

CONV_TRANSPOSE_3D = "3-D ConvTranspose (Convoy's transposed convolution is 2-D [N,C,H,W] or 1-D, as its Conv)"
TRAINING = "training mode (BatchNormalization's running statistics, Dropout with training_mode true)"
SLICE_AXIS0 = "Slice of runtime data on axis 0, the batch axis of a served model"
SLICE_STEP = "Slice of runtime data with a step other than 1"
REDUCE_AXES = "ReduceMax of runtime data over axes other than H and W of [N,C,H,W]"
CEIL_PAST_PADDING = ("an average pool whose ceil_mode window reaches past the padded input, with count_include_pad: "
                     "ONNX's reference divides by the whole kernel, Convoy (PyTorch's rule, as its kernels) by the "
                     "taps within the padded input")
ZERO_SIZE = "a zero-size tensor (an empty dimension or slice), which Convoy's runtime does not represent"

# Cases of supported ops that Convoy refuses in this form, each with its reason (the importer's message names the
# node, op and attribute or input; a case leaves this list when Convoy learns the form).
EXCLUDED = {
    "test_averagepool_3d_dilations_large_count_include_pad_is_1_ceil_mode_is_True": CEIL_PAST_PADDING,
    "test_convtranspose_3d": CONV_TRANSPOSE_3D,
    "test_reduce_max_default_axes_keepdim_example": REDUCE_AXES,
    "test_reduce_max_default_axes_keepdims_random": REDUCE_AXES,
    "test_reduce_max_do_not_keepdims_example": REDUCE_AXES,
    "test_reduce_max_do_not_keepdims_random": REDUCE_AXES,
    "test_reduce_max_keepdims_example": REDUCE_AXES,
    "test_reduce_max_keepdims_random": REDUCE_AXES,
    "test_reduce_max_negative_axes_keepdims_example": REDUCE_AXES,
    "test_reduce_max_negative_axes_keepdims_random": REDUCE_AXES,
    "test_center_crop_pad_crop_and_pad_expanded": SLICE_AXIS0,
    "test_center_crop_pad_crop_axes_hwc_expanded": SLICE_AXIS0,
    "test_center_crop_pad_crop_expanded": SLICE_AXIS0,
    "test_center_crop_pad_crop_negative_axes_hwc_expanded": SLICE_AXIS0,
    "test_center_crop_pad_pad_expanded": SLICE_AXIS0,
    "test_slice": SLICE_AXIS0,
    "test_slice_default_axes": SLICE_AXIS0,
    "test_slice_default_steps": SLICE_AXIS0,
    "test_slice_negative_axes": SLICE_AXIS0,
    "test_slice_neg_steps": SLICE_STEP,
    "test_batchnorm_epsilon_training_mode": TRAINING,
    "test_batchnorm_example_training_mode": TRAINING,
    "test_training_dropout": TRAINING,
    "test_training_dropout_default": TRAINING,
    "test_training_dropout_zero_ratio": TRAINING,
    "test_reduce_l1_empty_set_expanded": ZERO_SIZE,
    "test_reduce_l2_empty_set_expanded": ZERO_SIZE,
    "test_reduce_min_empty_set": ZERO_SIZE,
    "test_reduce_prod_empty_set": ZERO_SIZE,
    "test_reduce_sum_empty_set": ZERO_SIZE,
    "test_reduce_sum_empty_set_non_reduced_axis_zero": ZERO_SIZE,
    "test_reduce_sum_square_empty_set_expanded": ZERO_SIZE,
    "test_reshape_allowzero_reordered": ZERO_SIZE,
    "test_slice_start_out_of_bounds": ZERO_SIZE,
    "test_split_zero_size_splits_opset13": ZERO_SIZE,
    "test_split_zero_size_splits_opset18": ZERO_SIZE,
}

# Cases that run on the reference path but that the CPU kernel runtime refuses at load, with the start of its
# message (the kernel library's gaps, for its owners; docs/model_formats.md counts them).
KERNEL_REFUSALS = {}

NODE_CASES = sorted((c for c in load_model_tests(kind="node") if c.model_dir), key=lambda c: c.name)


def load_tensors(folder, prefix):
    paths = sorted(pathlib.Path(folder).glob(f"{prefix}_*.pb"), key=lambda p: int(p.stem.split("_")[1]))
    tensors = []
    for path in paths:
        t = TensorProto()
        t.ParseFromString(path.read_bytes())
        tensors.append(numpy_helper.to_array(t))
    return tensors


def rule_exclusion(model):
    """The reason a case is excluded by rule, or None."""
    nodes = model.graph.node
    missing = sorted({n.op_type for n in nodes if n.domain not in ("", "ai.onnx")} |
                     ({n.op_type for n in nodes} - SUPPORTED_OPS))
    if missing:
        return "op not supported yet: " + ", ".join(missing)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if not MIN_OPSET <= opset <= MAX_OPSET:
        return f"opset {opset} (Convoy reads opsets {MIN_OPSET} to {MAX_OPSET})"
    initializers = {i.name for i in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in initializers]
    if not inputs:
        return "no graph input (a constant model)"
    index_outputs = {out for n in nodes if n.op_type in INDEX_OPS for out in n.output}
    for value, what in [(inputs[0], "graph input"), *[(o, "graph output") for o in model.graph.output]]:
        if not value.type.HasField("tensor_type"):
            return f"{what} of a non-tensor type (sequence, map or optional)"
        elem = value.type.tensor_type.elem_type
        if value.name in index_outputs and elem == TensorProto.INT64:
            continue
        if elem not in FLOAT_TYPES:
            return f"{what} of type {TensorProto.DataType.Name(elem)} (Convoy's graph inputs and outputs are FLOAT)"
    # Tensors computed from the graph input at run time; a load-time-only op on one of them is refused.
    runtime = {inputs[0].name}
    for n in nodes:
        # CastLike reads its second input only for the element type: a constant cast like a runtime tensor stays a
        # constant (ONNX's function bodies write CastLike(alpha, X)).
        data_inputs = n.input[:1] if n.op_type == "CastLike" else n.input
        if any(i in runtime for i in data_inputs):
            if n.op_type not in RUNTIME_OPS:
                return "a load-time op (Convoy evaluates it on constants only) computing on the graph input"
            if n.op_type != "Shape":  # a runtime tensor's shape is known at load time
                runtime.update(n.output)
    return None


# The ops issue 32 names for a CNN server (convolutions, pooling, normalizations, activations, Resize, ArgMax,
# Softmax, Concat, the binary ops, Gemm/MatMul, Pad, Reshape, QDQ, ...): test_summary reports how many of the cases
# made only of these ops (and Constant) pass.
ISSUE_32_OPS = {
    "Add", "ArgMax", "AveragePool", "BatchNormalization", "Clip", "Concat", "Conv", "ConvTranspose", "DepthToSpace",
    "DequantizeLinear", "Div", "Elu", "Erf", "Flatten", "Gelu", "Gemm", "GlobalAveragePool", "GlobalMaxPool",
    "GroupNormalization", "HardSigmoid", "HardSwish", "InstanceNormalization", "LayerNormalization", "LeakyRelu",
    "MatMul", "MaxPool", "Mish", "Mul", "Pad", "PRelu", "QuantizeLinear", "ReduceMean", "Relu", "Reshape", "Resize",
    "Selu", "Sigmoid", "Softmax", "Softplus", "SpaceToDepth", "Split", "Sub", "Tanh", "Transpose", "Upsample",
}
CASE_OPS = {}  # case name -> the op types of its nodes


def exclusion(case):
    model = onnx.load(str(pathlib.Path(case.model_dir, "model.onnx")))
    CASE_OPS[case.name] = {n.op_type for n in model.graph.node}
    if case.name in EXCLUDED:
        return EXCLUDED[case.name]
    return rule_exclusion(model)


def case_params():
    """(the cases that run, as pytest params; {excluded case name: reason}). An excluded case is not a test of its
    own (a thousand skips would bury the skips that matter): test_summary lists the exclusions by reason."""
    params, excluded = [], {}
    for case in NODE_CASES:
        reason = exclusion(case)
        if reason:
            excluded[case.name] = reason
        else:
            params.append(pytest.param(case, id=case.name))
    return params, excluded


PARAMS, EXCLUSIONS = case_params()
RESULTS = {}  # case name -> "passed" / "failed", filled by test_case


def convoy_model(case, folder):
    """(path of the Convoy form of the case's model, {input name: value}, expected outputs)."""
    model = onnx.load(str(pathlib.Path(case.model_dir, "model.onnx")))
    data = pathlib.Path(case.model_dir, "test_data_set_0")
    values = load_tensors(data, "input")
    expected = load_tensors(data, "output")
    initializers = {i.name for i in model.graph.initializer}
    graph_inputs = [i for i in model.graph.input if i.name not in initializers]
    assert len(graph_inputs) == len(values), (case.name, len(graph_inputs), len(values))
    first = graph_inputs[0]
    for value_info, value in zip(graph_inputs[1:], values[1:]):
        model.graph.initializer.append(numpy_helper.from_array(value, value_info.name))
        model.graph.input.remove(value_info)
    path = pathlib.Path(folder, "model.onnx")
    onnx.save(model, str(path))
    return path, {first.name: values[0]}, expected


@pytest.mark.parametrize("case", PARAMS)
def test_case(tmp_path, case):
    RESULTS[case.name] = "failed"
    path, inputs, expected = convoy_model(case, tmp_path)
    compare("reference", run_model(path, inputs, optimize=True), expected)
    kernel_flags = ("--device=cpu", "--precision=fp32")
    if case.name in KERNEL_REFUSALS:
        with pytest.raises(RuntimeError) as err:
            run_on(cli_path(), path, inputs, *kernel_flags)
        assert KERNEL_REFUSALS[case.name] in str(err.value), str(err.value)
    else:
        compare("cpu kernels", run_on(cli_path(), path, inputs, *kernel_flags), expected)
    RESULTS[case.name] = "passed"


def compare(what, actual, expected):
    assert len(actual) == len(expected), (what, len(actual), len(expected))
    for i, (a, e) in enumerate(zip(actual, expected)):
        assert a.shape == e.shape, f"{what}: output {i}: shape {a.shape}, expected {e.shape}"
        np.testing.assert_allclose(a, e.astype(np.float32), rtol=RTOL, atol=ATOL, err_msg=f"{what}: output {i}")


def summary():
    excluded = collections.Counter()
    for reason in EXCLUSIONS.values():
        if reason.startswith("op not supported yet"):
            reason = "op not supported yet"
        elif reason.startswith("graph input of type") or reason.startswith("graph output of type"):
            reason = "a graph input or output of a type other than FLOAT (Convoy's are FLOAT)"
        excluded[reason] += 1
    return len(PARAMS), excluded


def test_summary(record_testsuite_property):
    ran, excluded = summary()
    passed = sum(1 for r in RESULTS.values() if r == "passed")
    lines = [f"ONNX node conformance (onnx {onnx.__version__}): {len(NODE_CASES)} cases, {ran} run, "
             f"{passed} passed in this run, {sum(excluded.values())} excluded; of those run, "
             f"{ran - len(KERNEL_REFUSALS)} also on the CPU kernels, {len(KERNEL_REFUSALS)} refused there"]
    lines += [f"  {count:4d} excluded: {reason}" for reason, count in excluded.most_common()]
    issue_cases = [name for name, ops in CASE_OPS.items() if ops <= ISSUE_32_OPS | {"Constant"}]
    issue_passed = sum(1 for name in issue_cases if RESULTS.get(name) == "passed")
    lines.append(f"  the {len(ISSUE_32_OPS)} ops of issue 32: {len(issue_cases)} cases made only of them, "
                 f"{issue_passed} passed in this run ({100 * issue_passed / max(1, len(issue_cases)):.1f} %)")
    text = "\n".join(lines)
    print(text)
    record_testsuite_property("onnx_conformance", text)
    assert ran + sum(excluded.values()) == len(NODE_CASES)
    # Every case that ran in this pytest run passed (test_summary runs after the cases; alone it checks the counts).
    assert all(r == "passed" for r in RESULTS.values()), sorted(n for n, r in RESULTS.items() if r != "passed")
