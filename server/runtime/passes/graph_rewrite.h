// Small graph-editing operations shared by the passes: renaming a tensor everywhere, erasing nodes, and the
// single-consumer test every fusion needs.
#ifndef CONVOY_SERVER_RUNTIME_PASSES_GRAPH_REWRITE_H_
#define CONVOY_SERVER_RUNTIME_PASSES_GRAPH_REWRITE_H_

#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "server/runtime/graph.h"

namespace convoy::runtime::passes {

// Replaces every read of `from` (node inputs and graph outputs) by `to`.
void ReplaceUses(Graph& graph, const std::string& from, const std::string& to);

// Renames the node output `from` to `to` and every read of it.
void RenameProducedTensor(Graph& graph, const std::string& from, const std::string& to);

// Removes the nodes at the given indices (indices into graph.nodes()).
void EraseNodes(Graph& graph, const std::set<int>& indices);

// The index of the only node reading `tensor`, or -1 when it has several readers, none, or is a graph output
// (then fusing it away would lose a value someone needs).
int SoleConsumer(const Graph& graph, const std::string& tensor);

// The epilogue fusions' loop: for each `producer_op` node whose output has a sole consumer, `absorb(graph, producer,
// consumer)` may fold that consumer into the producer (returning true); the producer then writes the consumer's
// output and the consumer is erased. Repeats until nothing more folds (the graph re-sorted after each fold, since an
// absorbed input may be produced later in the current order), then drops what became dead. Returns the folds made.
absl::StatusOr<int> FoldSoleConsumers(Graph& graph, OpKind producer_op,
                                      absl::FunctionRef<bool(Graph&, Node&, const Node&)> absorb);

// Adds `value` as a new constant named after `stem` and returns its name.
std::string AddFreshConstant(Graph& graph, const std::string& stem, Tensor value);

// Rewrites the Conv2d `conv` (constant weight and bias) so that its output becomes out * multiplier[k] + addend[k]
// for each output channel k: new weight and bias constants are added, and a bias input is added if it had none.
void ApplyChannelAffineToConv(Graph& graph, Node& conv, const std::vector<double>& multiplier,
                              const std::vector<double>& addend);

}  // namespace convoy::runtime::passes

#endif  // CONVOY_SERVER_RUNTIME_PASSES_GRAPH_REWRITE_H_
