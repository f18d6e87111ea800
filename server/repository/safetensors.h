// Reader for the safetensors weights format: an 8-byte little-endian header length, a JSON header mapping each
// tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of the header), an
// optional "__metadata__" entry, then the raw data. F32, F16, BF16 and I64 tensors are read and converted to float32.
// Every offset, size and shape is bounds-checked before any data is touched.
//
//   CONVOY_ASSIGN_OR_RETURN(auto weights, ReadSafetensorsFile("model_repo/simple_cnn/1/model.safetensors"));
//   const runtime::Tensor& w = weights.at("conv1.weight");
#ifndef CONVOY_SERVER_REPOSITORY_SAFETENSORS_H_
#define CONVOY_SERVER_REPOSITORY_SAFETENSORS_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

using TensorMap = std::map<std::string, runtime::Tensor>;

// `source` names the data in error messages.
absl::StatusOr<TensorMap> ParseSafetensors(std::string_view bytes, const std::string& source);
absl::StatusOr<TensorMap> ReadSafetensorsFile(const std::string& path);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_SAFETENSORS_H_
