// The calibration-table rewrite of `precision: int8`; see calibrated_quantization.h.
#include "server/runtime/calibrated_quantization.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"
#include "server/runtime/quantized_conv_folding.h"

namespace convoy::runtime {
namespace {

bool IsQdq(const Node& node) {
  if (node.op() != OpKind::kActivation) return false;
  const ActivationKind kind = node.As<ActivationAttrs>().activation.kind;
  return kind == ActivationKind::kQuantizeDequantizeU8 || kind == ActivationKind::kQuantizeDequantizeS8;
}

// Why the INT8 kernels cannot run this convolution, or "" when they can (given quantized neighbours).
std::string ConvRefusal(const Graph& graph, const Node& conv) {
  const auto& a = conv.As<Conv2dAttrs>();
  const Tensor* w = graph.FindConstant(conv.inputs[1]);
  if (w == nullptr || w->shape.size() != 4) return "its weights are not a constant [K, C/groups, R, S]";
  if (a.residual != ResidualPosition::kNone) {
    return "a residual add is fused into it before its activation; the INT8 kernels add residuals as separate steps";
  }
  if (a.has_channel_scale) return "a per-channel scale is fused into it";
  switch (a.activation.kind) {
    case ActivationKind::kIdentity:
    case ActivationKind::kRelu:
    case ActivationKind::kClip: return "";
    default:
      return absl::StrCat("activation ", ActivationKindName(a.activation.kind),
                          " is fused into it; the INT8 kernels fuse ReLU (and clips their saturation expresses) only");
  }
}

bool IsGlobalAveragePool(const Node& node) {
  if (node.op() != OpKind::kPool2d) return false;
  const auto& a = node.As<Pool2dAttrs>();
  return a.kind == PoolKind::kAverage && a.global;
}

// Why the INT8 Gemm (a 1x1 INT8 convolution with an FP32 output) cannot run this Gemm, or "" when it can.
std::string GemmRefusal(const Graph& graph, const Node& gemm) {
  const auto& a = gemm.As<GemmAttrs>();
  const Tensor* w = graph.FindConstant(gemm.inputs[1]);
  if (w == nullptr || w->shape.size() != 2) return "its weights are not a constant matrix";
  auto x = graph.ShapeOf(gemm.inputs[0]);
  if (!x.ok() || x->size() != 2) return "its input is not [N, C]";
  if (a.transpose_a) return "its A is transposed; the INT8 Gemm takes A as [N, C]";
  if (a.alpha != 1.0f || (a.has_bias && a.beta != 1.0f)) return "its alpha or beta is not 1";
  if (a.activation.kind != ActivationKind::kIdentity && a.activation.kind != ActivationKind::kRelu) {
    return absl::StrCat("activation ", ActivationKindName(a.activation.kind),
                        " is fused into it; the INT8 Gemm with an FP32 output fuses ReLU only");
  }
  return "";
}

// A residual add the INT8 add can run: two runtime operands of the sum's [N, C, H, W] shape.
bool IsResidualAdd(const Graph& graph, const Node& node) {
  if (node.op() != OpKind::kBinary || node.As<BinaryAttrs>().kind != BinaryKind::kAdd || node.inputs.size() != 2) {
    return false;
  }
  auto out = graph.ShapeOf(node.outputs[0]);
  if (!out.ok() || out->size() != 4) return false;
  for (const std::string& in : node.inputs) {
    auto shape = graph.ShapeOf(in);
    if (graph.IsConstant(in) || !shape.ok() || *shape != *out) return false;
  }
  return true;
}

// The Gemm a global average pool feeds, directly or through one Flatten / Reshape / Identity, as a classifier's tail
// does; null for any other pool (a squeeze-and-excitation branch's stays FP32, where its fusion takes it).
const Node* GemmAfterPool(const Graph& graph, const Node& pool) {
  int reader = passes::SoleConsumer(graph, pool.outputs[0]);
  if (reader < 0 || graph.IsGraphOutput(pool.outputs[0])) return nullptr;
  const Node* next = &graph.nodes()[reader];
  if (next->op() == OpKind::kFlatten || next->op() == OpKind::kReshape || next->op() == OpKind::kIdentity) {
    reader = passes::SoleConsumer(graph, next->outputs[0]);
    if (reader < 0 || graph.IsGraphOutput(next->outputs[0])) return nullptr;
    next = &graph.nodes()[reader];
  }
  return next->op() == OpKind::kGemm ? next : nullptr;
}

// The kind of table entry `node` is, if calibration quantizes such nodes.
std::optional<CalibratedLayerKind> LayerKindOf(const Graph& graph, const Node& node) {
  if (node.op() == OpKind::kConv2d) return CalibratedLayerKind::kConv;
  if (node.op() == OpKind::kGemm) return CalibratedLayerKind::kGemm;
  if (IsGlobalAveragePool(node) && GemmAfterPool(graph, node) != nullptr) {
    return CalibratedLayerKind::kGlobalAveragePool;
  }
  if (IsResidualAdd(graph, node)) return CalibratedLayerKind::kResidualAdd;
  return std::nullopt;
}

// What a layer of `kind` reads and writes that the table quantizes: a Gemm's FP32 output is not among them.
std::vector<std::string> QuantizedTensorsOf(const Node& node, CalibratedLayerKind kind) {
  switch (kind) {
    case CalibratedLayerKind::kResidualAdd: return {node.inputs[0], node.outputs[0], node.inputs[1]};
    case CalibratedLayerKind::kGemm: return {node.inputs[0]};
    default: return {node.inputs[0], node.outputs[0]};
  }
}

// Why the INT8 kernels cannot run this layer, or "".
std::string LayerRefusal(const Graph& graph, const Node& node, CalibratedLayerKind kind) {
  switch (kind) {
    case CalibratedLayerKind::kConv: return ConvRefusal(graph, node);
    case CalibratedLayerKind::kGemm: return GemmRefusal(graph, node);
    case CalibratedLayerKind::kGlobalAveragePool: {
      const std::string gemm = GemmRefusal(graph, *GemmAfterPool(graph, node));
      return gemm.empty() ? "" : absl::StrCat("the Gemm after it stays FP32: ", gemm);
    }
    default: return "";
  }
}

// The axis of a convolution's or Gemm's weights that holds its output channels.
int OutputChannelAxis(const Node& node) {
  return node.op() == OpKind::kGemm && !node.As<GemmAttrs>().transpose_b ? 1 : 0;
}

// The kind an outcome reports for `node` (a Binary node the analysis names is a residual add).
CalibratedLayerKind KindForOutcome(const Graph& graph, const Node& node) {
  if (IsGlobalAveragePool(node)) return CalibratedLayerKind::kGlobalAveragePool;  // its Gemm is behind QDQ nodes now
  return LayerKindOf(graph, node).value_or(node.op() == OpKind::kBinary ? CalibratedLayerKind::kResidualAdd
                                                                        : CalibratedLayerKind::kConv);
}

// The ReLU node alone reading a residual add's sum (ResNet's relu(conv + x), separated), or null.
const Node* ReluAfter(const Graph& graph, const Node& add) {
  const int reader = passes::SoleConsumer(graph, add.outputs[0]);
  if (reader < 0) return nullptr;
  const Node& relu = graph.nodes()[reader];
  if (relu.op() != OpKind::kActivation || relu.As<ActivationAttrs>().activation.kind != ActivationKind::kRelu) {
    return nullptr;
  }
  return &relu;
}

// Where a residual add is followed by a ReLU and its table entry quantizes the ReLU's output to UINT8 with zero point
// 0, the ReLU goes: the add writes the ReLU's output, and its quantization's saturation at 0 is the ReLU (as in a QDQ
// file of ResNet). Returns the adds whose ReLU went, with the tensor each now writes.
std::map<std::string, std::string> AbsorbReluAfterResidualAdds(Graph& graph, const CalibrationTable& table) {
  std::map<std::string, std::string> absorbed;
  std::set<int> erase;
  for (Node& add : graph.mutable_nodes()) {
    if (!IsResidualAdd(graph, add)) continue;
    const Node* relu = ReluAfter(graph, add);
    const LayerCalibration* layer = table.FindLayer(add.name);
    if (relu == nullptr || layer == nullptr || !layer->int8 || graph.IsGraphOutput(relu->outputs[0])) continue;
    const TensorQuantization* q = table.FindTensor(relu->outputs[0]);
    if (q == nullptr || q->is_signed || q->zero_point != 0) continue;
    erase.insert(graph.ProducerIndex(relu->outputs[0]));
    absorbed[add.name] = relu->outputs[0];
    add.outputs[0] = relu->outputs[0];
  }
  passes::EraseNodes(graph, erase);
  return absorbed;
}

std::string DescribeScale(DataType type, float scale, int zero_point) {
  return absl::StrFormat("%s scale %.6g zero point %d", DataTypeName(type), scale, zero_point);
}

std::string DescribeWeights(const Graph& graph, const std::string& weights) {
  const ConstantQuantization* q = graph.FindConstantQuantization(weights);
  if (q == nullptr || q->scales.empty()) return "weights INT8";
  const auto [lo, hi] = std::minmax_element(q->scales.begin(), q->scales.end());
  return q->scales.size() == 1 ? absl::StrFormat("weights INT8 scale %.6g", *lo)
                               : absl::StrFormat("weights INT8 per channel (%d scales, %.3g to %.3g)",
                                                 q->scales.size(), *lo, *hi);
}

// Checks one table entry against the graph: tensors exist, layers exist with the right op, weight scales fit.
absl::Status CheckTable(const Graph& graph, const CalibrationTable& table, const std::string& source) {
  for (const TensorQuantization& t : table.tensors) {
    if (!graph.ShapeOf(t.name).ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": tensors['", t.name, "']: the model has no tensor of "
                                                     "that name (a table made for another model? run convoy "
                                                     "calibrate again)"));
    }
  }
  for (const LayerCalibration& layer : table.layers) {
    const std::string entry = absl::StrCat(source, ": layers['", layer.name, "']");
    auto it = std::find_if(graph.nodes().begin(), graph.nodes().end(),
                           [&](const Node& n) { return n.name == layer.name; });
    if (it == graph.nodes().end()) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ": the model has no layer of that name (a table made for "
                                                     "another model? run convoy calibrate again)"));
    }
    const std::optional<CalibratedLayerKind> kind = LayerKindOf(graph, *it);
    if (kind != layer.kind) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ": the table has a ", CalibratedLayerKindName(layer.kind),
                                                     ", the model's node is ", OpKindName(it->op())));
    }
    if (!layer.has_weights() || !layer.int8) continue;
    const Tensor* w = graph.FindConstant(it->inputs[1]);
    const char* what = layer.kind == CalibratedLayerKind::kGemm ? "Gemm" : "convolution";
    if (w == nullptr || w->shape.empty() || (layer.kind == CalibratedLayerKind::kGemm && w->shape.size() != 2)) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ": the ", what, "'s weights are not a constant"));
    }
    const int axis = OutputChannelAxis(*it);
    const int64_t k = w->shape[axis];
    if (static_cast<int64_t>(layer.weight_scales.size()) != k) {
      return absl::InvalidArgumentError(absl::StrCat(entry, ".weight_scales: ", layer.weight_scales.size(),
                                                     " scales, the ", what, " has ", k, " output channels"));
    }
    // Element i of output channel c: [K, ...] row-major, or column c of a Gemm's [C, K].
    const int64_t per_channel = NumElements(w->shape) / k;
    auto at = [&](int64_t c, int64_t i) { return axis == 0 ? w->data[c * per_channel + i] : w->data[i * k + c]; };
    for (int64_t c = 0; c < k; ++c) {
      float largest = 0;
      for (int64_t i = 0; i < per_channel; ++i) largest = std::max(largest, std::fabs(at(c, i)));
      // A scale made from these weights holds max |w| at 127 steps; allow rounding in the decimal text.
      if (largest > 127.5f * layer.weight_scales[c]) {
        return absl::InvalidArgumentError(absl::StrCat(
            entry, ".weight_scales[", c, "]: ", layer.weight_scales[c], " holds |w| up to ",
            127 * layer.weight_scales[c], ", the weights of output channel ", c, " reach ", largest,
            " (a table made for other weights? run convoy calibrate again)"));
      }
    }
  }
  return absl::OkStatus();
}

