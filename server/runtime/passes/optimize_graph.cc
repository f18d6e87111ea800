// OptimizeGraph: the pass pipeline. Cleanup first (identities, constants, dead nodes), then pattern fusions
// (activations, channel shuffle), then conv rewrites (batch norm, epilogue), repeated until nothing changes.
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {

std::string OptimizeStats::ToString() const {
  return absl::StrCat("constants folded ", constants_folded, ", identities removed ", identities_removed,
                      ", dead nodes removed ", dead_nodes_removed, ", batch norms folded ", batch_norms_folded,
                      ", activation patterns fused ", activations_fused, ", epilogue fusions ", epilogues_fused,
                      ", gemm epilogue fusions ", gemm_epilogues_fused,
                      ", channel shuffles fused ", channel_shuffles_fused, ", pads folded into convolutions ", pads_folded);
}

absl::StatusOr<OptimizeStats> OptimizeGraph(Graph& graph) {
  OptimizeStats stats;
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  // Each round either changes something or ends the loop; a graph of n nodes needs at most n rounds.
  for (size_t round = 0; round <= graph.nodes().size() + 1; ++round) {
    int changes = 0;
    auto run = [&](absl::StatusOr<int> (*pass)(Graph&), int& counter) -> absl::Status {
      CONVOY_ASSIGN_OR_RETURN(int n, pass(graph));
      counter += n;
      changes += n;
      return absl::OkStatus();
    };
    CONVOY_RETURN_IF_ERROR(run(EliminateIdentities, stats.identities_removed));
    CONVOY_RETURN_IF_ERROR(run(FoldConstants, stats.constants_folded));
    CONVOY_RETURN_IF_ERROR(run(EliminateDeadNodes, stats.dead_nodes_removed));
    CONVOY_RETURN_IF_ERROR(run(FuseActivationPatterns, stats.activations_fused));
    CONVOY_RETURN_IF_ERROR(run(FuseChannelShuffle, stats.channel_shuffles_fused));
    CONVOY_RETURN_IF_ERROR(run(FoldPadIntoConv, stats.pads_folded));
    CONVOY_RETURN_IF_ERROR(run(FoldBatchNormIntoConv, stats.batch_norms_folded));
    CONVOY_RETURN_IF_ERROR(run(FuseConvEpilogue, stats.epilogues_fused));
    CONVOY_RETURN_IF_ERROR(run(FuseGemmEpilogue, stats.gemm_epilogues_fused));
    if (changes == 0) break;
  }
  return stats;
}

}  // namespace convoy::runtime::passes
