// One mapping per graph op: from a Node of the graph IR to kernel steps of the plan (see planner.h).
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "server/runtime/planner_internal.h"
#include "server/runtime/resize_lowering.h"
#include "server/runtime/unary_lowering.h"

namespace convoy::runtime {
namespace {

convoy::Activation KernelActivation(const Activation& a) {
  switch (a.kind) {
    case ActivationKind::kIdentity: return convoy::Activation::Identity();
    case ActivationKind::kRelu: return convoy::Activation::Relu();
    case ActivationKind::kClip: return convoy::Activation::Clip(a.alpha, a.beta);
    case ActivationKind::kLeakyRelu: return convoy::Activation::LeakyRelu(a.alpha);
    case ActivationKind::kSigmoid: return convoy::Activation::Of(convoy::ActivationKind::kSigmoid);
    case ActivationKind::kTanh: return convoy::Activation::Of(convoy::ActivationKind::kTanh);
    case ActivationKind::kSilu: return convoy::Activation::Of(convoy::ActivationKind::kSilu);
    case ActivationKind::kHardSigmoid:
      return convoy::Activation::Of(convoy::ActivationKind::kHardSigmoid, a.alpha, a.beta);
    case ActivationKind::kHardSwish: return convoy::Activation::Of(convoy::ActivationKind::kHardSwish);
    case ActivationKind::kGelu: return convoy::Activation::Of(convoy::ActivationKind::kGelu);
    case ActivationKind::kQuantizeDequantizeU8:
      return convoy::Activation::Of(convoy::ActivationKind::kQuantizeDequantizeU8, a.alpha, a.beta);
    case ActivationKind::kQuantizeDequantizeS8:
      return convoy::Activation::Of(convoy::ActivationKind::kQuantizeDequantizeS8, a.alpha, a.beta);
  }
  return convoy::Activation::Identity();
}

absl::Status ExpectImage(PlanBuilder& b, const Node& node, int id) {
  const Shape& s = b.tensor(id).shape;
  if (s.size() != 4) {
    return b.NodeError(node, absl::StrCat("input '", b.tensor(id).name, "' must be 4-D [N,C,H,W], got ",
                                          ShapeToString(s)));
  }
  return absl::OkStatus();
}

absl::Status ExpectImageOrMatrix(PlanBuilder& b, const Node& node, int id) {
  const Shape& s = b.tensor(id).shape;
  if (s.size() != 4 && s.size() != 2) {
    return b.NodeError(node, absl::StrCat("input '", b.tensor(id).name, "' must be [N,C,H,W] or [N,C], got ",
                                          ShapeToString(s)));
  }
  return absl::OkStatus();
}

// `weight` [K, C, R, S] with zero channels appended up to `channels`.
Tensor ZeroPaddedChannels(const Tensor& weight, int64_t channels) {
  const int64_t k = weight.shape[0], c = weight.shape[1], rs = weight.shape[2] * weight.shape[3];
  Tensor padded = Tensor::Zeros({k, channels, weight.shape[2], weight.shape[3]});
  for (int64_t i = 0; i < k; ++i) {
    std::copy_n(weight.data.begin() + i * c * rs, c * rs, padded.data.begin() + i * channels * rs);
  }
  return padded;
}

// The conv's input in the compute type and `layout`: a few-channel image (RGB) that has to be converted to NHWC
// anyway, or was preprocessed padded, comes with its channels padded for the tensor cores (TensorCoreChannels).
absl::StatusOr<int> ConvInput(PlanBuilder& b, const Node& node, const Conv2dAttrs& a, const Tensor& weight,
                              Layout layout) {
  const int padded = a.groups == 1 && layout == Layout::kNHWC ? b.TensorCoreChannels(weight.shape[1]) : 0;
  if (padded == 0) return b.ComputeInput(node, 0, layout);
  absl::StatusOr<int> id = b.Value(node.inputs[0]);
  if (!id.ok()) return b.NodeError(node, std::string(id.status().message()));
  return b.Require(*id, b.compute_dtype(), layout, padded);
}

}  // namespace

absl::Status PlanConv2d(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<Conv2dAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  CONVOY_RETURN_IF_ERROR(ExpectImage(b, node, x));
  CONVOY_ASSIGN_OR_RETURN(const Tensor* weight, b.Constant(node, 1));
  const Window2d& win = a.window;
  const int k = static_cast<int>(weight->shape[0]);
  const bool tf32 = b.options().precision == Precision::kTf32;
  // The problem at a batch size in a layout (the layout is chosen below, once the batch-1 problem can be probed).
  auto problem_in = [&b, &a, &win, k, tf32](int x, int batch, Layout layout, const Epilogue& epilogue) {
    const ImageDims d = b.Dims(x, batch);
    Conv2dProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w, p.k = k;
    p.r = int(win.kernel_h), p.s = int(win.kernel_w);
    p.pad_top = int(win.pad_top), p.pad_bottom = int(win.pad_bottom);
    p.pad_left = int(win.pad_left), p.pad_right = int(win.pad_right);
    p.stride_h = int(win.stride_h), p.stride_w = int(win.stride_w);
    p.dilation_h = int(win.dilation_h), p.dilation_w = int(win.dilation_w);
    p.groups = int(a.groups);
    p.dtype = b.compute_dtype(), p.layout = layout, p.allow_tf32 = tf32, p.epilogue = epilogue;
    return p;
  };
  Epilogue epilogue;
  epilogue.has_bias = a.has_bias;
  epilogue.has_scale = a.has_channel_scale;
  epilogue.residual = a.residual == ResidualPosition::kBeforeActivation  ? ResidualMode::kBeforeActivation
                      : a.residual == ResidualPosition::kAfterActivation ? ResidualMode::kAfterActivation
                                                                         : ResidualMode::kNone;
  epilogue.activation = KernelActivation(a.activation);
  // Any input channel count: a blocked stem reads its 3-channel image as NCHW and writes blocked (StoredLayout).
  const Layout layout = b.BlockedLayoutIfImplemented<Conv2dOp>(problem_in(x, 1, b.layout(), epilogue), {k});
  CONVOY_ASSIGN_OR_RETURN(x, ConvInput(b, node, a, *weight, layout));
  // Filters lie as [K, C/g, R, S] for NCHW(8c) problems and [K, R, S, C/g] for NHWC: the NCHW->NHWC permutation.
  // An input padded with zero channels gets a filter padded the same way.
  const int64_t x_channels = b.tensor(x).shape[1];
  const bool padded = a.groups == 1 && weight->shape.size() == 4 && x_channels > weight->shape[1];
  CONVOY_ASSIGN_OR_RETURN(const void* w, b.Upload(padded ? ZeroPaddedChannels(*weight, x_channels) : *weight,
                                                 b.compute_dtype(), layout));
  size_t next = 2;
  Operand bias, scale, residual;
  if (a.has_bias) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* t, b.Constant(node, next++));
    CONVOY_ASSIGN_OR_RETURN(bias.constant, b.UploadFloats(t->data));
  }
  if (a.has_channel_scale) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* t, b.Constant(node, next++));
    CONVOY_ASSIGN_OR_RETURN(scale.constant, b.UploadFloats(t->data));
  }
  std::vector<int> inputs = {x};
  std::string residual_name;
  if (a.residual != ResidualPosition::kNone) {
    if (next < node.inputs.size()) residual_name = node.inputs[next];
    CONVOY_ASSIGN_OR_RETURN(residual.tensor, b.ComputeInput(node, next++, layout));
    inputs.push_back(residual.tensor);
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), layout));
  auto problem_for = [problem_in, x, layout, epilogue](int batch) { return problem_in(x, batch, layout, epilogue); };
  auto bind = [x, w, bias, scale, residual, y](TensorPointers t) {
    return Conv2dArgs{t[x], w, static_cast<const float*>(bias.constant), static_cast<const float*>(scale.constant),
                      residual.Get(t), t[y]};
  };
  CONVOY_RETURN_IF_ERROR(b.AddKernelStep<Conv2dOp>(node.name, inputs, {y}, problem_for, bind, w));
  // An algorithm that adds the residual onto the output buffer (oneDNN's sum post-op) gets the residual's storage
  // for its output where nothing reads the residual afterwards; elsewhere it copies the residual there itself.
  if (residual.tensor >= 0) b.PlaceOutputOverResidual(node, residual_name, x, residual.tensor, y);
  return absl::OkStatus();
}

