// Conv epilogue fusion. Repeatedly looks at the sole reader of each conv's output and absorbs it:
//   - Add/Sub/Mul/Div by a per-channel constant ([K,1,1], [1,K,1,1] or a scalar) while nothing but bias is fused:
//     folded into the weights and bias;
//   - Add of a same-shaped runtime tensor: the residual, before the activation when none is fused yet (ResNet's
//     relu(conv + x) once the activation follows), after it when one is (MobileNet's projection is the other order);
//   - an activation, when no activation and no after-activation residual is fused yet; not a quantize-dequantize
//     (QDQ models), which stays its own step: oneDNN's post-ops cannot round it the way ONNX does.
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {
namespace {

bool WeightsConstant(const Graph& graph, const Node& conv) {
  const auto& a = conv.As<Conv2dAttrs>();
  for (size_t i = 1; i < 2 + a.has_bias + a.has_channel_scale; ++i) {
    if (!graph.IsConstant(conv.inputs[i])) return false;
  }
  return true;
}

// The per-channel values of a constant that broadcasts over the channels of [N,K,H,W] only, or empty.
std::vector<double> PerChannelValues(const Tensor& value, int64_t channels) {
  // A rank-1 [K] would broadcast along W, not C, so only [K,1,1] and [1,K,1,1] (or one value) qualify.
  const Shape& s = value.shape;
  int64_t n = NumElements(s);
  bool scalar = n == 1 && s.size() <= 4;
  bool channel_vector = n == channels && ((s.size() == 3 && s[1] == 1 && s[2] == 1) ||
                                          (s.size() == 4 && s[0] == 1 && s[2] == 1 && s[3] == 1));
  if (!scalar && !channel_vector) return {};
  std::vector<double> out(channels);
  for (int64_t k = 0; k < channels; ++k) out[k] = value.data[scalar ? 0 : k];
  return out;
}

// Tries to absorb node `reader` into `conv`; returns true when the graph changed.
bool TryAbsorb(Graph& graph, Node& conv, const Node& reader) {
  auto& a = conv.As<Conv2dAttrs>();
  const std::string& conv_out = conv.outputs[0];
  const bool plain = a.residual == ResidualPosition::kNone && a.activation.kind == ActivationKind::kIdentity;
  if (reader.op() == OpKind::kActivation) {
    const ActivationKind kind = reader.As<ActivationAttrs>().activation.kind;
    if (kind == ActivationKind::kQuantizeDequantizeU8 || kind == ActivationKind::kQuantizeDequantizeS8 ||
        a.activation.kind != ActivationKind::kIdentity || a.residual == ResidualPosition::kAfterActivation) {
      return false;
    }
    a.activation = reader.As<ActivationAttrs>().activation;
    return true;
  }
  if (reader.op() != OpKind::kBinary) return false;
  const BinaryKind kind = reader.As<BinaryAttrs>().kind;
  const bool conv_first = reader.inputs[0] == conv_out;
  const std::string& other = conv_first ? reader.inputs[1] : reader.inputs[0];
  auto conv_shape = graph.ShapeOf(conv_out);
  auto other_shape = graph.ShapeOf(other);
  if (!conv_shape.ok() || !other_shape.ok()) return false;
  const int64_t channels = (*conv_shape)[1];
  if (const Tensor* constant = graph.FindConstant(other)) {
    std::vector<double> values = PerChannelValues(*constant, channels);
    if (values.empty() || !plain || !WeightsConstant(graph, conv)) return false;
    // Sub and Div are only linear in the conv output when the conv is the left operand.
    if (!conv_first && (kind == BinaryKind::kSub || kind == BinaryKind::kDiv)) return false;
    std::vector<double> multiplier(channels, 1.0), addend(channels, 0.0);
    for (int64_t k = 0; k < channels; ++k) {
      switch (kind) {
        case BinaryKind::kAdd: addend[k] = values[k]; break;
        case BinaryKind::kSub: addend[k] = -values[k]; break;
        case BinaryKind::kMul: multiplier[k] = values[k]; break;
        case BinaryKind::kDiv: multiplier[k] = 1.0 / values[k]; break;
      }
    }
    ApplyChannelAffineToConv(graph, conv, multiplier, addend);
    return true;
  }
  if (kind != BinaryKind::kAdd || *other_shape != *conv_shape || a.residual != ResidualPosition::kNone) return false;
  a.residual = a.activation.kind == ActivationKind::kIdentity ? ResidualPosition::kBeforeActivation
                                                               : ResidualPosition::kAfterActivation;
  conv.inputs.push_back(other);
  return true;
}

}  // namespace

absl::StatusOr<int> FuseConvEpilogue(Graph& graph) {
  return FoldSoleConsumers(graph, OpKind::kConv2d, TryAbsorb);
}

}  // namespace convoy::runtime::passes
