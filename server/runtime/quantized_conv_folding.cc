// Finds the convolutions of a QDQ model that run in INT8; see quantized_conv_folding.h.
#include "server/runtime/quantized_conv_folding.h"

#include <cmath>
#include <limits>
#include <map>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime {
namespace {

// The quantization of a QDQ node's output (scale, zero point, 8-bit type), or null for any other node.
struct QdqParams {
  DataType type = DataType::kUInt8;
  float scale = 1.0f;
  int zero_point = 0;
  int qmin() const { return type == DataType::kUInt8 ? 0 : -128; }
  int qmax() const { return type == DataType::kUInt8 ? 255 : 127; }
  // ONNX QuantizeLinear of one value (the FP32 quotient rounded half to even), saturated.
  int Quantize(float x) const {
    const double q = std::nearbyint(static_cast<double>(x / scale)) + zero_point;
    return static_cast<int>(std::fmin(std::fmax(q, qmin()), qmax()));
  }
};

bool AsQdq(const Node& node, QdqParams& out) {
  if (node.op() != OpKind::kActivation) return false;
  const Activation& a = node.As<ActivationAttrs>().activation;
  if (a.kind != ActivationKind::kQuantizeDequantizeU8 && a.kind != ActivationKind::kQuantizeDequantizeS8) return false;
  out.type = a.kind == ActivationKind::kQuantizeDequantizeU8 ? DataType::kUInt8 : DataType::kInt8;
  out.scale = a.alpha;
  out.zero_point = static_cast<int>(a.beta);
  return true;
}

// Whether the DequantizeLinear record `q` of weights `name` is what the INT8 kernels take: signed, symmetric.
absl::Status CheckSymmetricInt8(const std::string& name, const Tensor* w, const ConstantQuantization* q) {
  if (w == nullptr || q == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("its weights '", name, "' are not a DequantizeLinear of an INT8 constant"));
  }
  if (!q->is_signed) {
    return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' are UINT8; the INT8 kernels take INT8"));
  }
  for (int64_t zp : q->zero_points) {
    if (zp != 0) {
      return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' have zero point ", zp,
                                                        "; the INT8 kernels take symmetric weights (zero point 0)"));
    }
  }
  return absl::OkStatus();
}

// Recovers the INT8 values of weights `name`, `w` as [K, C/g, R, S] with `scales` one per output channel (K of
// them), into fold.weights.
absl::Status RecoverInt8Weights(const std::string& name, const Tensor& w, const std::vector<float>& scales,
                                QuantizedConvFold& fold) {
  const int64_t channels = w.shape[0], per_channel = NumElements(w.shape) / channels;
  fold.weight_shape = w.shape;
  fold.weights.resize(w.data.size());
  // FP32 division recovers q from fl(q * scale) for |q| <= 128 (the quotient is within a few ulps of q), and the loop
  // has no exit, so it runs as vector code: ResNet-50 has 25 M weights, read at every load.
  bool exact = true;
  for (int64_t k = 0; k < channels; ++k) {
    const float scale = scales[k];
    const float* values = w.data.data() + k * per_channel;
    int8_t* out = fold.weights.data() + k * per_channel;
    for (int64_t i = 0; i < per_channel; ++i) {
      const float v = std::nearbyint(values[i] / scale);
      const bool in_range = v >= -128.0f && v <= 127.0f;  // false for NaN
      exact &= in_range && v * scale == values[i];
      out[i] = static_cast<int8_t>(in_range ? v : 0.0f);
    }
  }
  if (exact) return absl::OkStatus();
  for (size_t i = 0; i < w.data.size(); ++i) {
    const float scale = scales[i / per_channel];
    const float v = std::nearbyint(w.data[i] / scale);
    // The value must still be exactly what DequantizeLinear made of an INT8 (a pass may have rewritten it).
    if (!(v >= -128.0f && v <= 127.0f) || v * scale != w.data[i]) {
      return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' no longer dequantize exactly from ",
                                                        "INT8 (element ", i, " is ", w.data[i], ")"));
    }
  }
  return absl::OkStatus();
}