Pool2dProblem Pool2dProblemFor(const Pool2dAttrs& a, const ImageDims& d, DataType dtype, Layout layout) {
  Pool2dProblem p;
  p.mode = a.kind == PoolKind::kMax ? PoolMode::kMax : PoolMode::kAverage;
  if (a.global) p.mode = a.kind == PoolKind::kMax ? PoolMode::kGlobalMax : PoolMode::kGlobalAverage;
  p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
  if (!a.global) {
    p.r = int(a.window.kernel_h), p.s = int(a.window.kernel_w);
    p.pad_top = int(a.window.pad_top), p.pad_bottom = int(a.window.pad_bottom);
    p.pad_left = int(a.window.pad_left), p.pad_right = int(a.window.pad_right);
    p.stride_h = int(a.window.stride_h), p.stride_w = int(a.window.stride_w);
    p.dilation_h = int(a.window.dilation_h), p.dilation_w = int(a.window.dilation_w);
    p.ceil_mode = a.ceil_mode, p.count_include_pad = a.count_include_pad;
  }
  p.dtype = dtype, p.layout = layout;
  return p;
}

absl::Status PlanPool2d(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<Pool2dAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  CONVOY_RETURN_IF_ERROR(ExpectImage(b, node, x));
  auto problem_in = [&b, a](int x, int batch, Layout layout) {
    return Pool2dProblemFor(a, b.Dims(x, batch), b.compute_dtype(), layout);
  };
  const Layout layout = b.BlockedLayoutIfImplemented<Pool2dOp>(problem_in(x, 1, b.layout()), {b.Dims(x, 1).c});
  CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0, layout));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), layout));
  auto problem_for = [problem_in, x, layout](int batch) { return problem_in(x, batch, layout); };
  auto bind = [x, y](TensorPointers t) { return Pool2dArgs{t[x], t[y]}; };
  return b.AddKernelStep<Pool2dOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanBatchNorm(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, 0));
  CONVOY_RETURN_IF_ERROR(ExpectImageOrMatrix(b, node, x));
  const float* params[4];
  for (size_t i = 0; i < 4; ++i) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* t, b.Constant(node, i + 1));
    CONVOY_ASSIGN_OR_RETURN(const void* p, b.UploadFloats(t->data));
    params[i] = static_cast<const float*>(p);
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  const float epsilon = node.As<BatchNormAttrs>().epsilon;
  const Layout layout = b.tensor(x).layout;
  auto problem_for = [&b, x, epsilon, layout](int batch) {
    const ImageDims d = b.Dims(x, batch);
    BatchNormProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w, p.epsilon = epsilon;
    p.dtype = b.compute_dtype(), p.layout = layout;
    return p;
  };
  const float *gamma = params[0], *beta = params[1], *mean = params[2], *var = params[3];
  auto bind = [x, y, gamma, beta, mean, var](TensorPointers t) {
    return BatchNormArgs{t[x], gamma, beta, mean, var, t[y]};
  };
  return b.AddKernelStep<BatchNormOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanActivation(PlanBuilder& b, const Node& node) {
  // Element-wise over the whole buffer: a blocked (NCHW8c) input stays blocked.
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const bool blocked = b.tensor(x).layout == Layout::kNCHW8c;
  CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0, blocked ? Layout::kNCHW8c : b.layout()));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  const convoy::Activation activation = KernelActivation(node.As<ActivationAttrs>().activation);
  auto problem_for = [&b, x, activation](int batch) {
    ActivationProblem p;
    p.count = NumElements(b.tensor(x).shape, batch);
    p.dtype = b.compute_dtype(), p.activation = activation;
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ActivationArgs{t[x], t[y]}; };
  return b.AddKernelStep<ActivationOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanUnary(PlanBuilder& b, const Node& node) {
  // Element-wise over the whole buffer, like an activation: a blocked (NCHW8c) input stays blocked.
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const bool blocked = b.tensor(x).layout == Layout::kNCHW8c;
  CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0, blocked ? Layout::kNCHW8c : b.layout()));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  const auto& a = node.As<UnaryAttrs>();
  const convoy::UnaryKind kind = LowerUnaryKind(a.kind);
  const float alpha = a.alpha, beta = a.beta;
  auto problem_for = [&b, x, kind, alpha, beta](int batch) {
    UnaryProblem p;
    p.count = NumElements(b.tensor(x).shape, batch);
    p.kind = kind, p.alpha = alpha, p.beta = beta, p.dtype = b.compute_dtype();
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return UnaryArgs{t[x], t[y]}; };
  return b.AddKernelStep<UnaryOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanChannelShuffle(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, 0));
  CONVOY_RETURN_IF_ERROR(ExpectImage(b, node, x));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.layout()));
  const int groups = static_cast<int>(node.As<ChannelShuffleAttrs>().groups);
  auto problem_for = [&b, x, groups](int batch) {
    const ImageDims d = b.Dims(x, batch);
    ChannelShuffleProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w, p.groups = groups;
    p.dtype = b.compute_dtype(), p.layout = b.layout();
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ChannelShuffleArgs{t[x], t[y]}; };
  return b.AddKernelStep<ChannelShuffleOp>(node.name, {x}, {y}, problem_for, bind);
}

