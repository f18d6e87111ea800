// See model_signature.h.
#include "server/runtime/model_signature.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime {

absl::StatusOr<DataType> ServedDataType(repository::TensorDataType type, const std::string& tensor) {
  switch (type) {
    case repository::TensorDataType::kFp32: return DataType::kFloat32;
    case repository::TensorDataType::kFp16: return DataType::kFloat16;
    case repository::TensorDataType::kBf16: return DataType::kBFloat16;
    case repository::TensorDataType::kUint8: return DataType::kUInt8;
    case repository::TensorDataType::kInt32: return DataType::kInt32;
    case repository::TensorDataType::kInt64: break;
  }
  return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor, "': datatype ",
                                                 repository::TensorDataTypeName(type),
                                                 " is not supported for model inputs and outputs"));
}

absl::StatusOr<ModelSignature> SignatureFromConfig(const repository::ModelConfig& config) {
  ModelSignature signature;
  signature.name = config.name;
  signature.max_batch_size = static_cast<int>(config.max_batch_size);
  auto declare = [&](const repository::TensorConfig& t) -> absl::StatusOr<TensorMetadata> {
    CONVOY_ASSIGN_OR_RETURN(DataType dtype, ServedDataType(t.data_type, t.name));
    std::vector<int64_t> dims = t.dims;
    if (signature.max_batch_size > 0) dims.insert(dims.begin(), -1);
    return TensorMetadata{t.name, dtype, dims};
  };
  for (const auto& input : config.inputs) {
    CONVOY_ASSIGN_OR_RETURN(TensorMetadata t, declare(input));
    t.encoded_image = input.encoded_image;
    signature.inputs.push_back(std::move(t));
  }
  for (const auto& output : config.outputs) {
    CONVOY_ASSIGN_OR_RETURN(TensorMetadata t, declare(output));
    signature.outputs.push_back(std::move(t));
  }
  return signature;
}

}  // namespace convoy::runtime
