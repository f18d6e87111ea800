// Shape inference for every op of the graph IR (declared in graph.h as InferOutputShapes). Each rule checks the
// input count and ranks, and its errors name the node, the input and the numbers expected and found.
#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {
namespace {

absl::Status NodeError(const Node& node, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", OpKindName(node.op()), "): ", what));
}

absl::Status ExpectInputCount(const Node& node, size_t min, size_t max) {
  size_t n = node.inputs.size();
  if (n < min || n > max) {
    return NodeError(node, absl::StrCat("expected ", min == max ? absl::StrCat(min) : absl::StrCat(min, "-", max),
                                        " inputs, got ", n));
  }
  for (size_t i = 0; i < min; ++i) {
    if (node.inputs[i].empty()) return NodeError(node, absl::StrCat("required input ", i, " is missing"));
  }
  return absl::OkStatus();
}

absl::Status ExpectRank(const Node& node, const std::vector<Shape>& in, size_t index, size_t rank) {
  if (in[index].size() != rank) {
    return NodeError(node, absl::StrCat("input ", index, " '", node.inputs[index], "' must have rank ", rank, ", got ",
                                        ShapeToString(in[index])));
  }
  return absl::OkStatus();
}

absl::Status ExpectVector(const Node& node, const std::vector<Shape>& in, size_t index, int64_t length,
                          const char* role) {
  if (in[index].size() != 1 || in[index][0] != length) {
    return NodeError(node, absl::StrCat(role, " '", node.inputs[index], "' must have shape [", length, "], got ",
                                        ShapeToString(in[index])));
  }
  return absl::OkStatus();
}

// Output extent of a sliding window; batch-free dims only.
absl::StatusOr<int64_t> WindowOutput(const Node& node, int64_t in, int64_t kernel, int64_t stride, int64_t pad_begin,
                                     int64_t pad_end, int64_t dilation, bool ceil_mode, const char* axis) {
  if (kernel < 1 || stride < 1 || dilation < 1 || pad_begin < 0 || pad_end < 0) {
    return NodeError(node, absl::StrCat("invalid window along ", axis, ": kernel ", kernel, ", stride ", stride,
                                        ", dilation ", dilation, ", pads ", pad_begin, "/", pad_end));
  }
  int64_t span = dilation * (kernel - 1) + 1;
  int64_t room = in + pad_begin + pad_end - span;
  if (room < 0) {
    return NodeError(node, absl::StrCat("window of extent ", span, " does not fit the ", axis, " extent ", in,
                                        " plus padding ", pad_begin + pad_end));
  }
  int64_t out = (ceil_mode ? (room + stride - 1) / stride : room / stride) + 1;
  // With ceil mode the last window must start inside the input or the begin padding (ONNX/PyTorch rule).
  if (ceil_mode && (out - 1) * stride >= in + pad_begin) --out;
  return out;
}