// Concat and Split along the channels of [N,C,H,W] or [N,C] run in the plan's layout. Along any other axis, any
// rank, or with a constant operand they run on the logical (NCHW-order) tensors as the same channel problem over
// [outer, extent, inner] (n = outer, channels = each part's extent along the axis, h = inner, w = 1): a part is a
// contiguous run of extent * inner elements in each outer row. A constant operand is uploaded once.
namespace {

struct AxisSplit {
  int64_t outer = 1, inner = 1;
};
AxisSplit AroundAxis(const Shape& dims, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < axis; ++d) s.outer *= dims[d];
  for (size_t d = axis + 1; d < dims.size(); ++d) s.inner *= dims[d];
  return s;
}

absl::Status PlanConcatAlongAnyAxis(PlanBuilder& b, const Node& node, int64_t axis) {
  std::vector<Operand> parts;
  std::vector<int> tensors;
  std::vector<int> extents;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    Operand part;
    if (b.graph().IsConstant(node.inputs[i])) {
      CONVOY_ASSIGN_OR_RETURN(const Tensor* value, b.Constant(node, i));
      CONVOY_ASSIGN_OR_RETURN(part.constant, b.Upload(*value, b.compute_dtype(), Layout::kNCHW));
      extents.push_back(static_cast<int>(value->shape[axis]));
    } else {
      CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[i]));
      CONVOY_ASSIGN_OR_RETURN(part.tensor, b.Require(x, b.compute_dtype(), Layout::kNCHW));
      tensors.push_back(part.tensor);
      extents.push_back(static_cast<int>(b.tensor(part.tensor).shape[axis]));
    }
    parts.push_back(part);
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), Layout::kNCHW));
  auto problem_for = [&b, y, axis, extents](int batch) {
    const AxisSplit around = AroundAxis(b.tensor(y).Dims(batch), axis);
    ConcatProblem p;
    p.n = static_cast<int>(around.outer), p.h = static_cast<int>(around.inner), p.w = 1, p.channels = extents;
    p.dtype = b.compute_dtype(), p.layout = Layout::kNCHW;
    return p;
  };
  auto bind = [parts, y](TensorPointers t) {
    ConcatArgs args;
    for (const Operand& part : parts) args.inputs.push_back(part.Get(t));
    args.y = t[y];
    return args;
  };
  return b.AddKernelStep<ConcatOp>(node.name, tensors, {y}, problem_for, bind);
}

}  // namespace

absl::Status PlanConcat(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(Shape out, b.graph().ShapeOf(node.outputs[0]));
  const int64_t rank = static_cast<int64_t>(out.size());
  int64_t axis = node.As<ConcatAttrs>().axis;
  if (axis < 0) axis += rank;
  bool channel_form = (rank == 4 || rank == 2) && axis == 1;
  for (const std::string& in : node.inputs) channel_form &= !b.graph().IsConstant(in);
  if (!channel_form) return PlanConcatAlongAnyAxis(b, node, axis);
  std::vector<int> xs;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, i));
    CONVOY_RETURN_IF_ERROR(ExpectImageOrMatrix(b, node, x));
    xs.push_back(x);
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.layout()));
  auto problem_for = [&b, xs](int batch) {
    ConcatProblem p;
    const ImageDims d = b.Dims(xs[0], batch);
    p.n = d.n, p.h = d.h, p.w = d.w;
    for (int x : xs) p.channels.push_back(b.Dims(x, batch).c);
    p.dtype = b.compute_dtype(), p.layout = b.layout();
    return p;
  };
  auto bind = [xs, y](TensorPointers t) {
    ConcatArgs args;
    for (int x : xs) args.inputs.push_back(t[x]);
    args.y = t[y];
    return args;
  };
  return b.AddKernelStep<ConcatOp>(node.name, xs, {y}, problem_for, bind);
}

absl::Status PlanSplit(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const int64_t rank = static_cast<int64_t>(b.tensor(x).shape.size());
  int64_t axis = node.As<SplitAttrs>().axis;
  if (axis < 0) axis += rank;
  const bool channel_form = (rank == 4 || rank == 2) && axis == 1;
  const Layout layout = channel_form ? b.layout() : Layout::kNCHW;
  CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), layout));
  std::vector<int> ys;
  for (const std::string& out : node.outputs) {
    CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(out, b.compute_dtype(), layout));
    ys.push_back(y);
  }
  auto problem_for = [&b, x, ys, axis, channel_form, layout](int batch) {
    SplitProblem p;
    if (channel_form) {
      const ImageDims d = b.Dims(x, batch);
      p.n = d.n, p.h = d.h, p.w = d.w;
      for (int y : ys) p.channels.push_back(b.Dims(y, batch).c);
    } else {
      const AxisSplit around = AroundAxis(b.tensor(x).Dims(batch), axis);
      p.n = static_cast<int>(around.outer), p.h = static_cast<int>(around.inner), p.w = 1;
      for (int y : ys) p.channels.push_back(static_cast<int>(b.tensor(y).shape[axis]));
    }
    p.dtype = b.compute_dtype(), p.layout = layout;
    return p;
  };
  auto bind = [x, ys](TensorPointers t) {
    SplitArgs args;
    args.x = t[x];
    for (int y : ys) args.outputs.push_back(t[y]);
    return args;
  };
  return b.AddKernelStep<SplitOp>(node.name, {x}, ys, problem_for, bind);
}

absl::Status PlanSoftmax(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  // Softmax reads the logical [outer, axis, inner] order: spatial NHWC tensors go back to NCHW first.
  CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  const size_t rank = b.tensor(x).shape.size();
  int64_t axis = node.As<SoftmaxAttrs>().axis;
  if (axis < 0) axis += static_cast<int64_t>(rank);
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  auto problem_for = [&b, x, axis](int batch) {
    const Shape dims = b.tensor(x).Dims(batch);
    SoftmaxProblem p;
    p.outer = NumElements(Shape(dims.begin(), dims.begin() + axis));
    p.axis = dims[axis];
    p.inner = NumElements(Shape(dims.begin() + axis + 1, dims.end()));
    p.dtype = b.compute_dtype();
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return SoftmaxArgs{t[x], t[y]}; };
  return b.AddKernelStep<SoftmaxOp>(node.name, {x}, {y}, problem_for, bind);
}