// The INT8 weights of `conv` and their per-output-channel scales, or why there are none.
absl::Status ReadWeights(const Graph& graph, const Node& conv, QuantizedConvFold& fold,
                         std::vector<float>& weight_scales) {
  const std::string& name = conv.inputs[1];
  const Tensor* w = graph.FindConstant(name);
  const ConstantQuantization* q = graph.FindConstantQuantization(name);
  CONVOY_RETURN_IF_ERROR(CheckSymmetricInt8(name, w, q));
  const int64_t k = w->shape.empty() ? 0 : w->shape[0];
  if (w->shape.size() != 4 || (q->axis != -1 && q->axis != 0) || (q->axis == 0 && int64_t(q->scales.size()) != k)) {
    return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' ", ShapeToString(w->shape),
                                                      " are quantized along axis ", q->axis,
                                                      "; the INT8 kernels take one scale or one per output channel"));
  }
  weight_scales.assign(k, q->scales[0]);
  if (q->axis == 0) weight_scales = q->scales;
  return RecoverInt8Weights(name, *w, weight_scales, fold);
}

// The INT8 weights of a Gemm (B [K, C] with transpose_b, else [C, K]) as a 1x1 convolution's [K, C, 1, 1], and their
// per-output-column scales, or why there are none.
absl::Status ReadGemmWeights(const Graph& graph, const Node& gemm, QuantizedConvFold& fold,
                             std::vector<float>& weight_scales) {
  const std::string& name = gemm.inputs[1];
  const Tensor* w = graph.FindConstant(name);
  const ConstantQuantization* q = graph.FindConstantQuantization(name);
  CONVOY_RETURN_IF_ERROR(CheckSymmetricInt8(name, w, q));
  const bool transposed = gemm.As<GemmAttrs>().transpose_b;
  const int output_axis = transposed ? 0 : 1;
  if (w->shape.size() != 2) {
    return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' are ", ShapeToString(w->shape),
                                                      "; the INT8 Gemm takes one matrix"));
  }
  const int64_t k = w->shape[output_axis], c = w->shape[1 - output_axis];
  if ((q->axis != -1 && q->axis != output_axis) || (q->axis == output_axis && int64_t(q->scales.size()) != k)) {
    return absl::FailedPreconditionError(absl::StrCat("its weights '", name, "' ", ShapeToString(w->shape),
                                                      " are quantized along axis ", q->axis, "; the INT8 Gemm takes ",
                                                      "one scale or one per output column (axis ", output_axis, ")"));
  }
  weight_scales.assign(k, q->scales[0]);
  if (q->axis == output_axis) weight_scales = q->scales;
  Tensor kc{{k, c, 1, 1}, std::vector<float>(w->data.size())};
  for (int64_t o = 0; o < k; ++o) {
    for (int64_t i = 0; i < c; ++i) kc.data[o * c + i] = transposed ? w->data[o * c + i] : w->data[i * k + o];
  }
  return RecoverInt8Weights(name, kc, weight_scales, fold);
}

// Whether the conv's fused activation, followed by the output's saturation, is what the kernel computes (nothing
// or a ReLU); sets fold.relu.
absl::Status ReadActivation(const Activation& a, const QdqParams& out, QuantizedConvFold& fold) {
  switch (a.kind) {
    case ActivationKind::kIdentity: fold.relu = false; return absl::OkStatus();
    case ActivationKind::kRelu: fold.relu = true; return absl::OkStatus();
    case ActivationKind::kClip: {
      // Quantize is monotone, so Q(clip(v, lo, hi)) = clamp(Q(v), Q(lo), Q(hi)): the clip is the output's own
      // saturation when Q(hi) is the top of the range, and a ReLU (or nothing) when Q(lo) is Q(0) (or the bottom).
      const int qlo = out.Quantize(a.alpha), qhi = out.Quantize(a.beta);
      if (qhi == out.qmax() && (qlo == out.qmin() || qlo == out.zero_point)) {
        fold.relu = qlo != out.qmin();
        return absl::OkStatus();
      }
      return absl::FailedPreconditionError(absl::StrCat(
          "its Clip(", a.alpha, ", ", a.beta, ") lands on steps ", qlo, "..", qhi, " of its output's ",
          DataTypeName(out.type), " range ", out.qmin(), "..", out.qmax(), " (zero point ", out.zero_point,
          "), which the INT8 kernels' ReLU and saturation do not express"));
    }
    default:
      return absl::FailedPreconditionError(absl::StrCat("activation ", ActivationKindName(a.kind),
                                                        " is fused into it; the INT8 kernels fuse ReLU only"));
  }
}

