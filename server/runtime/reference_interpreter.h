// The reference interpreter: evaluates a Graph in plain C++ (float32 values, double accumulation for conv and
// gemm). It is slow and deliberately simple: tests use it to check that the importers and passes preserve a
// model's meaning, constant folding uses EvaluateNode, and it can serve as a last-resort fallback.
//
//   CONVOY_ASSIGN_OR_RETURN(auto outputs, RunReference(graph, {{"images", images}}));
#ifndef CONVOY_SERVER_RUNTIME_REFERENCE_INTERPRETER_H_
#define CONVOY_SERVER_RUNTIME_REFERENCE_INTERPRETER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {

// Evaluates one node on concrete input tensors (an absent optional input is nullptr).
absl::StatusOr<std::vector<Tensor>> EvaluateNode(const Node& node, const std::vector<const Tensor*>& inputs);

// Evaluates a finalized graph. Every graph input must be given, with the graph's shape and one batch size shared by
// all inputs with a symbolic batch. Returns the graph outputs by name.
absl::StatusOr<std::map<std::string, Tensor>> RunReference(const Graph& graph,
                                                           const std::map<std::string, Tensor>& inputs);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_REFERENCE_INTERPRETER_H_