namespace {

// How a Pad of any rank runs as the kernel's [N,C,H,W] pad of H and W. An image whose padded axes are among H and W
// pads in the plan's layout. Otherwise the row-major tensor is viewed as [outer, 1, H, W] around its padded axes:
// one padded axis `a` is H (outer = the axes before it, W = the product of those after it: whole rows are padded,
// reflected or repeated), or the last two axes are H and W. `h_axis` is -1 for the image form.
struct PadView {
  int h_axis = -1;
  bool pads_w = false;  // the axis after h_axis (the last one) is padded too
};

absl::StatusOr<PadView> PadViewOf(PlanBuilder& b, const Node& node, const Shape& shape,
                                  const std::vector<int64_t>& pads) {
  const size_t rank = shape.size();
  std::vector<size_t> axes;  // the padded (or cropped) axes
  for (size_t d = 0; d < rank && pads.size() == 2 * rank; ++d) {
    if (pads[d] != 0 || pads[d + rank] != 0) axes.push_back(d);
  }
  if (pads.size() != 2 * rank) {
    return b.NodeError(node, absl::StrCat(pads.size(), " pad values for input ", ShapeToString(shape)));
  }
  PadView view;
  if (rank == 4 && std::all_of(axes.begin(), axes.end(), [](size_t d) { return d >= 2; })) return view;
  if (axes.empty()) {
    view.h_axis = static_cast<int>(rank) - 1;  // a copy
  } else if (axes.size() == 1) {
    view.h_axis = static_cast<int>(axes[0]);
  } else if (axes.size() == 2 && axes[0] + 1 == axes[1] && axes[1] == rank - 1) {
    view.h_axis = static_cast<int>(axes[0]), view.pads_w = true;
  } else {
    return b.NodeError(node, absl::StrCat("pads axes [", absl::StrJoin(axes, ","), "] of the rank-", rank, " input ",
                                          ShapeToString(shape), "; the kernel pads one axis, or the last two"));
  }
  return view;
}

}  // namespace

absl::Status PlanPad(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<PadAttrs>();
  const auto& pads = a.pads;  // every axis's begin, then every axis's end; negative ones crop
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const Shape shape = b.tensor(x).shape;
  const int rank = static_cast<int>(shape.size());
  CONVOY_ASSIGN_OR_RETURN(const PadView view, PadViewOf(b, node, shape, pads));
  const Layout layout = view.h_axis < 0 ? b.layout() : Layout::kNCHW;
  CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0, layout));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), layout));
  const convoy::PadMode mode = a.mode == PadMode::kReflect ? convoy::PadMode::kReflect
                               : a.mode == PadMode::kEdge  ? convoy::PadMode::kEdge
                                                           : convoy::PadMode::kConstant;
  const float value = a.value;
  auto problem_for = [&b, x, pads, rank, view, layout, mode, value](int batch) {
    PadProblem p;
    if (view.h_axis < 0) {
      const ImageDims d = b.Dims(x, batch);
      p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
      p.pad_top = int(pads[2]), p.pad_left = int(pads[3]), p.pad_bottom = int(pads[6]), p.pad_right = int(pads[7]);
    } else {
      const Shape dims = b.tensor(x).Dims(batch);
      const int h = view.h_axis;
      p.n = int(NumElements(Shape(dims.begin(), dims.begin() + h))), p.c = 1, p.h = int(dims[h]);
      p.w = int(NumElements(Shape(dims.begin() + h + 1, dims.end())));
      p.pad_top = int(pads[h]), p.pad_bottom = int(pads[h + rank]);
      if (view.pads_w) p.pad_left = int(pads[h + 1]), p.pad_right = int(pads[h + 1 + rank]);
    }
    p.mode = mode, p.value = value;
    p.dtype = b.compute_dtype(), p.layout = layout;
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return PadArgs{t[x], t[y]}; };
  return b.AddKernelStep<PadOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanResize(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, 0));
  CONVOY_RETURN_IF_ERROR(ExpectImage(b, node, x));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.layout()));
  const ResizeAttrs attrs = node.As<ResizeAttrs>();
  auto problem_for = [&b, x, attrs](int batch) {
    const ImageDims d = b.Dims(x, batch);
    ResizeProblem p = LowerResize(attrs, d.n, d.c, d.h, d.w);
    p.dtype = b.compute_dtype(), p.layout = b.layout();
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ResizeArgs{t[x], t[y]}; };
  return b.AddKernelStep<ResizeOp>(node.name, {x}, {y}, problem_for, bind);
}

// ArgMax writes its indices as the served type when its output is a graph output served as UINT8, INT32 or INT64
// (a class map), else as FP32 (the graph's float indices, converted for the consumers). Over the channels of a 4-D
// image in an NHWC plan it reads [N*H*W, C, 1]; everything else is read in the logical (NCHW) order.
absl::Status PlanArgMax(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<ArgMaxAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const int64_t rank = static_cast<int64_t>(b.tensor(x).shape.size());
  const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  const bool channels_last = rank == 4 && axis == 1 && b.layout() == Layout::kNHWC;
  if (rank == 4 && axis == 1) {
    CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0));
  } else {
    CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  }
  DataType index_dtype = DataType::kFloat32;
  auto served = b.options().io_dtypes.find(node.outputs[0]);
  if (served != b.options().io_dtypes.end() &&
      (served->second == DataType::kUInt8 || served->second == DataType::kInt32 ||
       served->second == DataType::kInt64)) {
    index_dtype = served->second;
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], index_dtype, Layout::kNCHW));
  const DataType dtype = b.compute_dtype();
  const bool last = a.select_last_index;
  auto problem_for = [&b, x, axis, channels_last, dtype, index_dtype, last](int batch) {
    const Shape dims = b.tensor(x).Dims(batch);  // logical NCHW-order dims
    ArgMaxProblem p;
    if (channels_last) {
      p.outer = dims[0] * dims[2] * dims[3], p.axis = dims[1], p.inner = 1;
    } else {
      p.outer = NumElements(Shape(dims.begin(), dims.begin() + axis));
      p.axis = dims[axis];
      p.inner = NumElements(Shape(dims.begin() + axis + 1, dims.end()));
    }
    p.dtype = dtype, p.index_dtype = index_dtype, p.select_last_index = last;
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ArgMaxArgs{t[x], t[y]}; };
  return b.AddKernelStep<ArgMaxOp>(node.name, {x}, {y}, problem_for, bind);
}

