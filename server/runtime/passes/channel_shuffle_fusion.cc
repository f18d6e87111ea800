// Channel-shuffle fusion: Reshape [N,C,H,W] -> [N,g,C/g,H,W], Transpose perm [0,2,1,3,4], Reshape back to
// [N,C,H,W] is ShuffleNet's channel shuffle; it becomes one ChannelShuffle node.
#include <set>

#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {

absl::StatusOr<int> FuseChannelShuffle(Graph& graph) {
  std::set<int> erased;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& split_view = graph.nodes()[i];
    if (split_view.op() != OpKind::kReshape || erased.count(static_cast<int>(i))) continue;
    auto in_shape = graph.ShapeOf(split_view.inputs[0]);
    auto mid_shape = graph.ShapeOf(split_view.outputs[0]);
    if (!in_shape.ok() || !mid_shape.ok() || in_shape->size() != 4 || mid_shape->size() != 5) continue;
    const Shape &x = *in_shape, &m = *mid_shape;
    if (m[0] != x[0] || m[1] * m[2] != x[1] || m[3] != x[2] || m[4] != x[3]) continue;
    int t = SoleConsumer(graph, split_view.outputs[0]);
    if (t < 0 || graph.nodes()[t].op() != OpKind::kTranspose ||
        graph.nodes()[t].As<TransposeAttrs>().perm != std::vector<int64_t>{0, 2, 1, 3, 4}) {
      continue;
    }
    int r = SoleConsumer(graph, graph.nodes()[t].outputs[0]);
    if (r < 0 || graph.nodes()[r].op() != OpKind::kReshape) continue;
    auto out_shape = graph.ShapeOf(graph.nodes()[r].outputs[0]);
    if (!out_shape.ok() || *out_shape != x) continue;
    Node& last = graph.mutable_nodes()[r];
    last.attrs = ChannelShuffleAttrs{m[1]};
    last.inputs = {split_view.inputs[0]};
    erased.insert(static_cast<int>(i));
    erased.insert(t);
  }
  if (erased.empty()) return 0;
  EraseNodes(graph, erased);
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return static_cast<int>(erased.size() / 2);
}

}  // namespace convoy::runtime::passes