// The requantization of a fold whose weights are read: the 8-bit types, the multipliers x_scale * w_scale[k] /
// y_scale (in FP32, as onnxruntime's QLinearConv and QGemm form them), the activation, and the bias `bias_name` (empty:
// none) requantized to INT32 at x_scale * w_scale[k]. Without `out` (a Gemm whose output the graph reads in FP32) the
// output is FP32 and the multipliers x_scale * w_scale[k], as onnxruntime's QGemm without y_scale computes it.
absl::Status FoldRequantization(const Graph& graph, const std::string& bias_name, const Activation& activation,
                                const QdqParams& in, const QdqParams* out, const std::vector<float>& weight_scales,
                                QuantizedConvFold& fold) {
  if (out != nullptr) {
    CONVOY_RETURN_IF_ERROR(ReadActivation(activation, *out, fold));
  } else if (activation.kind == ActivationKind::kIdentity || activation.kind == ActivationKind::kRelu) {
    fold.relu = activation.kind == ActivationKind::kRelu;
  } else {
    return absl::FailedPreconditionError(absl::StrCat("activation ", ActivationKindName(activation.kind),
                                                      " is fused into it; the INT8 Gemm with an FP32 output fuses "
                                                      "ReLU only"));
  }
  const int64_t k = fold.weight_shape[0];
  fold.src_type = in.type, fold.src_scale = in.scale, fold.src_zero_point = in.zero_point;
  if (out != nullptr) {
    fold.dst_type = out->type, fold.dst_scale = out->scale, fold.dst_zero_point = out->zero_point;
  } else {
    fold.dst_type = DataType::kFloat32, fold.dst_scale = 1.0f, fold.dst_zero_point = 0;
  }
  fold.weight_scales = weight_scales;
  fold.multipliers.resize(k);
  for (int64_t i = 0; i < k; ++i) {
    fold.multipliers[i] = out != nullptr ? in.scale * weight_scales[i] / out->scale : in.scale * weight_scales[i];
  }
  if (bias_name.empty()) return absl::OkStatus();
  const Tensor* bias = graph.FindConstant(bias_name);
  if (bias == nullptr || NumElements(bias->shape) != k || bias->shape.size() > 2 ||
      (bias->shape.size() == 2 && bias->shape[0] != 1)) {
    return absl::FailedPreconditionError(absl::StrCat("its bias '", bias_name, "' is not a constant [", k, "]"));
  }
  fold.bias.resize(k);
  for (int64_t i = 0; i < k; ++i) {
    const double q = std::nearbyint(static_cast<double>(bias->data[i]) /
                                    (static_cast<double>(in.scale) * static_cast<double>(weight_scales[i])));
    if (!(std::fabs(q) <= std::numeric_limits<int32_t>::max())) {
      return absl::FailedPreconditionError(absl::StrCat("its bias ", i, " (", bias->data[i],
                                                        ") does not fit INT32 at the input x weight scale"));
    }
    fold.bias[i] = static_cast<int32_t>(q);
  }
  return absl::OkStatus();
}

