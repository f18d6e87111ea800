// Loads a model file into an optimized graph: picks the importer by file name (model.onnx -> ONNX importer,
// *.yaml -> Convoy graph importer), then runs the optimization passes. The one entry the server, the CLI and the
// whole-model tests share.
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_LOADER_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_LOADER_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"
#include "server/runtime/passes/passes.h"

namespace convoy::repository {

struct LoadGraphOptions {
  // Run OptimizeGraph after import (off: the graph exactly as imported, for debugging and pass tests).
  bool optimize = true;
  // Input shapes overriding the file's (ONNX only; dimension 0 may be runtime::kBatch).
  std::map<std::string, runtime::Shape> input_shapes;
};

struct LoadedGraph {
  runtime::Graph graph;
  runtime::passes::OptimizeStats stats;
};

absl::StatusOr<LoadedGraph> LoadGraphFile(const std::string& path, const LoadGraphOptions& options);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_LOADER_H_
