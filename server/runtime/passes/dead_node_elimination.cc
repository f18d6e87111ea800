// Dead-node elimination: walks back from the graph outputs; nodes never reached and constants nothing reads go.
#include <set>
#include <vector>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {

absl::StatusOr<int> EliminateDeadNodes(Graph& graph) {
  std::set<std::string> live(graph.outputs().begin(), graph.outputs().end());
  std::set<int> dead;
  // Reverse topological order: a node is live when any of its outputs is; its inputs then become live.
  for (int i = static_cast<int>(graph.nodes().size()) - 1; i >= 0; --i) {
    const Node& node = graph.nodes()[i];
    bool needed = false;
    for (const std::string& out : node.outputs) needed = needed || live.count(out) > 0;
    if (!needed) {
      dead.insert(i);
      continue;
    }
    live.insert(node.inputs.begin(), node.inputs.end());
  }
  std::vector<std::string> unused_constants;
  for (const auto& [name, value] : graph.constants()) {
    if (!live.count(name)) unused_constants.push_back(name);
  }
  for (const std::string& name : unused_constants) graph.mutable_constants().erase(name);
  if (dead.empty() && unused_constants.empty()) return 0;
  EraseNodes(graph, dead);
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return static_cast<int>(dead.size());
}

}  // namespace convoy::runtime::passes
