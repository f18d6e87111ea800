// Graph optimization passes, one per file, and OptimizeGraph, which runs them all in a sensible order.
//
// Every pass rewrites a finalized Graph in place, finalizes it again, and returns how many rewrites it made (0 when
// it found nothing to do). Each pass preserves the graph's meaning; the tests check that with the reference
// interpreter on random inputs and weights.
#ifndef CONVOY_SERVER_RUNTIME_PASSES_PASSES_H_
#define CONVOY_SERVER_RUNTIME_PASSES_PASSES_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"

namespace convoy::runtime::passes {

// Evaluates every node whose inputs are all constants and replaces it by constant outputs (constant_folding.cc).
absl::StatusOr<int> FoldConstants(Graph& graph);

// Removes Identity nodes (ONNX Identity, Dropout, Cast to float) by rewiring readers (identity_elimination.cc).
absl::StatusOr<int> EliminateIdentities(Graph& graph);

// Removes nodes whose outputs reach no graph output, and constants nothing reads (dead_node_elimination.cc).
absl::StatusOr<int> EliminateDeadNodes(Graph& graph);

// Folds an inference BatchNorm into the convolution before it (new weights and bias). A BatchNorm after anything
// but a plain, unshared convolution is left alone (batch_norm_folding.cc).
absl::StatusOr<int> FoldBatchNormIntoConv(Graph& graph);

// Recognizes activation patterns built from several nodes: x * sigmoid(x) -> silu,
// x * hard_sigmoid(x; 1/6, 1/2) -> hard_swish (activation_fusion.cc).
absl::StatusOr<int> FuseActivationPatterns(Graph& graph);

// Fuses what follows a convolution into its epilogue: per-channel constant add/sub/mul/div (folded into weights and
// bias), a residual add (before the activation, or after it when the activation is already fused), and an
// activation (conv_epilogue_fusion.cc).
absl::StatusOr<int> FuseConvEpilogue(Graph& graph);

// Fuses what follows a Gemm (or an N-D MatMul) into its epilogue: the Add of a constant vector along the last axis as
// its bias, then an activation (gemm_epilogue_fusion.cc).
absl::StatusOr<int> FuseGemmEpilogue(Graph& graph);

// A zero constant Pad of H and W feeding a convolution becomes the convolution's padding, where the sum stays
// within the kernel's extent (pad_folding.cc).
absl::StatusOr<int> FoldPadIntoConv(Graph& graph);

// Reshape [N,g,C/g,H,W] -> Transpose [0,2,1,3,4] -> Reshape [N,C,H,W] becomes one ChannelShuffle
// (channel_shuffle_fusion.cc).
absl::StatusOr<int> FuseChannelShuffle(Graph& graph);

struct OptimizeStats {
  int constants_folded = 0;
  int identities_removed = 0;
  int dead_nodes_removed = 0;
  int batch_norms_folded = 0;
  int activations_fused = 0;
  int epilogues_fused = 0;
  int gemm_epilogues_fused = 0;
  int channel_shuffles_fused = 0;
  int pads_folded = 0;

  std::string ToString() const;
};

// Runs every pass above until none finds more to do.
absl::StatusOr<OptimizeStats> OptimizeGraph(Graph& graph);

}  // namespace convoy::runtime::passes

#endif  // CONVOY_SERVER_RUNTIME_PASSES_PASSES_H_
