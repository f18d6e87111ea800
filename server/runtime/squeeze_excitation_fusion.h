// Finds the squeeze-and-excitation branches of a graph that the planner can run as one kernel step
// (SqueezeExcitationOp, kernels/common/problems.h) instead of five:
//
//   x ──> GlobalAveragePool ──> Conv2d 1x1 (C -> S, bias, activation) ──> Conv2d 1x1 (S -> C, bias, gate activation)
//   │                                                                          │ gate [N,C,1,1]
//   └─────────────────────────────────────────────────────────> Mul(x, gate) ──> y
//
// (EfficientNet's SiLU / sigmoid, MobileNetV3's ReLU / hard sigmoid, RegNetY's ReLU / sigmoid). A branch qualifies
// when the pool's, the two convolutions' and the gate's outputs each have that one reader and are no graph output
// (nothing else needs them, so no step has to write them), and the convolutions are plain 1x1 ones: groups 1, stride
// 1, no padding, no dilation, no folded channel scale, no residual. x itself may have other readers.
//
// The analysis looks at the graph only; the planner (planner.cc, ChooseSqueezeExcitations) keeps the branches an
// algorithm of the device implements at every batch size, in the plan's precision, and plans the others node by node.
#ifndef CONVOY_SERVER_RUNTIME_SQUEEZE_EXCITATION_FUSION_H_
#define CONVOY_SERVER_RUNTIME_SQUEEZE_EXCITATION_FUSION_H_

#include <map>
#include <string>

#include "server/runtime/graph.h"

namespace convoy::runtime {

struct SqueezeExcitationBranch {
  std::string x;         // the tensor pooled and scaled
  const Node* pool = nullptr;
  const Node* reduce = nullptr;    // the 1x1 conv C -> squeeze
  const Node* expand = nullptr;    // the 1x1 conv squeeze -> C, whose activation is the gate's
  const Node* multiply = nullptr;  // its output is the branch's
  int64_t channels = 0, squeeze = 0;
};

// Every qualifying branch, by the name of its pool node. The Node pointers point into graph.nodes().
std::map<std::string, SqueezeExcitationBranch> FindSqueezeExcitationBranches(const Graph& graph);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_SQUEEZE_EXCITATION_FUSION_H_