absl::StatusOr<std::vector<Shape>> InferConv(const Node& node, const std::vector<Shape>& in) {
  const auto& a = node.As<Conv2dAttrs>();
  size_t expected = 2 + a.has_bias + a.has_channel_scale + (a.residual != ResidualPosition::kNone);
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, expected, expected));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 0, 4));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 1, 4));
  const Shape& x = in[0];
  const Shape& w = in[1];
  if (a.groups < 1 || x[1] % a.groups != 0 || w[0] % a.groups != 0 || w[1] * a.groups != x[1]) {
    return NodeError(node, absl::StrCat("input has ", x[1], " channels, weight ", ShapeToString(w), " with groups ",
                                        a.groups, " expects ", w[1] * a.groups));
  }
  if (w[2] != a.window.kernel_h || w[3] != a.window.kernel_w) {
    return NodeError(node, absl::StrCat("weight ", ShapeToString(w), " does not match kernel ", a.window.kernel_h,
                                        "x", a.window.kernel_w));
  }
  size_t next = 2;
  if (a.has_bias) CONVOY_RETURN_IF_ERROR(ExpectVector(node, in, next++, w[0], "bias"));
  if (a.has_channel_scale) CONVOY_RETURN_IF_ERROR(ExpectVector(node, in, next++, w[0], "channel scale"));
  const Window2d& win = a.window;
  CONVOY_ASSIGN_OR_RETURN(int64_t oh, WindowOutput(node, x[2], win.kernel_h, win.stride_h, win.pad_top,
                                                   win.pad_bottom, win.dilation_h, false, "height"));
  CONVOY_ASSIGN_OR_RETURN(int64_t ow, WindowOutput(node, x[3], win.kernel_w, win.stride_w, win.pad_left,
                                                   win.pad_right, win.dilation_w, false, "width"));
  Shape out = {x[0], w[0], oh, ow};
  if (a.residual != ResidualPosition::kNone && in[next] != out) {
    return NodeError(node, absl::StrCat("residual '", node.inputs[next], "' has shape ", ShapeToString(in[next]),
                                        ", the output has ", ShapeToString(out)));
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferPool(const Node& node, const std::vector<Shape>& in) {
  const auto& a = node.As<Pool2dAttrs>();
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 0, 4));
  const Shape& x = in[0];
  if (a.global) return std::vector<Shape>{{x[0], x[1], 1, 1}};
  const Window2d& win = a.window;
  if (win.pad_top >= win.kernel_h || win.pad_bottom >= win.kernel_h || win.pad_left >= win.kernel_w ||
      win.pad_right >= win.kernel_w) {
    // A window made only of padding has no input element to pool.
    if (a.kind == PoolKind::kMax || !a.count_include_pad) {
      return NodeError(node, absl::StrCat("padding must be smaller than the kernel ", win.kernel_h, "x", win.kernel_w));
    }
  }
  CONVOY_ASSIGN_OR_RETURN(int64_t oh, WindowOutput(node, x[2], win.kernel_h, win.stride_h, win.pad_top,
                                                   win.pad_bottom, win.dilation_h, a.ceil_mode, "height"));
  CONVOY_ASSIGN_OR_RETURN(int64_t ow, WindowOutput(node, x[3], win.kernel_w, win.stride_w, win.pad_left,
                                                   win.pad_right, win.dilation_w, a.ceil_mode, "width"));
  return std::vector<Shape>{{x[0], x[1], oh, ow}};
}

absl::StatusOr<std::vector<Shape>> InferBatchNorm(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 5, 5));
  if (in[0].size() < 2) return NodeError(node, absl::StrCat("input rank must be >= 2, got ", ShapeToString(in[0])));
  static const char* kRoles[] = {"", "scale", "bias", "mean", "variance"};
  for (size_t i = 1; i < 5; ++i) CONVOY_RETURN_IF_ERROR(ExpectVector(node, in, i, in[0][1], kRoles[i]));
  return std::vector<Shape>{in[0]};
}

// Numpy broadcasting; the symbolic batch dimension broadcasts only against 1 or itself.
absl::StatusOr<std::vector<Shape>> InferBinary(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 2, 2));
  const Shape& a = in[0];
  const Shape& b = in[1];
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
    int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return NodeError(node, absl::StrCat("cannot broadcast ", ShapeToString(a), " with ", ShapeToString(b)));
    }
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<int64_t> NormalizeAxis(const Node& node, int64_t axis, size_t rank) {
  int64_t r = static_cast<int64_t>(rank);
  if (axis < -r || axis >= r) return NodeError(node, absl::StrCat("axis ", axis, " out of range for rank ", rank));
  return axis < 0 ? axis + r : axis;
}

