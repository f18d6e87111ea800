// Activation pattern fusion: Mul(x, Sigmoid(x)) -> Silu(x), Mul(x, HardSigmoid(x; alpha 1/6, beta 1/2)) ->
// HardSwish(x), and the exact GELU as torch.onnx writes it before opset 20 (x * (1 + erf(x / sqrt 2)) * 0.5, or
// x * 0.5 * (1 + erf(x / sqrt 2)); the division may be a multiplication by 1 / sqrt 2) -> Gelu(x).
#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

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

// Whether `name` is a one-element constant within 1e-6 (relative) of `value`.
bool IsScalar(const Graph& graph, const std::string& name, double value) {
  const Tensor* t = graph.FindConstant(name);
  return t != nullptr && t->data.size() == 1 && std::abs(t->data[0] - value) <= 1e-6 * std::abs(value);
}

// The binary node producing `tensor` when it is `kind`, read only by node `consumer`; null otherwise.
const Node* SoleBinary(const Graph& graph, const std::string& tensor, BinaryKind kind, int consumer, int& index) {
  index = graph.ProducerIndex(tensor);
  if (index < 0 || SoleConsumer(graph, tensor) != consumer) return nullptr;
  const Node& node = graph.nodes()[index];
  if (node.op() != OpKind::kBinary || node.As<BinaryAttrs>().kind != kind) return nullptr;
  return &node;
}

// The operand of commutative binary `node` other than a scalar constant `value`; empty when neither is.
std::string OtherThanScalar(const Graph& graph, const Node& node, double value) {
  if (IsScalar(graph, node.inputs[1], value)) return node.inputs[0];
  if (IsScalar(graph, node.inputs[0], value)) return node.inputs[1];
  return "";
}

// Whether `gate` = 1 + erf(x / sqrt 2), each step read only by the next and the last by `consumer`; adds its nodes.
bool MatchErfGate(const Graph& graph, const std::string& gate, const std::string& x, int consumer,
                  std::vector<int>& nodes) {
  int add_index, erf_index, scale_index;
  const Node* add = SoleBinary(graph, gate, BinaryKind::kAdd, consumer, add_index);
  if (add == nullptr) return false;
  const std::string erf_out = OtherThanScalar(graph, *add, 1.0);
  erf_index = erf_out.empty() ? -1 : graph.ProducerIndex(erf_out);
  if (erf_index < 0 || SoleConsumer(graph, erf_out) != add_index) return false;
  const Node& erf = graph.nodes()[erf_index];
  if (erf.op() != OpKind::kUnary || erf.As<UnaryAttrs>().kind != UnaryKind::kErf) return false;
  const Node* scale = SoleBinary(graph, erf.inputs[0], BinaryKind::kDiv, erf_index, scale_index);
  const bool divided = scale != nullptr && scale->inputs[0] == x && IsScalar(graph, scale->inputs[1], std::sqrt(2.0));
  if (!divided) {
    scale = SoleBinary(graph, erf.inputs[0], BinaryKind::kMul, erf_index, scale_index);
    if (scale == nullptr || OtherThanScalar(graph, *scale, 1.0 / std::sqrt(2.0)) != x) return false;
  }
  nodes.insert(nodes.end(), {add_index, erf_index, scale_index});
  return true;
}

// The GELU ending at Mul node `last`: its input x and the other nodes of the pattern, or false.
bool MatchGelu(const Graph& graph, int last, std::string& x, std::vector<int>& nodes) {
  const Node& mul = graph.nodes()[last];
  for (int side = 0; side < 2; ++side) {
    const std::string& first = mul.inputs[side];
    const std::string& second = mul.inputs[1 - side];
    int inner_index;
    const Node* inner = SoleBinary(graph, first, BinaryKind::kMul, last, inner_index);
    if (inner == nullptr) continue;
    for (int inner_side = 0; inner_side < 2; ++inner_side) {
      x = inner->inputs[inner_side];
      const std::string& other = inner->inputs[1 - inner_side];
      nodes = {inner_index};
      // (x * gate) * 0.5
      if (IsScalar(graph, second, 0.5) && MatchErfGate(graph, other, x, inner_index, nodes)) return true;
      nodes = {inner_index};
      // (x * 0.5) * gate
      if (IsScalar(graph, other, 0.5) && MatchErfGate(graph, second, x, last, nodes)) return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<int> FuseActivationPatterns(Graph& graph) {
  std::set<int> erased;
  int fused = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    Node& mul = graph.mutable_nodes()[i];
    if (mul.op() != OpKind::kBinary || mul.As<BinaryAttrs>().kind != BinaryKind::kMul) continue;
    std::string x;
    std::vector<int> gelu_nodes;
    if (MatchGelu(graph, static_cast<int>(i), x, gelu_nodes) &&
        std::none_of(gelu_nodes.begin(), gelu_nodes.end(), [&](int n) { return erased.count(n) > 0; })) {
      mul.attrs = ActivationAttrs{Activation{ActivationKind::kGelu, 0.0f, 0.0f}};
      mul.inputs = {x};
      erased.insert(gelu_nodes.begin(), gelu_nodes.end());
      ++fused;
      continue;
    }
    for (int side = 0; side < 2; ++side) {
      const std::string x = mul.inputs[side], gate = mul.inputs[1 - side];
      ActivationKind kind;
      int gate_index;
      if (!MatchGate(graph, gate, x, static_cast<int>(i), kind, gate_index) || erased.count(gate_index)) continue;
      mul.attrs = ActivationAttrs{Activation{kind, 0.0f, 0.0f}};
      mul.inputs = {x};
      erased.insert(gate_index);
      ++fused;
      break;
    }
  }
  if (erased.empty()) return 0;
  EraseNodes(graph, erased);
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return fused;
}

}  // namespace convoy::runtime::passes
