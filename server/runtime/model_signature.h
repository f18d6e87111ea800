// What a served model looks like from the outside: its inputs and outputs (name, datatype, dims with -1 for the
// batch dimension) and its max_batch_size. The request decoder (server/grpc/infer_codec.h) validates requests
// against a ModelSignature, the ModelMetadata RPC reports one, and the decoder fuzzer (tests/fuzz/) builds the same
// signatures from the sample models' config.yaml files.
//
//   CONVOY_ASSIGN_OR_RETURN(ModelSignature signature, SignatureFromConfig(config));   // what ModelRuntime declares
#ifndef CONVOY_SERVER_RUNTIME_MODEL_SIGNATURE_H_
#define CONVOY_SERVER_RUNTIME_MODEL_SIGNATURE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/dtype.h"
#include "server/repository/model_config.h"

namespace convoy::runtime {

// A model input or output as clients see it.
struct TensorMetadata {
  std::string name;
  DataType datatype = DataType::kFloat32;
  std::vector<int64_t> dims;  // with -1 for the batch dimension when the model batches
  // Inputs only: the input also takes photos (one JPEG / PNG per batch item as BYTES), from the config.
  std::optional<repository::EncodedImageConfig> encoded_image;
};

struct ModelSignature {
  std::string name;
  int max_batch_size = 0;  // 0: the model does not batch (its tensors carry no batch dimension)
  std::vector<TensorMetadata> inputs;
  std::vector<TensorMetadata> outputs;
};

// The datatype of a config tensor as the runtime serves it: FP32, FP16, BF16, UINT8 or INT32 (outputs: class maps
// and ArgMax outputs); INVALID_ARGUMENT naming the tensor otherwise.
absl::StatusOr<DataType> ServedDataType(repository::TensorDataType type, const std::string& tensor);

// The signature a config declares: its tensors in config order with dims as written (preprocessed images keep
// their [H, W, C] form, as clients send them), -1 prepended when max_batch_size > 0. ModelRuntime serves exactly
// this once it has checked the model file against it.
absl::StatusOr<ModelSignature> SignatureFromConfig(const repository::ModelConfig& config);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_MODEL_SIGNATURE_H_
