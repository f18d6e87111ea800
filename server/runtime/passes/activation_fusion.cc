// Activation pattern fusion: Mul(x, Sigmoid(x)) -> Silu(x) and Mul(x, HardSigmoid(x; alpha 1/6, beta 1/2)) ->
// HardSwish(x), as exporters spell them.
#include <cmath>
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {
namespace {

// If `gate` is produced by a sigmoid-like activation of `x` read only by `mul_index`, the fused kind.
bool MatchGate(const Graph& graph, const std::string& gate, const std::string& x, int mul_index, ActivationKind& kind,
               int& gate_index) {
  gate_index = graph.ProducerIndex(gate);
  if (gate_index < 0 || SoleConsumer(graph, gate) != mul_index) return false;
  const Node& node = graph.nodes()[gate_index];
  if (node.op() != OpKind::kActivation || node.inputs[0] != x) return false;
  const Activation& act = node.As<ActivationAttrs>().activation;
  if (act.kind == ActivationKind::kSigmoid) {
    kind = ActivationKind::kSilu;
    return true;
  }
  if (act.kind == ActivationKind::kHardSigmoid && std::abs(act.alpha - 1.0f / 6.0f) < 1e-7f &&
      std::abs(act.beta - 0.5f) < 1e-7f) {
    kind = ActivationKind::kHardSwish;
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<int> FuseActivationPatterns(Graph& graph) {
  std::set<int> erased;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    Node& mul = graph.mutable_nodes()[i];
    if (mul.op() != OpKind::kBinary || mul.As<BinaryAttrs>().kind != BinaryKind::kMul) continue;
    for (int side = 0; side < 2; ++side) {
      const std::string x = mul.inputs[side], gate = mul.inputs[1 - side];
      ActivationKind kind;
      int gate_index;
      if (!MatchGate(graph, gate, x, static_cast<int>(i), kind, gate_index) || erased.count(gate_index)) continue;
      mul.attrs = ActivationAttrs{Activation{kind, 0.0f, 0.0f}};
      mul.inputs = {x};
      erased.insert(gate_index);
      break;
    }
  }
  if (erased.empty()) return 0;
  EraseNodes(graph, erased);
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return static_cast<int>(erased.size());
}

}  // namespace convoy::runtime::passes
