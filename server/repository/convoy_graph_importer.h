// Imports a Convoy YAML graph (model.yaml plus a safetensors weights file) into the graph IR. The format is
// documented, with an example, in docs/model_formats.md: named layers with an op, attributes and input edges; each
// layer's output tensor carries the layer's name; each layer's weights are "<layer>.weight", "<layer>.bias", ...
// in the safetensors file named by the top-level `weights` field (relative to the YAML file).
//
//   CONVOY_ASSIGN_OR_RETURN(runtime::Graph graph, ImportConvoyGraphFile("model_repo/simple_cnn/1/model.yaml"));
#ifndef CONVOY_SERVER_REPOSITORY_CONVOY_GRAPH_IMPORTER_H_
#define CONVOY_SERVER_REPOSITORY_CONVOY_GRAPH_IMPORTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/repository/safetensors.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

// Imports from text with the weights already read (the `weights` field, if present, is then only checked to be a
// string). `source` names the YAML in error messages.
absl::StatusOr<runtime::Graph> ImportConvoyGraph(const std::string& yaml_text, const std::string& source,
                                                 const TensorMap& weights);

// Reads the YAML file and the safetensors file its `weights` field names.
absl::StatusOr<runtime::Graph> ImportConvoyGraphFile(const std::string& path);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_CONVOY_GRAPH_IMPORTER_H_
