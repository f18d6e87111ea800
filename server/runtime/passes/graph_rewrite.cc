// See graph_rewrite.h.
#include "server/runtime/passes/graph_rewrite.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {

void ReplaceUses(Graph& graph, const std::string& from, const std::string& to) {
  for (Node& node : graph.mutable_nodes()) {
    std::replace(node.inputs.begin(), node.inputs.end(), from, to);
  }
  std::replace(graph.mutable_outputs().begin(), graph.mutable_outputs().end(), from, to);
}

void RenameProducedTensor(Graph& graph, const std::string& from, const std::string& to) {
  for (Node& node : graph.mutable_nodes()) {
    std::replace(node.outputs.begin(), node.outputs.end(), from, to);
  }
  ReplaceUses(graph, from, to);
}

void EraseNodes(Graph& graph, const std::set<int>& indices) {
  std::vector<Node> kept;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    if (!indices.count(static_cast<int>(i))) kept.push_back(std::move(graph.mutable_nodes()[i]));
  }
  graph.mutable_nodes() = std::move(kept);
}

int SoleConsumer(const Graph& graph, const std::string& tensor) {
  if (graph.IsGraphOutput(tensor)) return -1;
  std::vector<int> consumers = graph.ConsumerIndices(tensor);
  if (consumers.size() != 1) return -1;
  const auto& inputs = graph.nodes()[consumers[0]].inputs;
  if (std::count(inputs.begin(), inputs.end(), tensor) != 1) return -1;
  return consumers[0];
}

absl::StatusOr<int> FoldSoleConsumers(Graph& graph, OpKind producer_op,
                                      absl::FunctionRef<bool(Graph&, Node&, const Node&)> absorb) {
  int fused = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes().size() && !changed; ++i) {
      if (graph.nodes()[i].op() != producer_op) continue;
      const int reader_index = SoleConsumer(graph, graph.nodes()[i].outputs[0]);
      if (reader_index < 0) continue;
      const Node reader = graph.nodes()[reader_index];
      if (!absorb(graph, graph.mutable_nodes()[i], reader)) continue;
      graph.mutable_nodes()[i].outputs[0] = reader.outputs[0];
      EraseNodes(graph, {reader_index});
      CONVOY_RETURN_IF_ERROR(graph.Finalize());
      ++fused;
      changed = true;
    }
  }
  if (fused > 0) CONVOY_RETURN_IF_ERROR(EliminateDeadNodes(graph).status());
  return fused;
}

std::string AddFreshConstant(Graph& graph, const std::string& stem, Tensor value) {
  std::string name = graph.UniqueName(stem);
  graph.mutable_constants().emplace(name, std::move(value));
  return name;
}

// Rewrites `conv` so that its output becomes out * multiplier[k] + addend[k]. Shared with the epilogue fusion.
void ApplyChannelAffineToConv(Graph& graph, Node& conv, const std::vector<double>& multiplier,
                              const std::vector<double>& addend) {
  auto& a = conv.As<Conv2dAttrs>();
  Tensor weight = *graph.FindConstant(conv.inputs[1]);
  const int64_t k_out = weight.shape[0];
  const int64_t per_channel = NumElements(weight.shape) / k_out;
  for (int64_t k = 0; k < k_out; ++k) {
    for (int64_t i = 0; i < per_channel; ++i) {
      weight.data[k * per_channel + i] = static_cast<float>(weight.data[k * per_channel + i] * multiplier[k]);
    }
  }
  Tensor bias = a.has_bias ? *graph.FindConstant(conv.inputs[2]) : Tensor::Zeros({k_out});
  for (int64_t k = 0; k < k_out; ++k) bias.data[k] = static_cast<float>(bias.data[k] * multiplier[k] + addend[k]);
  conv.inputs[1] = AddFreshConstant(graph, conv.name + "_weight", std::move(weight));
  std::string bias_name = AddFreshConstant(graph, conv.name + "_bias", std::move(bias));
  if (a.has_bias) {
    conv.inputs[2] = bias_name;
  } else {
    a.has_bias = true;
    conv.inputs.insert(conv.inputs.begin() + 2, bias_name);
  }
}

}  // namespace convoy::runtime::passes