// LayerNorm over the channels of a 4-D image in an NHWC plan reads [N*H*W, C, 1] in place; every other form reads
// the logical (NCHW) order as [outer, normalized, inner]. The scale and bias stay FP32; the statistics outputs
// (ONNX's Mean and InvStdDev) are written in the compute type, in the logical order.
absl::Status PlanLayerNorm(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<LayerNormAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const int64_t rank = static_cast<int64_t>(b.tensor(x).shape.size());
  const int64_t axis = a.axis < 0 ? a.axis + rank : a.axis;
  const int64_t end = a.num_axes > 0 ? axis + a.num_axes : rank;
  const bool channels = rank == 4 && axis == 1 && end == 2;
  const bool channels_last = channels && b.layout() == Layout::kNHWC;
  if (channels) {
    CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0));
  } else {
    CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  }
  CONVOY_ASSIGN_OR_RETURN(const Tensor* scale_tensor, b.Constant(node, 1));
  CONVOY_ASSIGN_OR_RETURN(const void* scale, b.UploadFloats(scale_tensor->data));
  const void* bias = nullptr;
  if (a.has_bias) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* bias_tensor, b.Constant(node, 2));
    CONVOY_ASSIGN_OR_RETURN(bias, b.UploadFloats(bias_tensor->data));
  }
  std::vector<int> outputs;
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  outputs.push_back(y);
  for (size_t i = 1; i < node.outputs.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(int stats, b.AddOutput(node.outputs[i], b.compute_dtype(), Layout::kNCHW));
    outputs.push_back(stats);
  }
  const DataType dtype = b.compute_dtype();
  const LayerNormAttrs attrs = a;
  auto problem_for = [&b, x, axis, end, channels_last, dtype, attrs](int batch) {
    const Shape dims = b.tensor(x).Dims(batch);  // logical NCHW-order dims
    LayerNormProblem p;
    if (channels_last) {
      p.outer = dims[0] * dims[2] * dims[3], p.axis = dims[1], p.inner = 1;
    } else {
      p.outer = NumElements(Shape(dims.begin(), dims.begin() + axis));
      p.axis = NumElements(Shape(dims.begin() + axis, dims.begin() + end));
      p.inner = NumElements(Shape(dims.begin() + end, dims.end()));
    }
    p.epsilon = attrs.epsilon, p.has_bias = attrs.has_bias, p.write_stats = attrs.write_stats, p.dtype = dtype;
    return p;
  };
  auto bind = [x, scale, bias, outputs](TensorPointers t) {
    LayerNormArgs args{t[x], static_cast<const float*>(scale), static_cast<const float*>(bias), t[outputs[0]]};
    if (outputs.size() == 3) args.mean = t[outputs[1]], args.inv_std_dev = t[outputs[2]];
    return args;
  };
  return b.AddKernelStep<LayerNormOp>(node.name, {x}, outputs, problem_for, bind);
}

// ConvTranspose2d runs in the plan's plain layout (NCHW or NHWC) with the filter kept in ONNX's [C, K/g, R, S] order.
absl::Status PlanConvTranspose2d(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<ConvTranspose2dAttrs>();
  const Layout layout = b.layout();
  CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, 0, layout));
  CONVOY_RETURN_IF_ERROR(ExpectImage(b, node, x));
  CONVOY_ASSIGN_OR_RETURN(const Tensor* weight, b.Constant(node, 1));
  CONVOY_ASSIGN_OR_RETURN(const void* w, b.Upload(*weight, b.compute_dtype(), Layout::kNCHW));
  const void* bias = nullptr;
  if (a.has_bias) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* bias_tensor, b.Constant(node, 2));
    CONVOY_ASSIGN_OR_RETURN(bias, b.UploadFloats(bias_tensor->data));
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), layout));
  const int k = static_cast<int>(weight->shape[1] * a.groups);
  const DataType dtype = b.compute_dtype();
  const ConvTranspose2dAttrs attrs = a;
  auto problem_for = [&b, x, k, dtype, layout, attrs](int batch) {
    const ImageDims d = b.Dims(x, batch);
    ConvTranspose2dProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w, p.k = k;
    p.r = int(attrs.kernel_h), p.s = int(attrs.kernel_w);
    p.out_h = int(attrs.out_h), p.out_w = int(attrs.out_w);
    p.pad_top = int(attrs.pad_top), p.pad_left = int(attrs.pad_left);
    p.stride_h = int(attrs.stride_h), p.stride_w = int(attrs.stride_w);
    p.dilation_h = int(attrs.dilation_h), p.dilation_w = int(attrs.dilation_w);
    p.groups = int(attrs.groups), p.has_bias = attrs.has_bias;
    p.dtype = dtype, p.layout = layout;
    return p;
  };
  auto bind = [x, w, bias, y](TensorPointers t) {
    return ConvTranspose2dArgs{t[x], w, static_cast<const float*>(bias), t[y]};
  };
  return b.AddKernelStep<ConvTranspose2dOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanTranspose(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  {
    // [N,C,H,W] lying as NHWC is [N,H,W,C] lying row-major, and back (ConvNeXt's permutes around its LayerNorms and
    // Linear layers in an NHWC plan): a view, no step.
    const PlanTensor& t = b.tensor(x);
    const std::vector<int64_t>& perm = node.As<TransposeAttrs>().perm;
    const bool image = t.shape.size() == 4;
    if (image && t.layout == Layout::kNHWC && perm == std::vector<int64_t>{0, 2, 3, 1}) {
      return b.AddAlias(node.outputs[0], x, Layout::kNCHW).status();
    }
    if (image && t.layout == Layout::kNCHW && b.layout() == Layout::kNHWC &&
        perm == std::vector<int64_t>{0, 3, 1, 2}) {
      return b.AddAlias(node.outputs[0], x, Layout::kNHWC).status();
    }
  }
  // The permutation names logical (row-major NCHW-order) dims: spatial NHWC tensors go back to NCHW first, and the
  // output is NCHW whatever its rank (a consumer that wants NHWC converts it).
  CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  const std::vector<int64_t>& perm = node.As<TransposeAttrs>().perm;
  const size_t rank = b.tensor(x).shape.size();
  if (rank < 1 || rank > static_cast<size_t>(TransposeProblem::kMaxRank) || perm.size() != rank) {
    return b.NodeError(node, absl::StrCat("the kernel transposes ranks 1..", TransposeProblem::kMaxRank, "; got ",
                                          ShapeToString(b.tensor(x).shape), " with a perm of ", perm.size(),
                                          " entries"));
  }
  // Plans, their I/O metadata and the batcher keep the dynamic batch in dim 0.
  if (b.tensor(x).shape[0] == kBatch && perm[0] != 0) {
    return b.NodeError(node, absl::StrCat("perm [", absl::StrJoin(perm, ","), "] moves the dynamic batch axis 0 of ",
                                          ShapeToString(b.tensor(x).shape), "; only the other axes can be permuted"));
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), Layout::kNCHW));
  std::vector<int> kernel_perm(perm.begin(), perm.end());
  auto problem_for = [&b, x, kernel_perm](int batch) {
    TransposeProblem p;
    p.dims = b.tensor(x).Dims(batch);
    p.perm = kernel_perm;
    p.dtype = b.compute_dtype();
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return TransposeArgs{t[x], t[y]}; };
  return b.AddKernelStep<TransposeOp>(node.name, {x}, {y}, problem_for, bind);
}

