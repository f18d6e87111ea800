// Plain loops for every op of the graph IR; see reference_interpreter.h.
#include "server/runtime/reference_interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "server/runtime/resize_lowering.h"
#include "server/runtime/unary_lowering.h"

namespace convoy::runtime {
namespace {

// Row-major strides of a concrete shape.
std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

// Calls fn(flat_index, coordinates) for every element of `shape` in row-major order.
template <typename Fn>
void ForEachIndex(const Shape& shape, Fn fn) {
  int64_t total = NumElements(shape);
  std::vector<int64_t> coord(shape.size(), 0);
  for (int64_t flat = 0; flat < total; ++flat) {
    fn(flat, coord);
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
}

void RunConv(const Conv2dAttrs& a, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  const Tensor& w = *in[1];
  size_t next = 2;
  const Tensor* bias = a.has_bias ? in[next++] : nullptr;
  const Tensor* scale = a.has_channel_scale ? in[next++] : nullptr;
  const Tensor* residual = a.residual != ResidualPosition::kNone ? in[next] : nullptr;
  const int64_t n_batch = x.shape[0], c_in = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t k_out = w.shape[0], c_per_group = w.shape[1], kh = w.shape[2], kw = w.shape[3];
  const int64_t oh = y.shape[2], ow = y.shape[3];
  const int64_t k_per_group = k_out / a.groups;
  const Window2d& win = a.window;
  for (int64_t n = 0; n < n_batch; ++n) {
    for (int64_t k = 0; k < k_out; ++k) {
      const int64_t c_begin = (k / k_per_group) * c_per_group;
      for (int64_t p = 0; p < oh; ++p) {
        for (int64_t q = 0; q < ow; ++q) {
          double acc = 0.0;
          for (int64_t c = 0; c < c_per_group; ++c) {
            for (int64_t r = 0; r < kh; ++r) {
              int64_t ih = p * win.stride_h - win.pad_top + r * win.dilation_h;
              if (ih < 0 || ih >= h) continue;
              for (int64_t s = 0; s < kw; ++s) {
                int64_t iw = q * win.stride_w - win.pad_left + s * win.dilation_w;
                if (iw < 0 || iw >= wd) continue;
                acc += static_cast<double>(x.data[((n * c_in + c_begin + c) * h + ih) * wd + iw]) *
                       w.data[((k * c_per_group + c) * kh + r) * kw + s];
              }
            }
          }
          if (scale) acc *= scale->data[k];
          if (bias) acc += bias->data[k];
          const int64_t index = ((n * k_out + k) * oh + p) * ow + q;
          if (a.residual == ResidualPosition::kBeforeActivation) acc += residual->data[index];
          float v = ApplyActivation(a.activation, static_cast<float>(acc));
          if (a.residual == ResidualPosition::kAfterActivation) v += residual->data[index];
          y.data[index] = v;
        }
      }
    }
  }
}

void RunPool(const Pool2dAttrs& a, const Tensor& x, Tensor& y) {
  const int64_t h = x.shape[2], w = x.shape[3], oh = y.shape[2], ow = y.shape[3];
  Window2d win = a.window;
  if (a.global) win = Window2d{h, w, 1, 1, 0, 0, 0, 0, 1, 1};
  for (int64_t nc = 0; nc < x.shape[0] * x.shape[1]; ++nc) {
    const float* plane = x.data.data() + nc * h * w;
    for (int64_t p = 0; p < oh; ++p) {
      for (int64_t q = 0; q < ow; ++q) {
        double acc = a.kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        int64_t counted = 0, in_padded_bounds = 0;
        for (int64_t r = 0; r < win.kernel_h; ++r) {
          int64_t ih = p * win.stride_h - win.pad_top + r * win.dilation_h;
          for (int64_t s = 0; s < win.kernel_w; ++s) {
            int64_t iw = q * win.stride_w - win.pad_left + s * win.dilation_w;
            // Positions past the padded input (ceil mode) never count; explicit padding counts if asked.
            if (ih < h + win.pad_bottom && iw < w + win.pad_right) ++in_padded_bounds;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            double v = plane[ih * w + iw];
            acc = a.kind == PoolKind::kMax ? std::max(acc, v) : acc + v;
            ++counted;
          }
        }
        if (a.kind == PoolKind::kAverage) {
          int64_t divisor = a.count_include_pad ? in_padded_bounds : counted;
          acc = divisor > 0 ? acc / divisor : 0.0;
        }
        y.data[(nc * oh + p) * ow + q] = static_cast<float>(acc);
      }
    }
  }
}

void RunBatchNorm(const BatchNormAttrs& a, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& x = *in[0];
  const int64_t channels = x.shape[1];
  const int64_t inner = NumElements(x.shape) / (x.shape[0] * channels);
  for (int64_t i = 0; i < NumElements(x.shape); ++i) {
    int64_t c = (i / inner) % channels;
    double inv_std = 1.0 / std::sqrt(static_cast<double>(in[4]->data[c]) + a.epsilon);
    y.data[i] = static_cast<float>((x.data[i] - in[3]->data[c]) * inv_std * in[1]->data[c] + in[2]->data[c]);
  }
}

// Index into a broadcast operand: coordinates of the output mapped onto `shape` (right-aligned, extent-1 axes pinned).
int64_t BroadcastIndex(const std::vector<int64_t>& out_coord, const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t index = 0;
  size_t offset = out_coord.size() - shape.size();
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] != 1) index += out_coord[d + offset] * strides[d];
  }
  return index;
}