// Weights float(q) * scale[k], q the saturated INT8 rounding, k along `axis` (0: [K, ...]; 1: a Gemm's [C, K]);
// records their quantization on the graph.
void QuantizeWeights(Graph& graph, const std::string& name, const std::vector<float>& scales, int axis) {
  Tensor& w = graph.mutable_constants().at(name);
  const int64_t k = w.shape[axis];
  const int64_t per_channel = NumElements(w.shape) / k;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const float scale = scales[axis == 0 ? i / per_channel : i % k];
    const double q = std::clamp(std::nearbyint(static_cast<double>(w.data[i]) / scale), -128.0, 127.0);
    w.data[i] = static_cast<float>(q) * scale;
  }
  graph.SetConstantQuantization(name, ConstantQuantization{true, axis, scales, std::vector<int64_t>(k, 0)});
}

}  // namespace

std::vector<float> LayerWeightScales(const Graph& graph, const Node& layer) {
  const Tensor* w = graph.FindConstant(layer.inputs[1]);
  if (w == nullptr || w->shape.empty()) return {};
  if (OutputChannelAxis(layer) == 0) return WeightScalesPerChannel(w->data, w->shape[0]);
  // A Gemm's B [C, K]: transposed to [K, C] first.
  const int64_t c = w->shape[0], k = w->shape[1];
  std::vector<float> kc(w->data.size());
  for (int64_t i = 0; i < c; ++i) {
    for (int64_t o = 0; o < k; ++o) kc[o * c + i] = w->data[i * k + o];
  }
  return WeightScalesPerChannel(kc, k);
}