absl::StatusOr<std::vector<Shape>> InferConcat(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1 << 20));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, node.As<ConcatAttrs>().axis, in[0].size()));
  Shape out = in[0];
  if (out[axis] == kBatch) return NodeError(node, "cannot concatenate along the batch dimension");
  for (size_t i = 1; i < in.size(); ++i) {
    bool compatible = in[i].size() == out.size();
    for (size_t d = 0; compatible && d < out.size(); ++d) {
      if (static_cast<int64_t>(d) != axis && in[i][d] != out[d]) compatible = false;
    }
    if (!compatible) {
      return NodeError(node, absl::StrCat("input ", i, " '", node.inputs[i], "' has shape ", ShapeToString(in[i]),
                                          ", incompatible with ", ShapeToString(in[0]), " along axis ", axis));
    }
    out[axis] += in[i][axis];
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferSplit(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  const auto& a = node.As<SplitAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a.axis, in[0].size()));
  if (a.sizes.size() != node.outputs.size()) {
    return NodeError(node, absl::StrCat(a.sizes.size(), " split sizes for ", node.outputs.size(), " outputs"));
  }
  int64_t total = 0;
  for (int64_t s : a.sizes) total += s < 0 ? -1000000 : s;
  if (total != in[0][axis]) {
    return NodeError(node, absl::StrCat("split sizes sum to ", total, ", axis ", axis, " of ",
                                        ShapeToString(in[0]), " has ", in[0][axis]));
  }
  std::vector<Shape> outs;
  for (int64_t s : a.sizes) {
    Shape o = in[0];
    o[axis] = s;
    outs.push_back(o);
  }
  return outs;
}

// A [M, K] (or [K, M] with transpose_a) by B [K, N] (or [N, K] with transpose_b), or ONNX MatMul's N-D form: A
// [..., M, K] by a 2-D B shared by every matrix of A, or by a B [..., K, N] with A's leading dims (one matrix each).
absl::StatusOr<std::vector<Shape>> InferGemm(const Node& node, const std::vector<Shape>& in) {
  const auto& a = node.As<GemmAttrs>();
  size_t expected = a.has_bias ? 3 : 2;
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, expected, expected));
  const Shape& sa = in[0];
  const Shape& sb = in[1];
  if (sa.size() < 2 || sb.size() < 2 || (a.transpose_a && sa.size() != 2)) {
    return NodeError(node, absl::StrCat("A ", ShapeToString(sa), " and B ", ShapeToString(sb),
                                        " must have rank 2 or more (A rank 2 with transpose_a)"));
  }
  if (sb.size() > 2 && (sb.size() != sa.size() || !std::equal(sb.begin(), sb.end() - 2, sa.begin()))) {
    return NodeError(node, absl::StrCat("B ", ShapeToString(sb), " must be 2-D or have A's leading dimensions (A ",
                                        ShapeToString(sa), ")"));
  }
  const size_t ra = sa.size(), rb = sb.size();
  int64_t m = a.transpose_a ? sa[1] : sa[ra - 2];
  int64_t ka = a.transpose_a ? sa[0] : sa[ra - 1];
  int64_t kb = a.transpose_b ? sb[rb - 1] : sb[rb - 2];
  int64_t n = a.transpose_b ? sb[rb - 2] : sb[rb - 1];
  if (ka != kb || ka == kBatch || n == kBatch) {
    return NodeError(node, absl::StrCat("inner dimensions differ: A ", ShapeToString(sa), " gives K=", ka, ", B ",
                                        ShapeToString(sb), " gives K=", kb));
  }
  if (a.has_bias) {
    const Shape& c = in[2];
    bool ok = c.size() <= 2 && (c.empty() || c.back() == 1 || c.back() == n) &&
              (c.size() < 2 || c[0] == 1 || (ra == 2 && c[0] == m));
    if (!ok) {
      return NodeError(node, absl::StrCat("bias ", ShapeToString(c), " does not broadcast to [",
                                          m == kBatch ? "N" : absl::StrCat(m), ",", n, "]",
                                          ra > 2 ? " as one row for every matrix" : ""));
    }
  }
  Shape out(sa.begin(), sa.end() - 1);
  if (a.transpose_a) out = {m};
  out.push_back(n);
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferPad(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  const auto& a = node.As<PadAttrs>();
  size_t rank = in[0].size();
  if (a.pads.size() != 2 * rank) {
    return NodeError(node, absl::StrCat("expected ", 2 * rank, " pad values for rank ", rank, ", got ", a.pads.size()));
  }
  Shape out = in[0];
  for (size_t d = 0; d < rank; ++d) {
    int64_t extra = a.pads[d] + a.pads[d + rank];
    if (out[d] == kBatch) {
      if (extra != 0) return NodeError(node, "cannot pad the batch dimension");
      continue;
    }
    out[d] += extra;
    if (out[d] < 1) return NodeError(node, absl::StrCat("padding leaves axis ", d, " with extent ", out[d]));
    if (a.mode == PadMode::kReflect && (a.pads[d] >= in[0][d] || a.pads[d + rank] >= in[0][d])) {
      return NodeError(node, absl::StrCat("reflect padding ", a.pads[d], "/", a.pads[d + rank],
                                          " needs more than ", in[0][d], " elements on axis ", d));
    }
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferResize(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 0, 4));
  const auto& a = node.As<ResizeAttrs>();
  if (a.out_h < 1 || a.out_w < 1) {
    return NodeError(node, absl::StrCat("resizes to an empty ", a.out_h, "x", a.out_w, " output"));
  }
  if (!(a.scale_h > 0.0f) || !(a.scale_w > 0.0f) || !(a.length_h > 0.0f) || !(a.length_w > 0.0f)) {
    return NodeError(node, absl::StrCat("scales ", a.scale_h, ",", a.scale_w, " must be positive"));
  }
  return std::vector<Shape>{{in[0][0], in[0][1], a.out_h, a.out_w}};
}

