#include "server/grpc/infer_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/tensor.h"

namespace convoy::grpc_server {
namespace {

using inference::InferParameter;
using inference::ModelInferRequest;
using repository::InferencePayload;
using repository::ServedModel;
using runtime::TensorMetadata;

std::string Names(const std::vector<TensorMetadata>& tensors) {
  std::vector<std::string> names;
  for (const TensorMetadata& t : tensors) names.push_back(absl::StrCat("'", t.name, "'"));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

int FindTensor(const std::vector<TensorMetadata>& tensors, const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// The integer value of a request parameter: INVALID_ARGUMENT unless it is an int64 or uint64 >= 0.
absl::StatusOr<int64_t> NonNegativeIntParameter(const InferParameter& p, absl::string_view name) {
  int64_t value = -1;
  if (p.parameter_choice_case() == InferParameter::kInt64Param) value = p.int64_param();
  if (p.parameter_choice_case() == InferParameter::kUint64Param && p.uint64_param() <= INT64_MAX) {
    value = static_cast<int64_t>(p.uint64_param());
  }
  if (value < 0) {
    return absl::InvalidArgumentError(absl::StrCat("parameter '", name, "': expected a non-negative integer, got ",
                                                   p.ShortDebugString()));
  }
  return value;
}

// Shape check: [batch, dims...] for a batching model, dims otherwise. Returns the batch size (1 without batching).
absl::StatusOr<int64_t> CheckShape(const ModelInferRequest::InferInputTensor& input, const TensorMetadata& t,
                                   const ServedModel& model) {
  const int max_batch = model.runtime().max_batch_size();
  const std::vector<int64_t> shape(input.shape().begin(), input.shape().end());
  bool matches = shape.size() == t.dims.size();
  for (size_t i = (max_batch > 0 ? 1 : 0); matches && i < shape.size(); ++i) matches = shape[i] == t.dims[i];
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected shape ", DimsToString(t.dims),
                                                   ", got ", DimsToString(shape)));
  }
  if (max_batch == 0) return 1;
  if (shape[0] < 1 || shape[0] > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': batch size ", shape[0],
                                                   " is outside 1..", max_batch, " (max_batch_size of model '",
                                                   model.name(), "')"));
  }
  return shape[0];
}

// Copies the typed contents of `input` into `buffer` (`count` elements of t.datatype).
absl::Status CopyTypedContents(const ModelInferRequest::InferInputTensor& input, const TensorMetadata& t,
                               int64_t count, HostBuffer& buffer) {
  const inference::InferTensorContents& c = input.contents();
  auto check_count = [&](int64_t got) -> absl::Status {
    if (got == count) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", count,
                                                   " elements in contents for shape ", DimsToString(input.shape()),
                                                   ", got ", got));
  };
  switch (t.datatype) {
    case DataType::kFloat32:
      CONVOY_RETURN_IF_ERROR(check_count(c.fp32_contents_size()));
      if (count > 0) std::memcpy(buffer.data(), c.fp32_contents().data(), count * sizeof(float));
      return absl::OkStatus();
    case DataType::kInt64:
      CONVOY_RETURN_IF_ERROR(check_count(c.int64_contents_size()));
      if (count > 0) std::memcpy(buffer.data(), c.int64_contents().data(), count * sizeof(int64_t));
      return absl::OkStatus();
    case DataType::kUInt8:
      CONVOY_RETURN_IF_ERROR(check_count(c.uint_contents_size()));
      for (int64_t i = 0; i < count; ++i) {
        if (c.uint_contents(i) > 255) {
          return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': UINT8 element ", i, " is ",
                                                         c.uint_contents(i), ", above 255"));
        }
        buffer.as<uint8_t>()[i] = static_cast<uint8_t>(c.uint_contents(i));
      }
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': typed contents cannot carry ",
                                                     DataTypeName(t.datatype), "; send raw_input_contents"));
  }
}

bool HasTypedContents(const inference::InferTensorContents& c) {
  return c.bool_contents_size() + c.int_contents_size() + c.int64_contents_size() + c.uint_contents_size() +
             c.uint64_contents_size() + c.fp32_contents_size() + c.fp64_contents_size() +
             c.bytes_contents_size() > 0;
}

