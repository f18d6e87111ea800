#include "server/runtime/squeeze_excitation_fusion.h"

#include <vector>

namespace convoy::runtime {
namespace {

// The one node reading `tensor`, or null when it has none or several readers or is a graph output.
const Node* SoleReader(const Graph& graph, const std::string& tensor) {
  if (graph.IsGraphOutput(tensor)) return nullptr;
  const std::vector<int> readers = graph.ConsumerIndices(tensor);
  if (readers.size() != 1) return nullptr;
  const Node& reader = graph.nodes()[readers[0]];
  int uses = 0;
  for (const std::string& input : reader.inputs) uses += input == tensor;
  return uses == 1 ? &reader : nullptr;
}

// A plain 1x1 conv reading `input` with a constant [out, in, 1, 1] filter; returns its output channels, or 0.
int64_t PlainPointwise(const Graph& graph, const Node& node, const std::string& input, int64_t in_channels) {
  if (node.op() != OpKind::kConv2d || node.inputs.empty() || node.inputs[0] != input) return 0;
  const auto& a = node.As<Conv2dAttrs>();
  const Window2d& w = a.window;
  if (a.groups != 1 || a.has_channel_scale || a.residual != ResidualPosition::kNone || w.kernel_h != 1 ||
      w.kernel_w != 1 || w.stride_h != 1 || w.stride_w != 1 || w.pad_top != 0 || w.pad_left != 0 ||
      w.pad_bottom != 0 || w.pad_right != 0 || w.dilation_h != 1 || w.dilation_w != 1) {
    return 0;
  }
  if (node.inputs.size() != (a.has_bias ? 3u : 2u) || node.outputs.size() != 1) return 0;
  const Tensor* weight = graph.FindConstant(node.inputs[1]);
  if (weight == nullptr || weight->shape.size() != 4 || weight->shape[1] != in_channels || weight->shape[2] != 1 ||
      weight->shape[3] != 1) {
    return 0;
  }
  if (a.has_bias) {
    const Tensor* bias = graph.FindConstant(node.inputs[2]);
    if (bias == nullptr || static_cast<int64_t>(bias->data.size()) != weight->shape[0]) return 0;
  }
  return weight->shape[0];
}

}  // namespace

std::map<std::string, SqueezeExcitationBranch> FindSqueezeExcitationBranches(const Graph& graph) {
  std::map<std::string, SqueezeExcitationBranch> branches;
  for (const Node& pool : graph.nodes()) {
    if (pool.op() != OpKind::kPool2d || pool.inputs.size() != 1 || pool.outputs.size() != 1) continue;
    const auto& pa = pool.As<Pool2dAttrs>();
    if (!pa.global || pa.kind != PoolKind::kAverage) continue;
    SqueezeExcitationBranch branch;
    branch.x = pool.inputs[0];
    auto x_shape = graph.ShapeOf(branch.x);
    if (!x_shape.ok() || x_shape->size() != 4) continue;
    branch.channels = (*x_shape)[1];
    branch.pool = &pool;
    branch.reduce = SoleReader(graph, pool.outputs[0]);
    if (branch.reduce == nullptr) continue;
    branch.squeeze = PlainPointwise(graph, *branch.reduce, pool.outputs[0], branch.channels);
    if (branch.squeeze == 0) continue;
    branch.expand = SoleReader(graph, branch.reduce->outputs[0]);
    if (branch.expand == nullptr ||
        PlainPointwise(graph, *branch.expand, branch.reduce->outputs[0], branch.squeeze) != branch.channels) {
      continue;
    }
    const std::string& gate = branch.expand->outputs[0];
    branch.multiply = SoleReader(graph, gate);
    const Node* m = branch.multiply;
    if (m == nullptr || m->op() != OpKind::kBinary || m->As<BinaryAttrs>().kind != BinaryKind::kMul ||
        m->inputs.size() != 2 || m->outputs.size() != 1) {
      continue;
    }
    const bool operands = (m->inputs[0] == branch.x && m->inputs[1] == gate) ||
                          (m->inputs[0] == gate && m->inputs[1] == branch.x);
    auto y_shape = graph.ShapeOf(m->outputs[0]);
    if (!operands || !y_shape.ok() || *y_shape != *x_shape) continue;
    branches.emplace(pool.name, branch);
  }
  return branches;
}

}  // namespace convoy::runtime