absl::StatusOr<std::vector<Shape>> InferArgMax(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  const auto& a = node.As<ArgMaxAttrs>();
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a.axis, in[0].size()));
  if (in[0][axis] == kBatch) return NodeError(node, "cannot take the argmax over the batch dimension");
  Shape out = in[0];
  if (a.keepdims) {
    out[axis] = 1;
  } else {
    out.erase(out.begin() + axis);
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferLayerNorm(const Node& node, const std::vector<Shape>& in) {
  const auto& a = node.As<LayerNormAttrs>();
  const size_t expected = a.has_bias ? 3 : 2;
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, expected, expected));
  const Shape& x = in[0];
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, NormalizeAxis(node, a.axis, x.size()));
  const int64_t end = a.num_axes > 0 ? axis + a.num_axes : static_cast<int64_t>(x.size());
  if (a.num_axes < 0 || end > static_cast<int64_t>(x.size())) {
    return NodeError(node, absl::StrCat(a.num_axes, " axes from axis ", axis, " do not fit ", ShapeToString(x)));
  }
  int64_t normalized = 1;
  Shape stats = x;
  for (int64_t d = axis; d < end; ++d) {
    if (x[d] == kBatch) return NodeError(node, "cannot normalize over the batch dimension");
    normalized *= x[d];
    stats[d] = 1;
  }
  static const char* kRoles[] = {"", "scale", "bias"};
  for (size_t i = 1; i < expected; ++i) {
    if (NumElements(in[i]) != normalized || std::count(in[i].begin(), in[i].end(), kBatch) > 0) {
      return NodeError(node, absl::StrCat(kRoles[i], " '", node.inputs[i], "' has shape ", ShapeToString(in[i]),
                                          "; it needs one value per normalized element (", normalized, " for axes ",
                                          axis, " to ", end - 1, " of ", ShapeToString(x), ")"));
    }
  }
  if (a.write_stats) return std::vector<Shape>{x, stats, stats};
  return std::vector<Shape>{x};
}