// Decodes input `i` of the request into payload->inputs[model index]; returns its batch size.
absl::StatusOr<int64_t> DecodeInput(const ModelInferRequest& request, int i, const TensorMetadata& t,
                                    const ServedModel& model, HostBuffer* out) {
  const ModelInferRequest::InferInputTensor& input = request.inputs(i);
  if (input.datatype() != DataTypeName(t.datatype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected datatype ",
                                                   DataTypeName(t.datatype), ", got '", input.datatype(), "'"));
  }
  CONVOY_ASSIGN_OR_RETURN(const int64_t batch, CheckShape(input, t, model));
  int64_t count = 1;
  for (int64_t d : input.shape()) count *= d;
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(t.datatype);
  CONVOY_ASSIGN_OR_RETURN(*out, HostBuffer::Allocate(bytes));
  const bool typed = HasTypedContents(input.contents());
  if (request.raw_input_contents_size() > 0) {
    if (typed) {
      return absl::InvalidArgumentError(
          absl::StrCat("input '", t.name, "': contents and raw_input_contents are both set; send one"));
    }
    const std::string& raw = request.raw_input_contents(i);
    if (raw.size() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", bytes, " bytes for shape ",
                                                     DimsToString(input.shape()), " ", DataTypeName(t.datatype),
                                                     ", got ", raw.size()));
    }
    if (bytes > 0) std::memcpy(out->data(), raw.data(), bytes);
    return batch;
  }
  CONVOY_RETURN_IF_ERROR(CopyTypedContents(input, t, count, *out));
  return batch;
}

absl::Status DecodeInputs(const ModelInferRequest& request, const ServedModel& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& inputs = model.runtime().inputs();
  if (request.raw_input_contents_size() > 0 && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected one raw_input_contents entry per input (",
                                                   request.inputs_size(), "), got ",
                                                   request.raw_input_contents_size()));
  }
  decoded.payload->inputs.resize(inputs.size());
  std::vector<bool> seen(inputs.size(), false);
  int64_t batch = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    const int index = FindTensor(inputs, name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected input '", name, "': model '", model.name(),
                                                     "' has inputs ", Names(inputs)));
    }
    if (seen[index]) return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice"));
    seen[index] = true;
    CONVOY_ASSIGN_OR_RETURN(const int64_t b, DecodeInput(request, i, inputs[index], model,
                                                         &decoded.payload->inputs[index]));
    if (batch >= 0 && b != batch) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': batch size ", b,
                                                     " differs from the other inputs' ", batch));
    }
    batch = b;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!seen[i]) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", inputs[i].name, "' of model '",
                                                     model.name(), "' (expected ", DimsToString(inputs[i].dims),
                                                     " ", DataTypeName(inputs[i].datatype), ")"));
    }
  }
  decoded.payload->batch_size = batch;
  decoded.spec.batch_size = batch;
  return absl::OkStatus();
}

absl::Status DecodeOutputs(const ModelInferRequest& request, const ServedModel& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& outputs = model.runtime().outputs();
  if (request.outputs_size() == 0) {
    for (size_t i = 0; i < outputs.size(); ++i) decoded.outputs.push_back({i, 0});
    return absl::OkStatus();
  }
  for (const auto& requested : request.outputs()) {
    const int index = FindTensor(outputs, requested.name());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected output '", requested.name(), "': model '",
                                                     model.name(), "' has outputs ", Names(outputs)));
    }
    RequestedOutput out{static_cast<size_t>(index), 0};
    auto it = requested.parameters().find("classification");
    if (it != requested.parameters().end()) {
      CONVOY_ASSIGN_OR_RETURN(out.classification, NonNegativeIntParameter(it->second, "classification"));
      if (!IsFloatingPoint(outputs[index].datatype)) {
        return absl::InvalidArgumentError(absl::StrCat("output '", requested.name(),
                                                       "': classification needs a floating-point output, it is ",
                                                       DataTypeName(outputs[index].datatype)));
      }
    }
    decoded.outputs.push_back(out);
  }
  return absl::OkStatus();
}

