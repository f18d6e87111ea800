// See fuzz_entries.h.
#include "tests/fuzz/fuzz_entries.h"

#include <string>
#include <string_view>

#include "kernels/common/status_macros.h"
#include "server/repository/convoy_graph_importer.h"
#include "server/repository/model_config.h"
#include "server/repository/onnx_importer.h"
#include "server/repository/safetensors.h"
#include "server/runtime/passes/passes.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::fuzz {
namespace {

// Optimizes the graph and, when it is small, runs it once so shape inference bugs surface as crashes.
absl::Status OptimizeAndRun(runtime::Graph& graph) {
  CONVOY_RETURN_IF_ERROR(runtime::passes::OptimizeGraph(graph).status());
  std::map<std::string, runtime::Tensor> inputs;
  int64_t total = 0;
  for (const runtime::GraphInput& in : graph.inputs()) {
    runtime::Shape shape = runtime::ConcreteShape(in.shape, 1);
    total += runtime::NumElements(shape);
    if (total > (1 << 16)) return absl::OkStatus();
    inputs[in.name] = runtime::Tensor::Zeros(shape);
  }
  return runtime::RunReference(graph, inputs).status();
}

}  // namespace

absl::Status ImportOnnxBytes(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  CONVOY_ASSIGN_OR_RETURN(runtime::Graph graph, repository::ImportOnnxModel(bytes, "fuzz.onnx", {}));
  return OptimizeAndRun(graph);
}

absl::Status ImportConvoyGraphBytes(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  size_t nul = bytes.find('\0');
  repository::TensorMap weights;
  if (nul != std::string_view::npos) {
    CONVOY_ASSIGN_OR_RETURN(weights, repository::ParseSafetensors(bytes.substr(nul + 1), "fuzz.safetensors"));
  }
  std::string yaml(bytes.substr(0, nul));
  CONVOY_ASSIGN_OR_RETURN(runtime::Graph graph, repository::ImportConvoyGraph(yaml, "fuzz.yaml", weights));
  return OptimizeAndRun(graph);
}

absl::Status ParseModelConfigBytes(const uint8_t* data, size_t size) {
  return repository::ParseModelConfigText(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml").status();
}

}  // namespace convoy::fuzz