int FitBiasInInt32(const Graph& graph, const Node& layer, float input_scale, std::vector<float>& weight_scales) {
  const bool has_bias = layer.op() == OpKind::kGemm ? layer.As<GemmAttrs>().has_bias
                                                    : layer.As<Conv2dAttrs>().has_bias;
  const Tensor* bias = has_bias && layer.inputs.size() > 2 ? graph.FindConstant(layer.inputs[2]) : nullptr;
  if (bias == nullptr || bias->data.size() != weight_scales.size()) return 0;
  int raised = 0;
  for (size_t k = 0; k < weight_scales.size(); ++k) {
    const double smallest = std::fabs(static_cast<double>(bias->data[k])) / (kLargestBiasSteps * input_scale);
    if (weight_scales[k] < smallest) {
      weight_scales[k] = static_cast<float>(smallest * (1 + 1e-6));
      ++raised;
    }
  }
  return raised;
}

absl::StatusOr<int> SeparateResidualAdds(Graph& graph) {
  std::vector<Node> added;
  int separated = 0;
  for (Node& conv : graph.mutable_nodes()) {
    if (conv.op() != OpKind::kConv2d) continue;
    auto& a = conv.As<Conv2dAttrs>();
    const bool relu_after = a.residual == ResidualPosition::kBeforeActivation &&
                            a.activation.kind == ActivationKind::kRelu;
    const bool separable = a.residual == ResidualPosition::kAfterActivation || relu_after ||
                           (a.residual == ResidualPosition::kBeforeActivation &&
                            a.activation.kind == ActivationKind::kIdentity);
    if (!separable) continue;
    const std::string residual = conv.inputs.back();
    conv.inputs.pop_back();
    a.residual = ResidualPosition::kNone;
    if (relu_after) a.activation = Activation{};
    const std::string out = conv.outputs[0];
    const std::string own = graph.UniqueName(conv.name + "/conv_output");
    conv.outputs[0] = own;  // renamed in place, so the next UniqueName sees it
    const std::string sum = relu_after ? graph.UniqueName(conv.name + "/residual_sum") : out;
    added.push_back(MakeNode(conv.name + "/residual_add", BinaryAttrs{BinaryKind::kAdd}, {own, residual}, {sum}));
    ++separated;
    if (relu_after) {
      added.push_back(MakeNode(conv.name + "/residual_relu", ActivationAttrs{Activation::Relu()}, {sum}, {out}));
    }
  }
  for (Node& node : added) CONVOY_RETURN_IF_ERROR(graph.AddNode(std::move(node)));
  if (!added.empty()) CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return separated;
}

