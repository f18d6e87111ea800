// Constant folding: a node whose inputs are all constants is evaluated once with the reference interpreter and
// replaced by constant outputs.
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime::passes {

absl::StatusOr<int> FoldConstants(Graph& graph) {
  std::set<int> folded;
  // Nodes are in topological order, so a constant produced here is seen by the nodes after it.
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& node = graph.nodes()[i];
    std::vector<const Tensor*> args;
    bool all_constant = true;
    for (const std::string& in : node.inputs) {
      const Tensor* value = in.empty() ? nullptr : graph.FindConstant(in);
      if (!in.empty() && !value) all_constant = false;
      args.push_back(value);
    }
    if (!all_constant) continue;
    CONVOY_ASSIGN_OR_RETURN(std::vector<Tensor> outs, EvaluateNode(node, args));
    std::vector<std::string> names = node.outputs;
    folded.insert(static_cast<int>(i));
    for (size_t o = 0; o < outs.size(); ++o) graph.mutable_constants()[names[o]] = std::move(outs[o]);
  }
  if (folded.empty()) return 0;
  EraseNodes(graph, folded);
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return static_cast<int>(folded.size());
}

}  // namespace convoy::runtime::passes