absl::Status PlanAlias(PlanBuilder& b, const Node& node) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  // A view reinterprets the logical (row-major NCHW) order, so spatial NHWC tensors are converted first.
  if (node.op() != OpKind::kIdentity) {
    CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.tensor(x).dtype, Layout::kNCHW));
  }
  return b.AddAlias(node.outputs[0], x).status();
}

namespace {

// A broadcast the image forms do not cover, seen on the row-major (NCHW-order) tensors: the operand's axes other than
// ones form one block [begin, end) of `out`'s axes (numpy aligns the trailing axes), so `out` is
// [prod(out[:begin]), prod(out[begin:end]), 1, prod(out[end:])] with one operand value per "channel". A Linear
// layer's bias [C] onto [N,H,W,C] (the last axis), one value per row ([M,1] onto [M,C], [N,G,1] onto [N,G,S]: the
// mean and deviation of a normalization written out), GroupNorm's [1,C,1] scale onto [N,C,S] (a middle axis).
struct BlockView {
  size_t begin = 0, end = 0;
  bool used() const { return end > begin; }
};

BlockView BlockViewOf(const Shape& operand, const Shape& out) {
  if (operand.size() > out.size()) return {};
  Shape aligned(out.size() - operand.size(), 1);
  aligned.insert(aligned.end(), operand.begin(), operand.end());
  BlockView view;
  for (size_t d = 0; d < out.size(); ++d) {
    if (aligned[d] == 1) continue;
    if (!view.used()) view.begin = d;
    view.end = d + 1;
  }
  for (size_t d = view.begin; d < view.end; ++d) {
    if (aligned[d] != out[d]) return {};
  }
  return view;
}

}  // namespace

// The kernel broadcasts only its second operand, in one of the image forms (same shape, [N,C,1,1], [1,C,1,1] or
// [C,1,1], a scalar; [C] onto [N,C]) or a block view (above, `view`); anything else fails the load.
absl::StatusOr<BinaryBroadcast> ClassifyBroadcast(PlanBuilder& b, const Node& node, const Shape& operand,
                                                  const Shape& out, BlockView& view) {
  view = BlockView{};
  if (operand == out) return BinaryBroadcast::kNone;
  const bool has_batch = std::count(operand.begin(), operand.end(), kBatch) > 0;
  if (!has_batch && NumElements(operand) == 1) return BinaryBroadcast::kScalar;
  if (out.size() == 4) {
    const int64_t c = out[1];
    if (operand.size() == 4 && operand[1] == c && operand[2] == 1 && operand[3] == 1) {
      if (operand[0] == 1) return BinaryBroadcast::kPerChannel;
      if (operand[0] == out[0]) return BinaryBroadcast::kPerImageChannel;
    }
    if (operand.size() == 3 && operand[0] == c && operand[1] == 1 && operand[2] == 1) {
      return BinaryBroadcast::kPerChannel;
    }
  }
  if (out.size() == 2 && ((operand.size() == 1 && operand[0] == out[1]) ||
                          (operand.size() == 2 && operand[0] == 1 && operand[1] == out[1]))) {
    return BinaryBroadcast::kPerChannel;
  }
  view = BlockViewOf(operand, out);
  if (view.used()) return BinaryBroadcast::kPerChannel;
  return b.NodeError(node, absl::StrCat("cannot broadcast ", ShapeToString(operand), " onto ", ShapeToString(out),
                                        ": the kernel supports the same shape, [N,C,1,1], [1,C,1,1], a scalar, and "
                                        "an operand whose axes other than ones are one block of the output's"));
}

absl::Status PlanBinary(PlanBuilder& b, const Node& node) {
  const BinaryKind kind = node.As<BinaryAttrs>().kind;
  CONVOY_ASSIGN_OR_RETURN(const Shape out_shape, b.graph().ShapeOf(node.outputs[0]));
  CONVOY_ASSIGN_OR_RETURN(Shape s0, b.graph().ShapeOf(node.inputs[0]));
  CONVOY_ASSIGN_OR_RETURN(Shape s1, b.graph().ShapeOf(node.inputs[1]));
  size_t first = 0, second = 1;
  const bool commutative = kind == BinaryKind::kAdd || kind == BinaryKind::kMul;
  if (commutative && (s0 != out_shape || b.graph().IsConstant(node.inputs[0])) && s1 == out_shape &&
      !b.graph().IsConstant(node.inputs[1])) {
    std::swap(first, second);
    std::swap(s0, s1);
  }
  if (s0 != out_shape || b.graph().IsConstant(node.inputs[first])) {
    return b.NodeError(node, absl::StrCat("the first operand must be a computed tensor of the output's shape ",
                                          ShapeToString(out_shape), "; got ", ShapeToString(s0), " and ",
                                          ShapeToString(s1)));
  }
  BlockView view;
  CONVOY_ASSIGN_OR_RETURN(const BinaryBroadcast broadcast, ClassifyBroadcast(b, node, s1, out_shape, view));
  const Tensor* constant = b.graph().FindConstant(node.inputs[second]);
  // A blocked first operand stays blocked (EfficientNet's squeeze-excitation multiply between blocked convolutions),
  // except against a same-shape constant, which is uploaded in the plain layout; a block view reads row-major data.
  CONVOY_ASSIGN_OR_RETURN(int first_value, b.Value(node.inputs[first]));
  const bool rows = view.used();
  const bool blocked = b.tensor(first_value).layout == Layout::kNCHW8c && !rows &&
                       !(constant != nullptr && broadcast == BinaryBroadcast::kNone);
  const Layout compute_layout = blocked ? Layout::kNCHW8c : rows ? Layout::kNCHW : b.layout();
  CONVOY_ASSIGN_OR_RETURN(int x, b.ComputeInput(node, first, compute_layout));
  Operand operand;
  std::vector<int> inputs = {x};
  if (constant != nullptr) {
    const Layout layout = broadcast == BinaryBroadcast::kNone ? b.layout() : Layout::kNCHW;
    CONVOY_ASSIGN_OR_RETURN(operand.constant, b.Upload(*constant, b.compute_dtype(), layout));
  } else {
    CONVOY_ASSIGN_OR_RETURN(operand.tensor, b.ComputeInput(node, second, compute_layout));
    inputs.push_back(operand.tensor);
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), b.tensor(x).layout));
  const BinaryOp op = kind == BinaryKind::kAdd   ? BinaryOp::kAdd
                      : kind == BinaryKind::kSub ? BinaryOp::kSub
                      : kind == BinaryKind::kMul ? BinaryOp::kMul
                                                 : BinaryOp::kDiv;
  const Layout layout = b.tensor(x).layout;
  auto problem_for = [&b, x, op, broadcast, layout, view](int batch) {
    ImageDims d = b.Dims(x, batch);
    if (view.used()) {
      const Shape dims = b.tensor(x).Dims(batch);
      auto extent = [&dims](size_t from, size_t to) {
        return int(NumElements(Shape(dims.begin() + from, dims.begin() + to)));
      };
      d = {extent(0, view.begin), extent(view.begin, view.end), 1, extent(view.end, dims.size())};
    }
    BinaryProblem p;
    p.op = op, p.broadcast = broadcast;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
    p.dtype = b.compute_dtype(), p.layout = layout;
    return p;
  };
  auto bind = [x, operand, y](TensorPointers t) { return BinaryArgs{t[x], operand.Get(t), t[y]}; };
  return b.AddKernelStep<BinaryElementwiseOp>(node.name, inputs, {y}, problem_for, bind);
}