void RunBinary(BinaryKind kind, const Tensor& a, const Tensor& b, Tensor& y) {
  auto sa = Strides(a.shape), sb = Strides(b.shape);
  ForEachIndex(y.shape, [&](int64_t flat, const std::vector<int64_t>& coord) {
    float va = a.data[BroadcastIndex(coord, a.shape, sa)];
    float vb = b.data[BroadcastIndex(coord, b.shape, sb)];
    switch (kind) {
      case BinaryKind::kAdd: y.data[flat] = va + vb; break;
      case BinaryKind::kSub: y.data[flat] = va - vb; break;
      case BinaryKind::kMul: y.data[flat] = va * vb; break;
      case BinaryKind::kDiv: y.data[flat] = va / vb; break;
    }
  });
}

int64_t PositiveAxis(int64_t axis, size_t rank) { return axis < 0 ? axis + static_cast<int64_t>(rank) : axis; }

// Splits a shape around `axis` into outer (before), extent, inner (after) element counts.
void AxisExtents(const Shape& shape, int64_t axis, int64_t& outer, int64_t& inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
}

void RunConcat(int64_t axis, const std::vector<const Tensor*>& in, Tensor& y) {
  int64_t outer, inner;
  AxisExtents(y.shape, axis, outer, inner);
  int64_t offset = 0;
  for (const Tensor* t : in) {
    int64_t chunk = t->shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      std::copy_n(t->data.begin() + o * chunk, chunk, y.data.begin() + o * y.shape[axis] * inner + offset);
    }
    offset += chunk;
  }
}

void RunSplit(int64_t axis, const Tensor& x, std::vector<Tensor>& outs) {
  int64_t outer, inner;
  AxisExtents(x.shape, axis, outer, inner);
  int64_t offset = 0;
  for (Tensor& t : outs) {
    int64_t chunk = t.shape[axis] * inner;
    for (int64_t o = 0; o < outer; ++o) {
      std::copy_n(x.data.begin() + o * x.shape[axis] * inner + offset, chunk, t.data.begin() + o * chunk);
    }
    offset += chunk;
  }
}

void RunSoftmax(int64_t axis, const Tensor& x, Tensor& y) {
  int64_t outer, inner;
  AxisExtents(x.shape, axis, outer, inner);
  const int64_t extent = x.shape[axis];
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * extent * inner + i;
      double max_v = -std::numeric_limits<double>::infinity();
      for (int64_t e = 0; e < extent; ++e) max_v = std::max(max_v, static_cast<double>(x.data[base + e * inner]));
      double sum = 0.0;
      for (int64_t e = 0; e < extent; ++e) sum += std::exp(x.data[base + e * inner] - max_v);
      for (int64_t e = 0; e < extent; ++e) {
        y.data[base + e * inner] = static_cast<float>(std::exp(x.data[base + e * inner] - max_v) / sum);
      }
    }
  }
}