CalibrationTargets FindCalibrationTargets(const Graph& graph) {
  CalibrationTargets targets;
  std::set<std::string> seen;
  auto measure = [&](const std::string& tensor) {
    if (seen.insert(tensor).second) targets.tensors.push_back(tensor);
  };
  for (const Node& node : graph.nodes()) {
    const std::optional<CalibratedLayerKind> kind = LayerKindOf(graph, node);
    if (!kind) continue;
    LayerCalibration layer;
    layer.name = node.name;
    layer.kind = *kind;
    layer.reason = LayerRefusal(graph, node, *kind);
    layer.int8 = layer.reason.empty();
    if (*kind == CalibratedLayerKind::kResidualAdd) {
      // Followed by a ReLU: the ReLU's output is what the INT8 add will write (AbsorbReluAfterResidualAdds).
      const Node* relu = ReluAfter(graph, node);
      measure(node.inputs[0]), measure(node.inputs[1]), measure(relu ? relu->outputs[0] : node.outputs[0]);
    } else if (layer.int8) {
      for (const std::string& t : QuantizedTensorsOf(node, *kind)) measure(t);
    }
    targets.layers.push_back(std::move(layer));
  }
  return targets;
}

bool HasQuantizeDequantize(const Graph& graph) {
  return std::any_of(graph.nodes().begin(), graph.nodes().end(), IsQdq);
}

