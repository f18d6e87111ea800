// GEMM epilogue fusion: absorbs the sole reader of a Gemm's output into the kernel's epilogue, as the conv fusion
// does for convolutions:
//   - Add of a constant vector along the output's last axis ([N], [1,...,1,N] or a scalar) while the Gemm has no
//     bias: the bias (a Linear layer's bias, which torch.onnx writes as MatMul then Add);
//   - an activation while none is fused (ConvNeXt's Linear + GELU), but not a quantize-dequantize (QDQ models keep
//     it as its own step, as for convolutions).
#include <algorithm>
#include <vector>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {
namespace {

// A zeroed length-`n` bias when the constant holds one value or one per index of the last axis of a rank-`rank`
// output (and no more dims, so the Add does not broadcast the output); else empty.
std::vector<float> LastAxisValues(const Tensor& value, int64_t n, size_t rank) {
  const Shape& s = value.shape;
  if (s.size() > rank) return {};
  const int64_t count = NumElements(s);
  const bool ones_before = s.empty() || std::all_of(s.begin(), s.end() - 1, [](int64_t d) { return d == 1; });
  if (!ones_before || (count != 1 && count != n) || (count == n && s.back() != n)) return {};
  return std::vector<float>(static_cast<size_t>(n), 0.0f);
}

bool TryAbsorb(Graph& graph, Node& gemm, const Node& reader) {
  auto& a = gemm.As<GemmAttrs>();
  if (reader.op() == OpKind::kActivation) {
    const Activation& act = reader.As<ActivationAttrs>().activation;
    if (act.kind == ActivationKind::kQuantizeDequantizeU8 || act.kind == ActivationKind::kQuantizeDequantizeS8 ||
        a.activation.kind != ActivationKind::kIdentity) {
      return false;
    }
    a.activation = act;
    return true;
  }
  if (reader.op() != OpKind::kBinary || reader.As<BinaryAttrs>().kind != BinaryKind::kAdd || a.has_bias ||
      a.activation.kind != ActivationKind::kIdentity) {
    return false;
  }
  const std::string& other = reader.inputs[0] == gemm.outputs[0] ? reader.inputs[1] : reader.inputs[0];
  const Tensor* constant = graph.FindConstant(other);
  auto out_shape = graph.ShapeOf(gemm.outputs[0]);
  if (constant == nullptr || !out_shape.ok()) return false;
  const int64_t n = out_shape->back();
  std::vector<float> bias = LastAxisValues(*constant, n, out_shape->size());
  if (bias.empty()) return false;
  const int64_t count = NumElements(constant->shape);
  for (int64_t j = 0; j < n; ++j) bias[j] = constant->data[count == 1 ? 0 : j];
  a.has_bias = true;
  a.beta = 1.0f;
  gemm.inputs.push_back(AddFreshConstant(graph, gemm.name + "_bias", Tensor{{n}, std::move(bias)}));
  return true;
}

}  // namespace

absl::StatusOr<int> FuseGemmEpilogue(Graph& graph) {
  return FoldSoleConsumers(graph, OpKind::kGemm, TryAbsorb);
}

}  // namespace convoy::runtime::passes
