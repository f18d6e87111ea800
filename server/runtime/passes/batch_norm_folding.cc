// Batch-norm folding: conv -> BatchNorm becomes one conv with w'[k] = w[k] * g[k] and
// b'[k] = (b[k] - mean[k]) * g[k] + beta[k], where g[k] = gamma[k] / sqrt(var[k] + eps).
#include <cmath>
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {
namespace {

// True when the conv can absorb an affine per-channel map of its output: nothing fused after the accumulation yet
// except bias and scale, and its weights (and bias) are constants.
bool ConvAcceptsAffine(const Graph& graph, const Node& conv) {
  if (conv.op() != OpKind::kConv2d) return false;
  const auto& a = conv.As<Conv2dAttrs>();
  if (a.residual != ResidualPosition::kNone || a.activation.kind != ActivationKind::kIdentity) return false;
  for (size_t i = 1; i < conv.inputs.size(); ++i) {
    if (!graph.IsConstant(conv.inputs[i])) return false;
  }
  return true;
}

}  // namespace

absl::StatusOr<int> FoldBatchNormIntoConv(Graph& graph) {
  std::set<int> erased;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& bn = graph.nodes()[i];
    if (bn.op() != OpKind::kBatchNorm) continue;
    int producer = graph.ProducerIndex(bn.inputs[0]);
    if (producer < 0 || SoleConsumer(graph, bn.inputs[0]) != static_cast<int>(i)) continue;
    Node& conv = graph.mutable_nodes()[producer];
    if (!ConvAcceptsAffine(graph, conv)) continue;
    const Tensor *gamma = graph.FindConstant(bn.inputs[1]), *beta = graph.FindConstant(bn.inputs[2]),
                 *mean = graph.FindConstant(bn.inputs[3]), *var = graph.FindConstant(bn.inputs[4]);
    if (!gamma || !beta || !mean || !var) continue;
    std::vector<double> multiplier(gamma->data.size()), addend(gamma->data.size());
    for (size_t k = 0; k < multiplier.size(); ++k) {
      multiplier[k] = gamma->data[k] / std::sqrt(static_cast<double>(var->data[k]) + bn.As<BatchNormAttrs>().epsilon);
      addend[k] = beta->data[k] - mean->data[k] * multiplier[k];
    }
    ApplyChannelAffineToConv(graph, conv, multiplier, addend);
    // The conv now produces the batch norm's output tensor directly.
    const std::string bn_out = bn.outputs[0];
    conv.outputs[0] = bn_out;
    erased.insert(static_cast<int>(i));
  }
  if (erased.empty()) return 0;
  EraseNodes(graph, erased);
  CONVOY_RETURN_IF_ERROR(EliminateDeadNodes(graph).status());
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return static_cast<int>(erased.size());
}

}  // namespace convoy::runtime::passes