// The fold of one convolution whose input and output QDQ nodes are known, or why there is none.
absl::Status FoldConv(const Graph& graph, const Node& conv, const QdqParams& in, const QdqParams& out,
                      QuantizedConvFold& fold) {
  const auto& a = conv.As<Conv2dAttrs>();
  if (a.residual != ResidualPosition::kNone) return absl::FailedPreconditionError("a residual add is fused into it");
  if (a.has_channel_scale) return absl::FailedPreconditionError("a per-channel scale is fused into it");
  fold.source = QuantizedFoldSource::kConv;
  fold.window = a.window;
  fold.groups = a.groups;
  std::vector<float> weight_scales;
  CONVOY_RETURN_IF_ERROR(ReadWeights(graph, conv, fold, weight_scales));
  return FoldRequantization(graph, a.has_bias ? conv.inputs[2] : "", a.activation, in, &out, weight_scales, fold);
}

// A global average pool between QDQ nodes as a depthwise convolution with unit INT8 weights over the whole H x W
// image: acc = sum (x - x_zero_point) exactly, and one multiplier x_scale / (y_scale * float(H * W)), which is what
// onnxruntime's QLinearGlobalAveragePool computes (its MLAS kernel: the sum less x_zero_point * H * W, times that FP32
// scale, rounded half to even, plus y_zero_point, saturated).
absl::Status FoldGlobalAveragePool(const Graph& graph, const Node& pool, const QdqParams& in, const QdqParams& out,
                                   QuantizedConvFold& fold) {
  CONVOY_ASSIGN_OR_RETURN(const Shape shape, graph.ShapeOf(pool.inputs[0]));
  if (shape.size() != 4 || shape[1] < 1 || shape[2] < 1 || shape[3] < 1) {
    return absl::FailedPreconditionError(absl::StrCat("its input is ", ShapeToString(shape), ", not an image"));
  }
  const int64_t c = shape[1], h = shape[2], w = shape[3];
  fold.source = QuantizedFoldSource::kGlobalAveragePool;
  fold.window = Window2d{};
  fold.window.kernel_h = h, fold.window.kernel_w = w;
  fold.groups = c;
  fold.weight_shape = {c, 1, h, w};
  fold.weights.assign(static_cast<size_t>(c * h * w), 1);
  fold.src_type = in.type, fold.src_scale = in.scale, fold.src_zero_point = in.zero_point;
  fold.dst_type = out.type, fold.dst_scale = out.scale, fold.dst_zero_point = out.zero_point;
  fold.relu = false;
  fold.multipliers.assign(c, in.scale / (out.scale * static_cast<float>(h * w)));
  return absl::OkStatus();
}

// A Gemm between QDQ nodes, y [N, K] = x [N, C] B + bias, as a 1x1 convolution on the [N, C, 1, 1] image: what
// onnxruntime's QGemm computes (INT32 accumulation with the INT32 bias, then its QLinearConv requantization; without
// `out`, an FP32 output float(acc + bias) * x_scale * w_scale[k]).
absl::Status FoldGemm(const Graph& graph, const Node& gemm, const QdqParams& in, const QdqParams* out,
                      QuantizedConvFold& fold) {
  const auto& a = gemm.As<GemmAttrs>();
  if (a.transpose_a) return absl::FailedPreconditionError("its A is transposed; the INT8 Gemm takes A as [N, C]");
  if (a.alpha != 1.0f || (a.has_bias && a.beta != 1.0f)) {
    return absl::FailedPreconditionError(absl::StrCat("its alpha ", a.alpha, " and beta ", a.beta,
                                                      " are not 1; the INT8 Gemm takes y = x B + bias"));
  }
  CONVOY_ASSIGN_OR_RETURN(const Shape shape, graph.ShapeOf(gemm.inputs[0]));
  if (shape.size() != 2) {
    return absl::FailedPreconditionError(absl::StrCat("its input is ", ShapeToString(shape),
                                                      "; the INT8 Gemm takes [N, C]"));
  }
  fold.source = QuantizedFoldSource::kGemm;
  fold.window = Window2d{};
  fold.groups = 1;
  std::vector<float> weight_scales;
  CONVOY_RETURN_IF_ERROR(ReadGemmWeights(graph, gemm, fold, weight_scales));
  if (fold.weight_shape[1] != shape[1]) {
    return absl::FailedPreconditionError(absl::StrCat("its weights ", ShapeToString(fold.weight_shape),
                                                      " do not match its input ", ShapeToString(shape)));
  }
  return FoldRequantization(graph, a.has_bias ? gemm.inputs[2] : "", a.activation, in, out, weight_scales, fold);
}

}  // namespace