absl::StatusOr<std::vector<LayerOutcome>> QuantizeWithCalibrationTable(Graph& graph, const CalibrationTable& table,
                                                                       const std::string& source) {
  CONVOY_RETURN_IF_ERROR(SeparateResidualAdds(graph).status());
  CONVOY_RETURN_IF_ERROR(CheckTable(graph, table, source));
  const std::map<std::string, std::string> absorbed = AbsorbReluAfterResidualAdds(graph, table);
  if (!absorbed.empty()) CONVOY_RETURN_IF_ERROR(graph.Finalize());
  // Which layers to quantize, and why the others are not.
  std::map<std::string, std::string> fp32_reasons;
  std::set<std::string> wrapped;                     // tensors that get a quantize-dequantize node
  std::map<std::string, Tensor> original_weights;    // by constant name, to restore where a conv does not fold
  std::map<std::string, std::string> conv_weights;   // conv node -> its weights constant
  for (const Node& node : graph.nodes()) {
    const std::optional<CalibratedLayerKind> kind = LayerKindOf(graph, node);
    if (!kind) continue;
    const bool weighted = *kind == CalibratedLayerKind::kConv || *kind == CalibratedLayerKind::kGemm;
    const LayerCalibration* layer = table.FindLayer(node.name);
    const std::vector<std::string> tensors = QuantizedTensorsOf(node, *kind);
    std::string reason;
    if (layer == nullptr) {
      // A table from before the classifier's tail was quantized lists no pool or Gemm: they stay FP32 silently.
      if (*kind == CalibratedLayerKind::kGlobalAveragePool || *kind == CalibratedLayerKind::kGemm) continue;
      reason = absl::StrCat("no entry in ", source);
    } else if (!layer->int8) {
      reason = absl::StrCat("kept FP32 by ", source, layer->reason.empty() ? "" : ": ", layer->reason);
    } else if (!LayerRefusal(graph, node, *kind).empty()) {
      reason = LayerRefusal(graph, node, *kind);
    } else if (weighted && graph.ConsumerIndices(node.inputs[1]).size() != 1) {
      reason = absl::StrCat("its weights '", node.inputs[1], "' are shared with another layer");
    }
    for (const std::string& t : tensors) {
      if (reason.empty() && table.FindTensor(t) == nullptr) reason = absl::StrCat("tensor '", t, "' has no entry in ", source);
    }
    if (!reason.empty()) {
      fp32_reasons[node.name] = reason;
      continue;
    }
    wrapped.insert(tensors.begin(), tensors.end());
    if (weighted) {
      conv_weights[node.name] = node.inputs[1];
      original_weights[node.inputs[1]] = *graph.FindConstant(node.inputs[1]);
    }
  }
  for (const Node& node : graph.nodes()) {
    auto it = conv_weights.find(node.name);
    if (it == conv_weights.end()) continue;
    std::vector<float> scales = table.FindLayer(node.name)->weight_scales;
    FitBiasInInt32(graph, node, table.FindTensor(node.inputs[0])->scale, scales);
    QuantizeWeights(graph, it->second, scales, OutputChannelAxis(node));
  }

  // A quantize-dequantize node after each wrapped tensor, in a deterministic (graph input, then node) order.
  std::vector<std::string> order;
  for (const GraphInput& in : graph.inputs()) {
    if (wrapped.count(in.name)) order.push_back(in.name);
  }
  for (const Node& node : graph.nodes()) {
    for (const std::string& out : node.outputs) {
      if (wrapped.count(out)) order.push_back(out);
    }
  }
  std::map<std::string, std::string> qdq_of;  // tensor -> quantized tensor
  for (const std::string& tensor : order) {
    const TensorQuantization& q = *table.FindTensor(tensor);
    const std::string out = graph.UniqueName(tensor + "/quantized");
    for (Node& reader : graph.mutable_nodes()) {
      std::replace(reader.inputs.begin(), reader.inputs.end(), tensor, out);
    }
    Activation act;
    act.kind = q.is_signed ? ActivationKind::kQuantizeDequantizeS8 : ActivationKind::kQuantizeDequantizeU8;
    act.alpha = q.scale;
    act.beta = static_cast<float>(q.zero_point);
    CONVOY_RETURN_IF_ERROR(
        graph.AddNode(MakeNode(graph.UniqueName(tensor + "/quantize"), ActivationAttrs{act}, {tensor}, {out})));
    qdq_of[tensor] = out;
  }
  CONVOY_RETURN_IF_ERROR(graph.Finalize());

  // Undo what did not fold: quantize-dequantize nodes next to no folded layer, weights of unfolded convolutions.
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  std::set<std::string> useful;
  for (const auto& [name, fold] : analysis.folds) useful.insert(fold.input), useful.insert(fold.output);
  for (const auto& [name, fold] : analysis.adds) useful.insert(fold.a), useful.insert(fold.b), useful.insert(fold.output);
  std::set<int> erase;
  for (const auto& [tensor, quantized] : qdq_of) {
    if (useful.count(quantized)) continue;
    erase.insert(graph.ProducerIndex(quantized));
    passes::ReplaceUses(graph, quantized, tensor);
  }
  passes::EraseNodes(graph, erase);
  for (const auto& [conv, weights] : conv_weights) {
    if (analysis.Find(conv) == nullptr) graph.mutable_constants().at(weights) = original_weights.at(weights);
  }
  // An absorbed ReLU whose sum kept no quantize-dequantize node (nothing next to it folded) comes back.
  for (const auto& [add, out] : absorbed) {
    auto it = qdq_of.find(out);
    if (it != qdq_of.end() && useful.count(it->second)) continue;
    const std::string sum = graph.UniqueName(add + "/residual_sum");
    for (Node& node : graph.mutable_nodes()) {
      if (node.name == add) node.outputs[0] = sum;
    }
    CONVOY_RETURN_IF_ERROR(
        graph.AddNode(MakeNode(graph.UniqueName(add + "/relu"), ActivationAttrs{Activation::Relu()}, {sum}, {out})));
  }
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  // A residual add separated in step 1 whose convolution stays FP32 is fused back (the fusion never absorbs a
  // quantize-dequantize node, so the folded layers keep theirs).
  CONVOY_RETURN_IF_ERROR(passes::FuseConvEpilogue(graph).status());

  std::map<std::string, LayerOutcome> described;
  for (LayerOutcome& o : DescribeQuantizedLayers(graph)) described[o.node] = std::move(o);
  // In graph order; a layer the table left in FP32 says so, rather than what its quantized neighbours make of it.
  std::vector<LayerOutcome> outcomes;
  for (const Node& node : graph.nodes()) {
    auto it = described.find(node.name);
    auto reason = fp32_reasons.find(node.name);
    if (it != described.end()) {
      outcomes.push_back(it->second);
      if (reason != fp32_reasons.end() && !it->second.int8) outcomes.back().detail = reason->second;
    } else if (reason != fp32_reasons.end()) {
      outcomes.push_back({node.name, KindForOutcome(graph, node), false, reason->second});
    }
  }
  return outcomes;
}