namespace {

// Gemm's beta * C in the kernel's epilogue: a per-column bias [N] when C is the same for every row (a scalar, [N],
// [1,N], [1,1]); otherwise (C [M,N] or [M,1]) C broadcast to [M, N] as the residual added before the activation,
// which needs a static M (a row count that does not grow with the batch).
struct GemmBiasOperand {
  const float* columns = nullptr;
  const void* matrix = nullptr;
};

absl::StatusOr<GemmBiasOperand> GemmBias(PlanBuilder& b, const Node& node, const Tensor& c, float beta,
                                         const Shape& a_rows, int64_t n) {
  const Shape& s = c.shape;
  const int64_t rows = s.size() == 2 ? s[0] : 1, cols = s.empty() ? 1 : s.back();
  if (s.size() > 2 || (cols != 1 && cols != n)) {
    return b.NodeError(node, absl::StrCat("bias ", ShapeToString(s), " does not broadcast to [M,", n, "]"));
  }
  GemmBiasOperand operand;
  if (rows == 1) {
    std::vector<float> bias(n);
    for (int64_t j = 0; j < n; ++j) bias[j] = beta * c.data[cols == 1 ? 0 : j];
    CONVOY_ASSIGN_OR_RETURN(const void* p, b.UploadFloats(bias));
    operand.columns = static_cast<const float*>(p);
    return operand;
  }
  const int64_t m = NumElements(a_rows);
  if (std::count(a_rows.begin(), a_rows.end(), kBatch) > 0 || m != rows) {
    return b.NodeError(node, absl::StrCat("bias ", ShapeToString(s), " varies along M, so A's rows ",
                                          ShapeToString(a_rows), " must be ", rows, " static rows"));
  }
  Tensor matrix{{m, n}, std::vector<float>(m * n)};
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) matrix.data[i * n + j] = beta * c.data[i * cols + (cols == 1 ? 0 : j)];
  }
  CONVOY_ASSIGN_OR_RETURN(operand.matrix, b.Upload(matrix, b.compute_dtype(), Layout::kNCHW));
  return operand;
}

// Gemm's transA: A [K, M] transposed to [M, K] by a Transpose step on the row-major matrix. K must be static (it
// cannot be the batch axis).
absl::StatusOr<int> TransposedA(PlanBuilder& b, const Node& node, int x) {
  const Shape s = b.tensor(x).shape;
  if (s.size() != 2 || s[0] == kBatch) {
    return b.NodeError(node, absl::StrCat("transA needs a 2-D A [K, M] with a static K, got ", ShapeToString(s)));
  }
  CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  CONVOY_ASSIGN_OR_RETURN(int t, b.AddIntermediate(absl::StrCat(node.name, "/A_transposed"), {s[1], s[0]},
                                                   b.compute_dtype(), Layout::kNCHW));
  const DataType dtype = b.compute_dtype();
  auto problem_for = [s, dtype](int) {
    TransposeProblem p;
    p.dims = s;
    p.perm = {1, 0};
    p.dtype = dtype;
    return p;
  };
  auto bind = [x, t](TensorPointers tensors) { return TransposeArgs{tensors[x], tensors[t]}; };
  CONVOY_RETURN_IF_ERROR(b.AddKernelStep<TransposeOp>(absl::StrCat(node.name, "/transpose_a"), {x}, {t},
                                                      problem_for, bind));
  return t;
}

}  // namespace