const char* QuantizedFoldSourceName(QuantizedFoldSource source) {
  switch (source) {
    case QuantizedFoldSource::kConv: return "convolution";
    case QuantizedFoldSource::kGlobalAveragePool: return "global average pool";
    case QuantizedFoldSource::kGemm: return "Gemm";
  }
  return "?";
}

bool QuantizedConvAnalysis::ReadsQuantized(const std::string& reader, const std::string& tensor) const {
  if (const QuantizedViewFold* view = FindView(reader)) return view->input == tensor;
  if (const QuantizedMaxPoolFold* pool = FindMaxPool(reader)) return pool->input == tensor;
  if (const QuantizedConvFold* conv = Find(reader)) return conv->input == tensor || conv->residual == tensor;
  if (const QuantizedAddFold* add = FindAdd(reader)) return add->a == tensor || add->b == tensor;
  return false;
}

bool QuantizedConvAnalysis::FusedAway(const std::string& name) const {
  if (const QuantizedAddFold* add = FindAdd(name)) return !add->fused_into.empty();
  for (const auto& [conv, fold] : folds) {
    if (fold.fused_add != QuantizedFusedAdd::kNone && fold.output_node == name) return true;
  }
  return false;
}

void QuantizedConvAnalysis::Unfuse(const std::string& conv) {
  auto it = folds.find(conv);
  if (it == folds.end() || it->second.fused_add == QuantizedFusedAdd::kNone) return;
  if (auto add = adds.find(it->second.add); add != adds.end()) add->second.fused_into.clear();
  it->second.fused_add = QuantizedFusedAdd::kNone;
  it->second.add_single_rounding = false;
  it->second.add.clear();
  it->second.residual.clear();
}