// Every matrix of A ([M, K], or the last two dims of an N-D A) by B's matrix (B 2-D: the same one for all).
void RunGemm(const GemmAttrs& a, const std::vector<const Tensor*>& in, Tensor& y) {
  const Tensor& A = *in[0];
  const Tensor& B = *in[1];
  const size_t rank = y.shape.size();
  const int64_t m = y.shape[rank - 2], n = y.shape[rank - 1];
  const int64_t k = a.transpose_a ? A.shape[0] : A.shape.back();
  const int64_t matrices = NumElements(Shape(y.shape.begin(), y.shape.end() - 2));
  const bool batched_b = B.shape.size() > 2;
  for (int64_t batch = 0; batch < matrices; ++batch) {
    const float* pa = A.data.data() + batch * m * k;
    const float* pb = B.data.data() + (batched_b ? batch * k * n : 0);
    float* py = y.data.data() + batch * m * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t p = 0; p < k; ++p) {
          double av = a.transpose_a ? pa[p * m + i] : pa[i * k + p];
          double bv = a.transpose_b ? pb[j * k + p] : pb[p * n + j];
          acc += av * bv;
        }
        acc *= a.alpha;
        if (a.has_bias) {
          const Tensor& C = *in[2];
          int64_t ci = C.shape.size() == 2 ? (C.shape[0] == 1 ? 0 : i) * C.shape[1] : 0;
          int64_t cj = C.shape.empty() || C.shape.back() == 1 ? 0 : j;
          acc += static_cast<double>(a.beta) * C.data[ci + cj];
        }
        py[i * n + j] = ApplyActivation(a.activation, static_cast<float>(acc));
      }
    }
  }
}

void RunPad(const PadAttrs& a, const Tensor& x, Tensor& y) {
  const size_t rank = x.shape.size();
  auto sx = Strides(x.shape);
  ForEachIndex(y.shape, [&](int64_t flat, const std::vector<int64_t>& coord) {
    int64_t index = 0;
    for (size_t d = 0; d < rank; ++d) {
      int64_t c = coord[d] - a.pads[d];
      int64_t extent = x.shape[d];
      if (c < 0 || c >= extent) {
        if (a.mode == PadMode::kConstant) {
          y.data[flat] = a.value;
          return;
        }
        if (a.mode == PadMode::kEdge) c = c < 0 ? 0 : extent - 1;
        if (a.mode == PadMode::kReflect) c = c < 0 ? -c : 2 * (extent - 1) - c;
      }
      index += c * sx[d];
    }
    y.data[flat] = x.data[index];
  });
}

void RunTranspose(const std::vector<int64_t>& perm, const Tensor& x, Tensor& y) {
  auto sx = Strides(x.shape);
  ForEachIndex(y.shape, [&](int64_t flat, const std::vector<int64_t>& coord) {
    int64_t index = 0;
    for (size_t d = 0; d < perm.size(); ++d) index += coord[d] * sx[perm[d]];
    y.data[flat] = x.data[index];
  });
}

void RunArgMax(const ArgMaxAttrs& a, const Tensor& x, Tensor& y) {
  int64_t outer = 1, inner = 1;
  const int64_t axis = PositiveAxis(a.axis, x.shape.size());
  AxisExtents(x.shape, axis, outer, inner);
  const int64_t extent = x.shape[axis];
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t k = 1; k < extent; ++k) {
        const float v = x.data[(o * extent + k) * inner + i], b = x.data[(o * extent + best) * inner + i];
        if (v > b || (a.select_last_index && v == b)) best = k;
      }
      y.data[o * inner + i] = static_cast<float>(best);
    }
}