// A [M, K] by a constant B: one GEMM step. An N-D A [..., M, K] (MatMul; row-major, so NCHW-order) is one GEMM of
// its flattened rows by a 2-D B, or one step per matrix by a B with A's leading dims. transA adds a Transpose step
// before; a bias that varies along M rides in the epilogue as a constant residual (GemmBias).
absl::Status PlanGemm(PlanBuilder& b, const Node& node) {
  const auto& a = node.As<GemmAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(node.inputs[0]));
  const size_t rank = b.tensor(x).shape.size();
  if (rank < 2) return b.NodeError(node, absl::StrCat("A must be [..., M, K], got ", ShapeToString(b.tensor(x).shape)));
  if (a.transpose_a) {
    CONVOY_ASSIGN_OR_RETURN(x, TransposedA(b, node, x));
  } else if (rank == 2) {
    CONVOY_ASSIGN_OR_RETURN(x, b.ComputeInput(node, 0));
  } else {
    CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), Layout::kNCHW));
  }
  CONVOY_ASSIGN_OR_RETURN(const Tensor* weight, b.Constant(node, 1));
  const size_t wrank = weight->shape.size();
  const int64_t k = b.tensor(x).shape.back();
  const int64_t n = a.transpose_b ? weight->shape[wrank - 2] : weight->shape[wrank - 1];
  const int64_t matrices = NumElements(Shape(weight->shape.begin(), weight->shape.end() - 2));
  // The kernel wants each B as [n, k]; alpha is folded into it once here.
  std::vector<const void*> packed_weights;
  for (int64_t mat = 0; mat < matrices; ++mat) {
    const float* source = weight->data.data() + mat * n * k;
    Tensor packed{{n, k}, std::vector<float>(n * k)};
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t i = 0; i < k; ++i) {
        packed.data[j * k + i] = a.alpha * (a.transpose_b ? source[j * k + i] : source[i * n + j]);
      }
    }
    CONVOY_ASSIGN_OR_RETURN(const void* w, b.Upload(packed, b.compute_dtype(), Layout::kNCHW));
    packed_weights.push_back(w);
  }
  GemmBiasOperand bias_operand;
  if (a.has_bias && a.beta != 0.0f) {
    CONVOY_ASSIGN_OR_RETURN(const Tensor* c, b.Constant(node, 2));
    const Shape& xs = b.tensor(x).shape;
    CONVOY_ASSIGN_OR_RETURN(bias_operand, GemmBias(b, node, *c, a.beta, Shape(xs.begin(), xs.end() - 1), n));
  }
  const float* bias = bias_operand.columns;
  const void* matrix_bias = bias_operand.matrix;
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(node.outputs[0], b.compute_dtype(), Layout::kNCHW));
  const bool tf32 = b.options().precision == Precision::kTf32;
  const size_t element = DataTypeSize(b.compute_dtype());
  const convoy::Activation activation = KernelActivation(a.activation);
  for (int64_t mat = 0; mat < matrices; ++mat) {
    // One shared B: every row of A ([..., M, K] flattened) in one GEMM; else matrix `mat` of A (static dims).
    auto problem_for = [&b, x, n, k, bias, matrix_bias, tf32, matrices, activation](int batch) {
      const Shape dims = b.tensor(x).Dims(batch);
      GemmProblem p;
      p.m = int(matrices == 1 ? NumElements(Shape(dims.begin(), dims.end() - 1)) : dims[dims.size() - 2]);
      p.n = int(n), p.k = int(k);
      p.dtype = b.compute_dtype(), p.allow_tf32 = tf32;
      p.epilogue.has_bias = bias != nullptr;
      p.epilogue.residual = matrix_bias != nullptr ? ResidualMode::kBeforeActivation : ResidualMode::kNone;
      p.epilogue.activation = activation;
      return p;
    };
    const int64_t rows = matrices == 1 ? 0 : b.tensor(x).shape[rank - 2];
    const size_t a_offset = mat * rows * k * element, y_offset = mat * rows * n * element;
    const void* w = packed_weights[mat];
    // A matrix bias lies as the output does ([..., M, N]): matrix `mat`'s part starts at the same offset.
    const void* residual = matrix_bias == nullptr ? nullptr : static_cast<const char*>(matrix_bias) + y_offset;
    auto bind = [x, w, bias, residual, y, a_offset, y_offset](TensorPointers t) {
      return GemmArgs{static_cast<const char*>(t[x]) + a_offset, w, bias, nullptr, residual,
                      static_cast<char*>(t[y]) + y_offset};
    };
    const std::string name = matrices == 1 ? node.name : absl::StrCat(node.name, "/", mat);
    CONVOY_RETURN_IF_ERROR(b.AddKernelStep<GemmOp>(name, {x}, {y}, problem_for, bind, w));
  }
  return absl::OkStatus();
}

SqueezeExcitationProblem SqueezeExcitationProblemFor(const SqueezeExcitationBranch& branch, const Shape& dims,
                                                     DataType dtype, Layout layout) {
  const auto& reduce = branch.reduce->As<Conv2dAttrs>();
  const auto& expand = branch.expand->As<Conv2dAttrs>();
  SqueezeExcitationProblem p;
  p.n = int(dims[0]), p.c = int(dims[1]), p.h = int(dims[2]), p.w = int(dims[3]);
  p.squeeze = int(branch.squeeze);
  p.has_hidden_bias = reduce.has_bias, p.has_gate_bias = expand.has_bias;
  p.hidden_activation = KernelActivation(reduce.activation);
  p.gate_activation = KernelActivation(expand.activation);
  p.dtype = dtype, p.layout = layout;
  return p;
}

absl::Status PlanSqueezeExcitation(PlanBuilder& b, const SqueezeExcitationBranch& branch) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.Value(branch.x));
  // A blocked x stays blocked (EfficientNet's blocked plan); anything else runs in the plan's plain layout.
  const bool blocked = b.tensor(x).layout == Layout::kNCHW8c && branch.channels % kLayoutChannelBlock == 0;
  const Layout layout = blocked ? Layout::kNCHW8c : b.layout();
  CONVOY_ASSIGN_OR_RETURN(x, b.Require(x, b.compute_dtype(), layout));
  // The first filter [S, C, 1, 1] is the kernel's w1 [S, C] as it is; the second, [C, S, 1, 1], is uploaded
  // transposed to [S, C] (problems.h).
  const float* params[4] = {nullptr, nullptr, nullptr, nullptr};  // w1, b1, w2t, b2
  const Node* convs[2] = {branch.reduce, branch.expand};
  for (int i = 0; i < 2; ++i) {
    const int inputs = convs[i]->As<Conv2dAttrs>().has_bias ? 2 : 1;
    for (int j = 0; j < inputs; ++j) {
      CONVOY_ASSIGN_OR_RETURN(const Tensor* value, b.Constant(*convs[i], 1 + j));
      std::vector<float> data = value->data;
      if (i == 1 && j == 0) {
        const int64_t c = branch.channels, s = branch.squeeze;
        for (int64_t k = 0; k < c; ++k)
          for (int64_t h = 0; h < s; ++h) data[h * c + k] = value->data[k * s + h];
      }
      CONVOY_ASSIGN_OR_RETURN(const void* uploaded, b.UploadFloats(data));
      params[2 * i + j] = static_cast<const float*>(uploaded);
    }
  }
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddOutput(branch.multiply->outputs[0], b.compute_dtype(), layout));
  auto problem_for = [&b, x, branch, layout](int batch) {
    return SqueezeExcitationProblemFor(branch, b.tensor(x).Dims(batch), b.compute_dtype(), layout);
  };
  auto bind = [x, y, params](TensorPointers t) {
    return SqueezeExcitationArgs{t[x], params[0], params[1], params[2], params[3], t[y]};
  };
  return b.AddKernelStep<SqueezeExcitationOp>(branch.multiply->name, {x}, {y}, problem_for, bind);
}

}  // namespace convoy::runtime