namespace {

// Proposes fusing each folded add into the folded conv producing one of its operands: the conv's output QDQ node
// read by the add alone, the other operand produced earlier in the graph's order (it must exist when the conv runs).
// The second operand first (the order oneDNN reproduces without condition).
void ProposeAddFusions(const Graph& graph, QuantizedConvAnalysis& analysis) {
  std::map<std::string, int> index;  // node name -> position in the graph's order
  for (size_t i = 0; i < graph.nodes().size(); ++i) index[graph.nodes()[i].name] = static_cast<int>(i);
  std::map<std::string, std::string> conv_of_output;  // 8-bit output tensor -> conv
  for (const auto& [name, fold] : analysis.folds) conv_of_output[fold.output] = name;
  for (auto& [name, add] : analysis.adds) {
    const int add_index = index.at(name);
    for (const bool conv_is_b : {true, false}) {
      const std::string& operand = conv_is_b ? add.b : add.a;
      const std::string& other = conv_is_b ? add.a : add.b;
      auto conv = conv_of_output.find(operand);
      if (conv == conv_of_output.end() || operand == other) continue;
      QuantizedConvFold& fold = analysis.folds.at(conv->second);
      const std::vector<int> readers = graph.ConsumerIndices(operand);
      if (fold.fused_add != QuantizedFusedAdd::kNone || readers.size() != 1 || readers[0] != add_index ||
          graph.IsGraphOutput(operand) || graph.ProducerIndex(other) >= index.at(fold.conv)) {
        continue;
      }
      fold.fused_add = conv_is_b ? QuantizedFusedAdd::kConvIsB : QuantizedFusedAdd::kConvIsA;
      fold.add = name;
      fold.residual = other;
      add.fused_into = fold.conv;
      break;
    }
  }
}

// The QDQ node alone reading `tensor` (not a graph output), or -1.
int SoleQdqReader(const Graph& graph, const std::string& tensor, QdqParams& params) {
  const std::vector<int> readers = graph.ConsumerIndices(tensor);
  if (readers.size() != 1 || graph.IsGraphOutput(tensor)) return -1;
  const Node& reader = graph.nodes()[readers[0]];
  return AsQdq(reader, params) && reader.inputs[0] == tensor ? readers[0] : -1;
}

// The QDQ parameters of the node producing `tensor`, if a QDQ node does.
bool ProducedByQdq(const Graph& graph, const std::string& tensor, QdqParams& params) {
  const int producer = graph.ProducerIndex(tensor);
  return producer >= 0 && AsQdq(graph.nodes()[producer], params);
}

// A residual Add between QDQ nodes: folded into analysis.adds, or its reason recorded.
void AnalyzeAdd(const Graph& graph, const Node& add, QuantizedConvAnalysis& analysis) {
  if (add.As<BinaryAttrs>().kind != BinaryKind::kAdd || add.inputs.size() != 2) return;
  QdqParams a, b, y;
  const bool a_quantized = ProducedByQdq(graph, add.inputs[0], a);
  const bool b_quantized = ProducedByQdq(graph, add.inputs[1], b);
  const int reader = SoleQdqReader(graph, add.outputs[0], y);
  if (!a_quantized && !b_quantized && reader < 0) return;  // not part of the model's quantized layers
  std::string reason;
  auto shape_of = [&graph](const std::string& t) {
    auto s = graph.ShapeOf(t);
    return s.ok() ? *s : Shape{};
  };
  const Shape out = shape_of(add.outputs[0]);
  if (!a_quantized || !b_quantized) {
    reason = absl::StrCat("its operand '", add.inputs[a_quantized ? 1 : 0], "' is not quantized");
  } else if (reader < 0) {
    reason = absl::StrCat("its sum '", add.outputs[0], "' is not read by a QuantizeLinear -> DequantizeLinear alone");
  } else if (out.size() != 4 || shape_of(add.inputs[0]) != out || shape_of(add.inputs[1]) != out) {
    reason = absl::StrCat("its operands ", ShapeToString(shape_of(add.inputs[0])), " and ",
                          ShapeToString(shape_of(add.inputs[1])), " broadcast; the INT8 add takes two images of "
                          "the sum's shape");
  }
  if (!reason.empty()) {
    analysis.fp32_reasons[add.name] = reason;
    return;
  }
  QuantizedAddFold fold;
  fold.add = add.name;
  fold.a = add.inputs[0], fold.b = add.inputs[1];
  fold.output_node = graph.nodes()[reader].name;
  fold.output = graph.nodes()[reader].outputs[0];
  QuantizedAddProblem& q = fold.quantization;
  q.a_type = a.type, q.a_scale = a.scale, q.a_zero_point = a.zero_point;
  q.b_type = b.type, q.b_scale = b.scale, q.b_zero_point = b.zero_point;
  q.y_type = y.type, q.y_scale = y.scale, q.y_zero_point = y.zero_point;
  analysis.adds.emplace(add.name, std::move(fold));
}

// Whether `node` is a graph op an INT8 convolution step can run: a Conv2d, a global average pool, a Gemm.
bool FoldableOp(const Node& node) {
  if (node.op() == OpKind::kConv2d || node.op() == OpKind::kGemm) return true;
  if (node.op() != OpKind::kPool2d) return false;
  const auto& a = node.As<Pool2dAttrs>();
  return a.kind == PoolKind::kAverage && a.global;
}

// A Flatten / Reshape / Identity from [N, C, 1, 1] to [N, C] between two QDQ nodes of one quantization: recorded in
// analysis.views.
void AnalyzeView(const Graph& graph, const Node& node, QuantizedConvAnalysis& analysis) {
  if (node.inputs.empty() || node.outputs.size() != 1) return;
  QdqParams in, out;
  if (!ProducedByQdq(graph, node.inputs[0], in)) return;
  const int reader = SoleQdqReader(graph, node.outputs[0], out);
  if (reader < 0 || in.type != out.type || in.scale != out.scale || in.zero_point != out.zero_point) return;
  auto from = graph.ShapeOf(node.inputs[0]);
  auto to = graph.ShapeOf(node.outputs[0]);
  if (!from.ok() || !to.ok() || from->size() != 4 || (*from)[2] != 1 || (*from)[3] != 1 || to->size() != 2 ||
      (*to)[0] != (*from)[0] || (*to)[1] != (*from)[1]) {
    return;
  }
  analysis.views.emplace(node.name, QuantizedViewFold{node.name, node.inputs[0], graph.nodes()[reader].name,
                                                      graph.nodes()[reader].outputs[0]});
}

// A max pool between two QDQ nodes of one quantization with a positive scale: recorded in analysis.max_pools.
void AnalyzeMaxPool(const Graph& graph, const Node& node, QuantizedConvAnalysis& analysis) {
  if (node.As<Pool2dAttrs>().kind != PoolKind::kMax || node.inputs.empty() || node.outputs.size() != 1) return;
  QdqParams in, out;
  if (!ProducedByQdq(graph, node.inputs[0], in)) return;
  const int reader = SoleQdqReader(graph, node.outputs[0], out);
  if (reader < 0 || in.type != out.type || in.scale != out.scale || in.zero_point != out.zero_point ||
      !(in.scale > 0.0f)) {
    return;
  }
  analysis.max_pools.emplace(node.name, QuantizedMaxPoolFold{node.name, node.inputs[0], graph.nodes()[reader].name,
                                                             graph.nodes()[reader].outputs[0], in.type,
                                                             node.As<Pool2dAttrs>()});
}

}  // namespace