// LayerNorm and ConvTranspose2d run the kernel library's reference (plain loops, double accumulation) on the FP32
// NCHW tensors.
absl::Status RunLayerNorm(const LayerNormAttrs& a, const std::vector<const Tensor*>& in, std::vector<Tensor>& outs) {
  const Shape& x = in[0]->shape;
  const int64_t axis = PositiveAxis(a.axis, x.size());
  const int64_t end = a.num_axes > 0 ? axis + a.num_axes : static_cast<int64_t>(x.size());
  LayerNormProblem p;
  p.outer = NumElements(Shape(x.begin(), x.begin() + axis));
  p.axis = NumElements(Shape(x.begin() + axis, x.begin() + end));
  p.inner = NumElements(Shape(x.begin() + end, x.end()));
  p.epsilon = a.epsilon, p.has_bias = a.has_bias, p.write_stats = a.write_stats;
  LayerNormArgs args{in[0]->data.data(), in[1]->data.data(), a.has_bias ? in[2]->data.data() : nullptr,
                     outs[0].data.data()};
  if (a.write_stats) args.mean = outs[1].data.data(), args.inv_std_dev = outs[2].data.data();
  return reference::LayerNorm(p, args);
}

absl::Status RunConvTranspose(const ConvTranspose2dAttrs& a, const std::vector<const Tensor*>& in, Tensor& y) {
  const Shape& x = in[0]->shape;
  ConvTranspose2dProblem p;
  p.n = int(x[0]), p.c = int(x[1]), p.h = int(x[2]), p.w = int(x[3]);
  p.k = int(y.shape[1]), p.r = int(a.kernel_h), p.s = int(a.kernel_w);
  p.out_h = int(a.out_h), p.out_w = int(a.out_w);
  p.pad_top = int(a.pad_top), p.pad_left = int(a.pad_left);
  p.stride_h = int(a.stride_h), p.stride_w = int(a.stride_w);
  p.dilation_h = int(a.dilation_h), p.dilation_w = int(a.dilation_w);
  p.groups = int(a.groups), p.has_bias = a.has_bias;
  return reference::ConvTranspose2d(
      p, ConvTranspose2dArgs{in[0]->data.data(), in[1]->data.data(), a.has_bias ? in[2]->data.data() : nullptr,
                             y.data.data()});
}

void RunChannelShuffle(int64_t groups, const Tensor& x, Tensor& y) {
  const int64_t channels = x.shape[1], per_group = channels / groups, plane = x.shape[2] * x.shape[3];
  for (int64_t n = 0; n < x.shape[0]; ++n) {
    for (int64_t c = 0; c < channels; ++c) {
      // Output channel c = j * groups + g reads input channel g * per_group + j.
      int64_t src = (c % groups) * per_group + c / groups;
      std::copy_n(x.data.begin() + (n * channels + src) * plane, plane, y.data.begin() + (n * channels + c) * plane);
    }
  }
}

}  // namespace

absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& in) {
  std::vector<Shape> in_shapes;
  for (const Tensor* t : in) in_shapes.push_back(t ? t->shape : Shape{});
  CONVOY_ASSIGN_OR_RETURN(std::vector<Shape> out_shapes, InferOutputShapes(node, in_shapes));
  std::vector<Tensor> outs;
  for (Shape& s : out_shapes) outs.push_back(Tensor::Zeros(std::move(s)));
  Tensor& y = outs[0];
  switch (node.op()) {
    case OpKind::kConv2d: RunConv(node.As<Conv2dAttrs>(), in, y); break;
    case OpKind::kPool2d: RunPool(node.As<Pool2dAttrs>(), *in[0], y); break;
    case OpKind::kBatchNorm: RunBatchNorm(node.As<BatchNormAttrs>(), in, y); break;
    case OpKind::kActivation:
      for (size_t i = 0; i < y.data.size(); ++i) {
        y.data[i] = ApplyActivation(node.As<ActivationAttrs>().activation, in[0]->data[i]);
      }
      break;
    case OpKind::kBinary: RunBinary(node.As<BinaryAttrs>().kind, *in[0], *in[1], y); break;
    case OpKind::kConcat: RunConcat(PositiveAxis(node.As<ConcatAttrs>().axis, y.shape.size()), in, y); break;
    case OpKind::kSplit: RunSplit(PositiveAxis(node.As<SplitAttrs>().axis, in[0]->shape.size()), *in[0], outs); break;
    case OpKind::kChannelShuffle: RunChannelShuffle(node.As<ChannelShuffleAttrs>().groups, *in[0], y); break;
    case OpKind::kSoftmax: RunSoftmax(PositiveAxis(node.As<SoftmaxAttrs>().axis, y.shape.size()), *in[0], y); break;
    case OpKind::kGemm: RunGemm(node.As<GemmAttrs>(), in, y); break;
    case OpKind::kPad: RunPad(node.As<PadAttrs>(), *in[0], y); break;
    case OpKind::kTranspose: RunTranspose(node.As<TransposeAttrs>().perm, *in[0], y); break;
    case OpKind::kArgMax: RunArgMax(node.As<ArgMaxAttrs>(), *in[0], y); break;
    case OpKind::kLayerNorm: CONVOY_RETURN_IF_ERROR(RunLayerNorm(node.As<LayerNormAttrs>(), in, outs)); break;
    case OpKind::kConvTranspose2d:
      CONVOY_RETURN_IF_ERROR(RunConvTranspose(node.As<ConvTranspose2dAttrs>(), in, y));
      break;
    case OpKind::kUnary: {
      const auto& a = node.As<UnaryAttrs>();
      UnaryProblem p;
      p.count = static_cast<int64_t>(y.data.size()), p.kind = LowerUnaryKind(a.kind), p.alpha = a.alpha;
      p.beta = a.beta;
      if (p.count > 0) CONVOY_RETURN_IF_ERROR(reference::Unary(p, UnaryArgs{in[0]->data.data(), y.data.data()}));
      break;
    }
    case OpKind::kResize: {
      // The kernel library's reference (plain loops, double accumulation) on the FP32 NCHW tensor.
      const Shape& x = in[0]->shape;
      const ResizeProblem problem = LowerResize(node.As<ResizeAttrs>(), x[0], x[1], x[2], x[3]);
      CONVOY_RETURN_IF_ERROR(reference::Resize(problem, ResizeArgs{in[0]->data.data(), y.data.data()}));
      break;
    }
    case OpKind::kFlatten:
    case OpKind::kReshape:
    case OpKind::kIdentity: y.data = in[0]->data; break;
  }
  return outs;
}

absl::StatusOr<std::map<std::string, Tensor>> RunReference(const Graph& graph,
                                                           const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, Tensor> values;
  int64_t batch = -1;
  for (const GraphInput& gi : graph.inputs()) {
    auto it = inputs.find(gi.name);
    if (it == inputs.end()) return absl::InvalidArgumentError(absl::StrCat("input '", gi.name, "' not given"));
    const Tensor& t = it->second;
    bool batched = !gi.shape.empty() && gi.shape[0] == kBatch;
    if (batched && !t.shape.empty() && batch < 0) batch = t.shape[0];
    Shape expected = ConcreteShape(gi.shape, batched && !t.shape.empty() ? batch : 1);
    if (t.shape != expected || static_cast<int64_t>(t.data.size()) != NumElements(t.shape)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", gi.name, "': expected shape ", ShapeToString(expected),
                                                     " (graph ", ShapeToString(gi.shape), "), got ",
                                                     ShapeToString(t.shape), " with ", t.data.size(), " values"));
    }
    values[gi.name] = t;
  }
  for (const Node& node : graph.nodes()) {
    std::vector<const Tensor*> args;
    for (const std::string& name : node.inputs) {
      if (name.empty()) {
        args.push_back(nullptr);
        continue;
      }
      auto v = values.find(name);
      const Tensor* constant = graph.FindConstant(name);
      if (v == values.end() && !constant) {
        return absl::FailedPreconditionError(absl::StrCat("node '", node.name, "': input '", name, "' not computed"));
      }
      args.push_back(v != values.end() ? &v->second : constant);
    }
    CONVOY_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNode(node, args));
    for (size_t i = 0; i < outs.size(); ++i) values[node.outputs[i]] = std::move(outs[i]);
  }
  std::map<std::string, Tensor> result;
  for (const std::string& name : graph.outputs()) {
    auto v = values.find(name);
    if (v != values.end()) {
      result[name] = v->second;
    } else if (const Tensor* c = graph.FindConstant(name)) {
      result[name] = *c;
    } else {
      return absl::FailedPreconditionError(absl::StrCat("graph output '", name, "' not computed"));
    }
  }
  return result;
}

}  // namespace convoy::runtime