absl::StatusOr<std::vector<Shape>> InferConvTranspose(const Node& node, const std::vector<Shape>& in) {
  const auto& a = node.As<ConvTranspose2dAttrs>();
  const size_t expected = a.has_bias ? 3 : 2;
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, expected, expected));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 0, 4));
  CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 1, 4));
  const Shape& x = in[0];
  const Shape& w = in[1];
  if (a.groups < 1 || w[0] != x[1] || x[1] % a.groups != 0) {
    return NodeError(node, absl::StrCat("input has ", x[1], " channels; weight ", ShapeToString(w), " with groups ",
                                        a.groups, " expects [", x[1], ", K/groups, kh, kw] with ", x[1],
                                        " divisible by the groups"));
  }
  if (w[2] != a.kernel_h || w[3] != a.kernel_w) {
    return NodeError(node, absl::StrCat("weight ", ShapeToString(w), " does not match kernel ", a.kernel_h, "x",
                                        a.kernel_w));
  }
  if (a.stride_h < 1 || a.stride_w < 1 || a.dilation_h < 1 || a.dilation_w < 1 || a.out_h < 1 || a.out_w < 1) {
    return NodeError(node, absl::StrCat("strides ", a.stride_h, "x", a.stride_w, ", dilations ", a.dilation_h, "x",
                                        a.dilation_w, " and output ", a.out_h, "x", a.out_w, " must be positive"));
  }
  const int64_t k = w[1] * a.groups;
  if (a.has_bias) CONVOY_RETURN_IF_ERROR(ExpectVector(node, in, 2, k, "bias"));
  return std::vector<Shape>{{x[0], k, a.out_h, a.out_w}};
}

absl::StatusOr<std::vector<Shape>> InferFlatten(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  int64_t axis = node.As<FlattenAttrs>().axis;
  int64_t rank = static_cast<int64_t>(in[0].size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis > rank) return NodeError(node, absl::StrCat("axis out of range for rank ", rank));
  Shape head(in[0].begin(), in[0].begin() + axis);
  Shape tail(in[0].begin() + axis, in[0].end());
  bool head_batch = std::count(head.begin(), head.end(), kBatch) > 0;
  bool tail_batch = std::count(tail.begin(), tail.end(), kBatch) > 0;
  int64_t outer = NumElements(head), inner = NumElements(tail);
  if ((head_batch && outer != 1) || tail_batch) {
    return NodeError(node, absl::StrCat("flattening ", ShapeToString(in[0]), " at axis ", axis,
                                        " would merge the batch dimension with others"));
  }
  return std::vector<Shape>{{head_batch ? kBatch : outer, inner}};
}

absl::StatusOr<std::vector<Shape>> InferReshape(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  const Shape& x = in[0];
  Shape out = node.As<ReshapeAttrs>().shape;
  bool x_batch = !x.empty() && x[0] == kBatch;
  int infer_at = -1;
  int64_t known = 1;
  bool out_batch = false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == 0) {
      if (i >= x.size()) return NodeError(node, absl::StrCat("shape entry ", i, " copies a missing input dimension"));
      out[i] = x[i];
    }
    if (out[i] == kBatch && x_batch && i == 0 && node.As<ReshapeAttrs>().shape[0] == 0) {
      out_batch = true;
    } else if (out[i] == -1) {
      if (infer_at >= 0) return NodeError(node, "more than one -1 in the target shape");
      infer_at = static_cast<int>(i);
    } else if (out[i] < 0) {
      return NodeError(node, absl::StrCat("invalid target dimension ", out[i]));
    } else {
      known *= out[i];
    }
  }
  int64_t total = NumElements(x);  // batch counted as 1
  if (x_batch && !out_batch) {
    // The batch must land in the inferred dimension with nothing else merged into it.
    if (infer_at < 0 || total != known) {
      return NodeError(node, absl::StrCat("reshape of ", ShapeToString(x), " to ",
                                          ShapeToString(node.As<ReshapeAttrs>().shape),
                                          " must keep the batch dimension on its own"));
    }
    out[infer_at] = kBatch;
    return std::vector<Shape>{out};
  }
  if (infer_at >= 0) {
    if (known == 0 || total % known != 0) {
      return NodeError(node, absl::StrCat("cannot infer -1 reshaping ", ShapeToString(x), " to ",
                                          ShapeToString(node.As<ReshapeAttrs>().shape)));
    }
    out[infer_at] = total / known;
    known = total;
  }
  if (known != total) {
    return NodeError(node, absl::StrCat("cannot reshape ", ShapeToString(x), " (", total, " elements per batch) to ",
                                        ShapeToString(out)));
  }
  return std::vector<Shape>{out};
}