QuantizedConvAnalysis AnalyzeQuantizedConvs(const Graph& graph) {
  QuantizedConvAnalysis analysis;
  for (const Node& conv : graph.nodes()) {
    if (conv.op() == OpKind::kBinary) AnalyzeAdd(graph, conv, analysis);
    if (conv.op() == OpKind::kFlatten || conv.op() == OpKind::kReshape || conv.op() == OpKind::kIdentity) {
      AnalyzeView(graph, conv, analysis);
    }
    if (conv.op() == OpKind::kPool2d) AnalyzeMaxPool(graph, conv, analysis);
    if (!FoldableOp(conv)) continue;
    QdqParams in, out;
    const int producer = graph.ProducerIndex(conv.inputs[0]);
    const bool quantized_input = producer >= 0 && AsQdq(graph.nodes()[producer], in);
    const std::string& y = conv.outputs[0];
    const std::vector<int> readers = graph.ConsumerIndices(y);
    const bool quantized_output =
        readers.size() == 1 && !graph.IsGraphOutput(y) && AsQdq(graph.nodes()[readers[0]], out) &&
        graph.nodes()[readers[0]].inputs[0] == y;
    if (!quantized_input && !quantized_output) continue;  // not part of the model's quantized layers
    // A Gemm with a quantized input whose output the graph reads in FP32: an INT8 step with an FP32 output where it
    // folds (else it is no quantized layer: nothing is listed).
    const bool fp32_gemm = conv.op() == OpKind::kGemm && quantized_input && !quantized_output;
    // A pool or Gemm with a QDQ node on one side only is a tail the model (or a calibration table, which quantizes
    // the tensors its convolutions and adds read and write) leaves in FP32: no quantized layer, no reason to give.
    if (conv.op() != OpKind::kConv2d && !(quantized_input && quantized_output) && !fp32_gemm) continue;
    if (!quantized_input) {
      analysis.fp32_reasons[conv.name] = absl::StrCat("its input '", conv.inputs[0], "' is not quantized (no "
                                                      "QuantizeLinear -> DequantizeLinear before it)");
      continue;
    }
    if (!quantized_output && !fp32_gemm) {
      analysis.fp32_reasons[conv.name] = absl::StrCat("its output '", y, "' is not read by a QuantizeLinear -> "
                                                      "DequantizeLinear alone");
      continue;
    }
    QuantizedConvFold fold;
    fold.conv = conv.name;
    fold.input = conv.inputs[0];
    fold.output_node = fp32_gemm ? "" : graph.nodes()[readers[0]].name;
    fold.output = fp32_gemm ? y : graph.nodes()[readers[0]].outputs[0];
    absl::Status folded = conv.op() == OpKind::kConv2d ? FoldConv(graph, conv, in, out, fold)
                          : conv.op() == OpKind::kGemm ? FoldGemm(graph, conv, in, fp32_gemm ? nullptr : &out, fold)
                                                       : FoldGlobalAveragePool(graph, conv, in, out, fold);
    if (!folded.ok()) {
      if (!fp32_gemm) analysis.fp32_reasons[conv.name] = std::string(folded.message());
      continue;
    }
    analysis.folds.emplace(conv.name, std::move(fold));
  }
  ProposeAddFusions(graph, analysis);
  return analysis;
}

