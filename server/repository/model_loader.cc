// See model_loader.h.
#include "server/repository/model_loader.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/repository/convoy_graph_importer.h"
#include "server/repository/onnx_importer.h"

namespace convoy::repository {

absl::StatusOr<LoadedGraph> LoadGraphFile(const std::string& path, const LoadGraphOptions& options) {
  LoadedGraph loaded;
  if (absl::EndsWith(path, ".onnx")) {
    OnnxImportOptions onnx_options;
    onnx_options.input_shapes = options.input_shapes;
    CONVOY_ASSIGN_OR_RETURN(loaded.graph, ImportOnnxFile(path, onnx_options));
  } else if (absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml")) {
    CONVOY_ASSIGN_OR_RETURN(loaded.graph, ImportConvoyGraphFile(path));
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("model file '", path, "': unknown format (expected a .onnx or a Convoy .yaml graph)"));
  }
  if (options.optimize) {
    CONVOY_ASSIGN_OR_RETURN(loaded.stats, runtime::passes::OptimizeGraph(loaded.graph));
  }
  return loaded;
}

}  // namespace convoy::repository