absl::Status DecodeParameters(const ModelInferRequest& request, DecodedRequest& decoded) {
  for (const auto& [name, value] : request.parameters()) {
    if (name == "priority") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t priority, NonNegativeIntParameter(value, name));
      decoded.spec.priority = static_cast<uint64_t>(priority);
    } else if (name == "timeout") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t timeout_us, NonNegativeIntParameter(value, name));
      decoded.spec.timeout = absl::Microseconds(timeout_us);
    }
    // Other parameters (binary_data_output, sequence ids of stateless clients, ...) do not apply and are ignored.
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedRequest> DecodeInferRequest(const ModelInferRequest& request, const ServedModel& model) {
  DecodedRequest decoded;
  decoded.payload = std::make_unique<InferencePayload>();
  CONVOY_RETURN_IF_ERROR(DecodeInputs(request, model, decoded));
  CONVOY_RETURN_IF_ERROR(DecodeOutputs(request, model, decoded));
  CONVOY_RETURN_IF_ERROR(DecodeParameters(request, decoded));
  return decoded;
}

std::vector<std::string> TopKClasses(const std::vector<float>& scores, int64_t k,
                                     const std::vector<std::string>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(scores.size())));
  auto rank = [&](size_t i) { return std::isnan(scores[i]) ? -INFINITY : scores[i]; };
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](size_t a, size_t b) {
    return rank(a) > rank(b) || (rank(a) == rank(b) && a < b);
  });
  std::vector<std::string> classes;
  for (size_t j = 0; j < top; ++j) {
    const size_t i = order[j];
    std::string entry = absl::StrCat(std::to_string(scores[i]), ":", i);
    if (i < labels.size()) absl::StrAppend(&entry, ":", labels[i]);
    classes.push_back(std::move(entry));
  }
  return classes;
}

namespace {

// Triton's BYTES wire form: each element as a 4-byte little-endian length and its bytes.
void AppendBytesElement(const std::string& element, std::string* out) {
  const uint32_t size = static_cast<uint32_t>(element.size());
  char prefix[4] = {static_cast<char>(size & 0xff), static_cast<char>((size >> 8) & 0xff),
                    static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 24) & 0xff)};
  out->append(prefix, 4);
  out->append(element);
}

void EncodeClassification(const ServedModel& model, const RequestedOutput& requested, const HostBuffer& data,
                          int64_t batch, inference::ModelInferResponse::InferOutputTensor* tensor,
                          std::string* raw) {
  const TensorMetadata& t = model.runtime().outputs()[requested.index];
  const bool batched = model.runtime().max_batch_size() > 0;
  const size_t classes = static_cast<size_t>(
      batch == 0 ? 0 : data.size() / DataTypeSize(t.datatype) / static_cast<size_t>(batch));
  const int64_t k = std::min<int64_t>(requested.classification, static_cast<int64_t>(classes));
  tensor->set_datatype("BYTES");
  if (batched) tensor->add_shape(batch);
  tensor->add_shape(k);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> scores(classes);
    for (size_t c = 0; c < classes; ++c) scores[c] = LoadAsFloat(data.data(), t.datatype, b * classes + c);
    for (const std::string& entry : TopKClasses(scores, k, model.labels(requested.index))) {
      AppendBytesElement(entry, raw);
    }
  }
}

}  // namespace

absl::Status EncodeInferResponse(const ServedModel& model, const std::vector<RequestedOutput>& outputs,
                                 const std::string& request_id, const InferencePayload& payload,
                                 inference::ModelInferResponse* response) {
  response->set_model_name(model.name());
  response->set_model_version(absl::StrCat(model.version()));
  response->set_id(request_id);
  const bool batched = model.runtime().max_batch_size() > 0;
  if (payload.outputs.size() != model.runtime().outputs().size()) {
    return absl::InternalError(absl::StrCat("model '", model.name(), "' produced ", payload.outputs.size(),
                                            " outputs, expected ", model.runtime().outputs().size()));
  }
  for (const RequestedOutput& requested : outputs) {
    const TensorMetadata& t = model.runtime().outputs()[requested.index];
    const HostBuffer& data = payload.outputs[requested.index];
    auto* tensor = response->add_outputs();
    tensor->set_name(t.name);
    std::string* raw = response->add_raw_output_contents();
    if (requested.classification > 0) {
      EncodeClassification(model, requested, data, payload.batch_size, tensor, raw);
      continue;
    }
    tensor->set_datatype(std::string(DataTypeName(t.datatype)));
    for (size_t d = 0; d < t.dims.size(); ++d) tensor->add_shape(d == 0 && batched ? payload.batch_size : t.dims[d]);
    raw->assign(data.as<const char>(), data.size());
  }
  return absl::OkStatus();
}

}  // namespace convoy::grpc_server