absl::StatusOr<std::vector<Shape>> InferTranspose(const Node& node, const std::vector<Shape>& in) {
  CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
  const auto& perm = node.As<TransposeAttrs>().perm;
  if (perm.size() != in[0].size()) {
    return NodeError(node, absl::StrCat("perm has ", perm.size(), " entries for rank ", in[0].size()));
  }
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  Shape out;
  for (size_t i = 0; i < perm.size(); ++i) {
    if (sorted[i] != static_cast<int64_t>(i)) return NodeError(node, "perm is not a permutation");
    out.push_back(in[0][perm[i]]);
  }
  return std::vector<Shape>{out};
}

}  // namespace

absl::StatusOr<std::vector<Shape>> InferOutputShapes(const Node& node, const std::vector<Shape>& in) {
  if (in.size() != node.inputs.size()) return NodeError(node, "internal: input shape count mismatch");
  size_t expected_outputs = 1;
  if (node.op() == OpKind::kSplit) expected_outputs = node.As<SplitAttrs>().sizes.size();
  if (node.op() == OpKind::kLayerNorm && node.As<LayerNormAttrs>().write_stats) expected_outputs = 3;
  if (node.outputs.size() != expected_outputs) {
    return NodeError(node, absl::StrCat("expected ", expected_outputs, " outputs, got ", node.outputs.size()));
  }
  switch (node.op()) {
    case OpKind::kConv2d: return InferConv(node, in);
    case OpKind::kPool2d: return InferPool(node, in);
    case OpKind::kBatchNorm: return InferBatchNorm(node, in);
    case OpKind::kBinary: return InferBinary(node, in);
    case OpKind::kConcat: return InferConcat(node, in);
    case OpKind::kSplit: return InferSplit(node, in);
    case OpKind::kGemm: return InferGemm(node, in);
    case OpKind::kPad: return InferPad(node, in);
    case OpKind::kFlatten: return InferFlatten(node, in);
    case OpKind::kReshape: return InferReshape(node, in);
    case OpKind::kTranspose: return InferTranspose(node, in);
    case OpKind::kResize: return InferResize(node, in);
    case OpKind::kArgMax: return InferArgMax(node, in);
    case OpKind::kLayerNorm: return InferLayerNorm(node, in);
    case OpKind::kConvTranspose2d: return InferConvTranspose(node, in);
    case OpKind::kChannelShuffle: {
      CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
      CONVOY_RETURN_IF_ERROR(ExpectRank(node, in, 0, 4));
      int64_t g = node.As<ChannelShuffleAttrs>().groups;
      if (g < 1 || in[0][1] % g != 0) {
        return NodeError(node, absl::StrCat(in[0][1], " channels do not split into ", g, " groups"));
      }
      return std::vector<Shape>{in[0]};
    }
    case OpKind::kSoftmax: {
      CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
      CONVOY_RETURN_IF_ERROR(NormalizeAxis(node, node.As<SoftmaxAttrs>().axis, in[0].size()).status());
      return std::vector<Shape>{in[0]};
    }
    case OpKind::kActivation:
    case OpKind::kUnary:
    case OpKind::kIdentity:
      CONVOY_RETURN_IF_ERROR(ExpectInputCount(node, 1, 1));
      return std::vector<Shape>{in[0]};
  }
  return NodeError(node, "unknown op");
}

}  // namespace convoy::runtime