QuantizedConv2dProblem MakeQuantizedConvProblem(const QuantizedConvFold& fold, int n, int c, int h, int w,
                                                const QuantizedAddFold* add) {
  const Window2d& win = fold.window;
  QuantizedConv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = static_cast<int>(fold.weight_shape[0]);
  p.r = int(win.kernel_h), p.s = int(win.kernel_w);
  p.pad_top = int(win.pad_top), p.pad_bottom = int(win.pad_bottom);
  p.pad_left = int(win.pad_left), p.pad_right = int(win.pad_right);
  p.stride_h = int(win.stride_h), p.stride_w = int(win.stride_w);
  p.dilation_h = int(win.dilation_h), p.dilation_w = int(win.dilation_w);
  p.groups = int(fold.groups);
  p.src_type = fold.src_type, p.dst_type = fold.dst_type;
  p.layout = Layout::kNHWC;
  p.epilogue.src_zero_point = fold.src_zero_point;
  p.epilogue.dst_zero_point = fold.dst_zero_point;
  p.epilogue.has_bias = !fold.bias.empty();
  p.epilogue.relu = fold.relu;
  p.epilogue.scales = fold.multipliers;  // fixed at plan time: oneDNN builds them into the primitive
  if (add != nullptr && fold.fused_add != QuantizedFusedAdd::kNone && fold.add_single_rounding) {
    const QuantizedAddProblem& q = add->quantization;
    const bool conv_is_a = fold.fused_add == QuantizedFusedAdd::kConvIsA;
    p.dst_type = q.y_type;
    p.epilogue.dst_zero_point = q.y_zero_point;
    p.epilogue.residual = ResidualMode::kBeforeActivation;
    p.epilogue.residual_scale = (conv_is_a ? q.b_scale : q.a_scale) / q.y_scale;
    p.epilogue.residual_zero_point = conv_is_a ? q.b_zero_point : q.a_zero_point;
    for (size_t k = 0; k < p.epilogue.scales.size(); ++k) {
      p.epilogue.scales[k] = fold.src_scale * fold.weight_scales[k] / q.y_scale;
    }
  } else if (add != nullptr && fold.fused_add != QuantizedFusedAdd::kNone) {
    p.fused_add = fold.fused_add;
    p.add = add->quantization;
    p.add.count = 1;  // not used by the convolution
    p.dst_type = p.add.y_type;
  }
  return p;
}

bool SingleRoundingAddApplies(const QuantizedConvFold& fold, const QuantizedAddFold& add) {
  if (fold.fused_add == QuantizedFusedAdd::kNone || fold.relu || fold.dst_type == DataType::kFloat32 ||
      fold.weight_scales.size() != fold.multipliers.size()) {
    return false;
  }
  const QuantizedAddProblem& q = add.quantization;
  const DataType residual_type = fold.fused_add == QuantizedFusedAdd::kConvIsA ? q.b_type : q.a_type;
  return residual_type == q.y_type;
}

}  // namespace convoy::runtime