std::vector<LayerOutcome> DescribeQuantizedLayers(const Graph& graph) {
  const QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph);
  std::vector<LayerOutcome> outcomes;
  for (const Node& node : graph.nodes()) {
    if (const QuantizedConvFold* f = analysis.Find(node.name)) {
      const CalibratedLayerKind kind = f->source == QuantizedFoldSource::kGlobalAveragePool
                                           ? CalibratedLayerKind::kGlobalAveragePool
                                       : f->source == QuantizedFoldSource::kGemm ? CalibratedLayerKind::kGemm
                                                                                 : CalibratedLayerKind::kConv;
      outcomes.push_back({node.name, kind, true,
                          absl::StrCat("in ", DescribeScale(f->src_type, f->src_scale, f->src_zero_point), ", out ",
                                       f->dst_type == DataType::kFloat32
                                           ? std::string("FP32")
                                           : DescribeScale(f->dst_type, f->dst_scale, f->dst_zero_point),
                                       ", ",
                                       f->source == QuantizedFoldSource::kGlobalAveragePool
                                           ? "as a depthwise convolution with unit weights"
                                           : DescribeWeights(graph, node.inputs[1]),
                                       f->relu ? ", relu" : "")});
    } else if (const QuantizedAddFold* a = analysis.FindAdd(node.name)) {
      const QuantizedAddProblem& q = a->quantization;
      outcomes.push_back({node.name, CalibratedLayerKind::kResidualAdd, true,
                          absl::StrCat("a ", DescribeScale(q.a_type, q.a_scale, q.a_zero_point), ", b ",
                                       DescribeScale(q.b_type, q.b_scale, q.b_zero_point), ", sum ",
                                       DescribeScale(q.y_type, q.y_scale, q.y_zero_point))});
    } else if (auto it = analysis.fp32_reasons.find(node.name); it != analysis.fp32_reasons.end()) {
      outcomes.push_back({node.name, KindForOutcome(graph, node), false, it->second});
    }
  }
  return outcomes;
}

}  // namespace convoy::runtime
