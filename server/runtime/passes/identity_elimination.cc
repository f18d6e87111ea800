// Identity elimination: readers of an Identity's output read its input instead. When the output is a graph output,
// the producer of the input is renamed instead, so graph output names never change.
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {

absl::StatusOr<int> EliminateIdentities(Graph& graph) {
  int removed = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < graph.nodes().size(); ++i) {
      const Node& node = graph.nodes()[i];
      if (node.op() != OpKind::kIdentity) continue;
      const std::string in = node.inputs[0], out = node.outputs[0];
      if (graph.IsGraphOutput(out)) {
        // Renaming works only for a node-produced input that is not itself a graph output.
        if (graph.ProducerIndex(in) < 0 || graph.IsGraphOutput(in)) continue;
        EraseNodes(graph, {static_cast<int>(i)});
        RenameProducedTensor(graph, in, out);
      } else {
        EraseNodes(graph, {static_cast<int>(i)});
        ReplaceUses(graph, out, in);
      }
      ++removed;
      changed = true;
      break;
    }
  }
  if (removed > 0) CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return removed;
}

}  // namespace convoy::runtime::passes
