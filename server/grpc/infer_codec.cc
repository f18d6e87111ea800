#include "server/grpc/infer_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/tensor.h"
#include "server/repository/model_manager_served_model.h"
#include "server/repository/model_names.h"

namespace convoy::grpc_server {
namespace {

using inference::InferParameter;
using inference::InferTensorContents;
using inference::ModelInferRequest;
using repository::InferencePayload;
using repository::QuoteClientString;
using repository::ServedModel;
using runtime::ModelSignature;
using runtime::TensorMetadata;

constexpr int kShapeLimit = 16;  // dims printed before "..."

std::string Names(const std::vector<TensorMetadata>& tensors) {
  std::vector<std::string> names;
  for (const TensorMetadata& t : tensors) names.push_back(absl::StrCat("'", t.name, "'"));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

// A client's shape as messages print it: at most kShapeLimit dims, then "...(N dims)".
std::string ShapeString(absl::Span<const int64_t> dims) {
  if (dims.size() <= static_cast<size_t>(kShapeLimit)) return DimsToString(dims);
  return absl::StrCat("[", absl::StrJoin(dims.subspan(0, kShapeLimit), ","), ",...(", dims.size(), " dims)]");
}

int FindTensor(const std::vector<TensorMetadata>& tensors, const std::string& name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

std::string DescribeParameter(const InferParameter& p) {
  switch (p.parameter_choice_case()) {
    case InferParameter::kBoolParam: return absl::StrCat("bool_param ", p.bool_param() ? "true" : "false");
    case InferParameter::kInt64Param: return absl::StrCat("int64_param ", p.int64_param());
    case InferParameter::kStringParam: return absl::StrCat("string_param ", QuoteClientString(p.string_param()));
    case InferParameter::kDoubleParam: return absl::StrCat("double_param ", p.double_param());
    case InferParameter::kUint64Param: return absl::StrCat("uint64_param ", p.uint64_param());
    case InferParameter::PARAMETER_CHOICE_NOT_SET: break;
  }
  return "no value";
}

// The integer value of a parameter (`what` names it in errors): INVALID_ARGUMENT unless it is an int64_param or
// uint64_param in [low, high].
absl::StatusOr<int64_t> IntParameter(const InferParameter& p, absl::string_view what, int64_t low, int64_t high) {
  bool is_int = false;
  int64_t value = 0;
  if (p.parameter_choice_case() == InferParameter::kInt64Param) {
    is_int = true;
    value = p.int64_param();
  } else if (p.parameter_choice_case() == InferParameter::kUint64Param) {
    is_int = true;
    value = p.uint64_param() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(p.uint64_param());
  }
  if (!is_int) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected an integer (int64_param or uint64_param), got ",
                                                   DescribeParameter(p)));
  }
  if (value < low || value > high) {
    const std::string range = high == INT64_MAX ? absl::StrCat(">= ", low) : absl::StrCat(low, "..", high);
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", range, ", got ", DescribeParameter(p)));
  }
  return value;
}

// Shape check: [batch, dims...] for a batching model, dims otherwise. Returns the batch size (1 without batching).
absl::StatusOr<int64_t> CheckShape(const ModelInferRequest::InferInputTensor& input, const TensorMetadata& t,
                                   const ModelSignature& model) {
  const int max_batch = model.max_batch_size;
  const absl::Span<const int64_t> shape(input.shape().data(), input.shape().size());
  bool matches = shape.size() == t.dims.size();
  for (size_t i = (max_batch > 0 ? 1 : 0); matches && i < shape.size(); ++i) matches = shape[i] == t.dims[i];
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected shape ", DimsToString(t.dims),
                                                   ", got ", ShapeString(shape)));
  }
  if (max_batch == 0) return 1;
  if (shape[0] < 1 || shape[0] > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': batch size ", shape[0],
                                                   " is outside 1..", max_batch, " (max_batch_size of model '",
                                                   model.name, "')"));
  }
  return shape[0];
}

// The element count of a shape that passed CheckShape; INVALID_ARGUMENT if a dim is negative or the count
// overflows (only a model declaring such dims could let one through).
absl::StatusOr<int64_t> ElementCount(const ModelInferRequest::InferInputTensor& input, const TensorMetadata& t) {
  int64_t count = 1;
  for (int64_t d : input.shape()) {
    if (d < 0 || (d > 0 && count > INT64_MAX / d)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': shape ",
                                                     ShapeString(input.shape()), " has no valid element count"));
    }
    count *= d;
  }
  return count;
}

// The typed-contents fields a request filled, as "contents.<field> (<n> values)".
std::vector<std::pair<const char*, int>> FilledTypedFields(const InferTensorContents& c) {
  const std::pair<const char*, int> all[] = {
      {"bool_contents", c.bool_contents_size()},   {"int_contents", c.int_contents_size()},
      {"int64_contents", c.int64_contents_size()}, {"uint_contents", c.uint_contents_size()},
      {"uint64_contents", c.uint64_contents_size()}, {"fp32_contents", c.fp32_contents_size()},
      {"fp64_contents", c.fp64_contents_size()},   {"bytes_contents", c.bytes_contents_size()}};
  std::vector<std::pair<const char*, int>> filled;
  for (const auto& field : all) {
    if (field.second > 0) filled.push_back(field);
  }
  return filled;
}

std::string FieldList(const std::vector<std::pair<const char*, int>>& fields) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : fields) parts.push_back(absl::StrCat("contents.", name, " (", count, " values)"));
  return absl::StrJoin(parts, ", ");
}

// The typed field that carries `dtype`, or nullptr when only raw_input_contents can.
const char* TypedFieldFor(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return "fp32_contents";
    case DataType::kInt64: return "int64_contents";
    case DataType::kUInt8: return "uint_contents";
    default: return nullptr;
  }
}

// Copies the typed contents of `input` (`count` elements of t.datatype, in the field TypedFieldFor names) into a
// new buffer.
absl::StatusOr<HostBuffer> CopyTypedContents(const ModelInferRequest::InferInputTensor& input,
                                             const TensorMetadata& t, int64_t count) {
  const InferTensorContents& c = input.contents();
  const char* field = TypedFieldFor(t.datatype);
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(t.datatype);
  const auto filled = FilledTypedFields(c);
  if (field == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", t.name, "': expected ", bytes, " bytes in raw_input_contents (typed contents cannot carry ",
        DataTypeName(t.datatype), "), got ", filled.empty() ? "no data" : FieldList(filled)));
  }
  if (filled.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': no data: expected ", bytes,
                                                   " bytes in raw_input_contents or ", count,
                                                   " values in contents.", field));
  }
  if (filled.size() > 1 || std::strcmp(filled[0].first, field) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': ", DataTypeName(t.datatype),
                                                   " values go in contents.", field, ", got ", FieldList(filled)));
  }
  if (filled[0].second != count) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", count, " values in contents.",
                                                   field, " for shape ", ShapeString(input.shape()), ", got ",
                                                   filled[0].second));
  }
  if (t.datatype == DataType::kUInt8) {
    for (int64_t i = 0; i < count; ++i) {
      if (c.uint_contents(i) > 255) {
        return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': contents.uint_contents[", i, "] is ",
                                                       c.uint_contents(i), ", expected 0..255 for UINT8"));
      }
    }
  }
  CONVOY_ASSIGN_OR_RETURN(HostBuffer buffer, HostBuffer::Allocate(bytes));
  switch (t.datatype) {
    case DataType::kFloat32: std::memcpy(buffer.data(), c.fp32_contents().data(), bytes); break;
    case DataType::kInt64: std::memcpy(buffer.data(), c.int64_contents().data(), bytes); break;
    default:
      for (int64_t i = 0; i < count; ++i) buffer.as<uint8_t>()[i] = static_cast<uint8_t>(c.uint_contents(i));
  }
  return buffer;
}

// Decodes input `i` of the request (model input `t`) into `out`; returns its batch size.
absl::StatusOr<int64_t> DecodeInput(const ModelInferRequest& request, int i, const TensorMetadata& t,
                                    const ModelSignature& model, HostBuffer* out) {
  const ModelInferRequest::InferInputTensor& input = request.inputs(i);
  if (input.datatype() != DataTypeName(t.datatype)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected datatype ",
                                                   DataTypeName(t.datatype), ", got ",
                                                   QuoteClientString(input.datatype())));
  }
  CONVOY_ASSIGN_OR_RETURN(const int64_t batch, CheckShape(input, t, model));
  CONVOY_ASSIGN_OR_RETURN(const int64_t count, ElementCount(input, t));
  if (request.raw_input_contents_size() == 0) {
    CONVOY_ASSIGN_OR_RETURN(*out, CopyTypedContents(input, t, count));
    return batch;
  }
  const auto typed = FilledTypedFields(input.contents());
  if (!typed.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': both raw_input_contents and ",
                                                   FieldList(typed), " are set; send one"));
  }
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(t.datatype);
  const std::string& raw = request.raw_input_contents(i);
  if (raw.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", bytes, " bytes for shape ",
                                                   ShapeString(input.shape()), " ", DataTypeName(t.datatype),
                                                   ", got ", raw.size()));
  }
  CONVOY_ASSIGN_OR_RETURN(*out, HostBuffer::Allocate(bytes));
  if (bytes > 0) std::memcpy(out->data(), raw.data(), bytes);
  return batch;
}

absl::Status DecodeInputs(const ModelInferRequest& request, const ModelSignature& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& inputs = model.inputs;
  if (request.raw_input_contents_size() > 0 && request.raw_input_contents_size() != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one raw_input_contents entry per input: the request has ", request.inputs_size(),
        " inputs and ", request.raw_input_contents_size(), " raw_input_contents"));
  }
  decoded.payload->inputs.resize(inputs.size());
  std::vector<int> given_at(inputs.size(), -1);  // request input index of each model input
  int64_t batch = -1;
  int batch_from = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string& name = request.inputs(i).name();
    const int index = FindTensor(inputs, name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected input ", QuoteClientString(name), ": model '",
                                                     model.name, "' has inputs ", Names(inputs)));
    }
    if (given_at[index] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice (request inputs ",
                                                     given_at[index], " and ", i, ")"));
    }
    given_at[index] = i;
    CONVOY_ASSIGN_OR_RETURN(const int64_t b, DecodeInput(request, i, inputs[index], model,
                                                         &decoded.payload->inputs[index]));
    if (batch >= 0 && b != batch) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': batch size ", b, " differs from input '",
                                                     request.inputs(batch_from).name(), "' (batch size ", batch,
                                                     ")"));
    }
    batch = b;
    batch_from = i;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (given_at[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", inputs[i].name, "' of model '", model.name,
                                                     "' (expected ", DimsToString(inputs[i].dims), " ",
                                                     DataTypeName(inputs[i].datatype), ")"));
    }
  }
  decoded.payload->batch_size = batch;
  decoded.spec.batch_size = batch;
  return absl::OkStatus();
}

// Elements of one batch item of `t` (its dims after the batch dimension when the model batches).
int64_t ItemElements(const TensorMetadata& t, const ModelSignature& model) {
  int64_t n = 1;
  for (size_t d = (model.max_batch_size > 0 ? 1 : 0); d < t.dims.size(); ++d) n *= std::max<int64_t>(t.dims[d], 0);
  return n;
}

absl::Status DecodeOutputs(const ModelInferRequest& request, const ModelSignature& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& outputs = model.outputs;
  if (request.outputs_size() == 0) {
    for (size_t i = 0; i < outputs.size(); ++i) decoded.outputs.push_back({i, 0});
    return absl::OkStatus();
  }
  std::vector<bool> requested_already(outputs.size(), false);
  for (const auto& requested : request.outputs()) {
    const int index = FindTensor(outputs, requested.name());
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected output ", QuoteClientString(requested.name()),
                                                     ": model '", model.name, "' has outputs ", Names(outputs)));
    }
    if (requested_already[index]) {
      return absl::InvalidArgumentError(absl::StrCat("output '", requested.name(), "' is requested twice"));
    }
    requested_already[index] = true;
    RequestedOutput out{static_cast<size_t>(index), 0};
    auto it = requested.parameters().find("classification");
    if (it != requested.parameters().end()) {
      const TensorMetadata& t = outputs[index];
      if (!IsFloatingPoint(t.datatype)) {
        return absl::InvalidArgumentError(absl::StrCat("output '", t.name,
                                                       "': classification needs a floating-point output, it is ",
                                                       DataTypeName(t.datatype)));
      }
      const int64_t classes = ItemElements(t, model);
      CONVOY_ASSIGN_OR_RETURN(out.classification,
                              IntParameter(it->second,
                                           absl::StrCat("output '", t.name, "': parameter 'classification' (the ",
                                                        classes, " classes of ", DimsToString(t.dims), ")"),
                                           1, classes));
    }
    decoded.outputs.push_back(out);
  }
  return absl::OkStatus();
}

absl::Status DecodeParameters(const ModelInferRequest& request, DecodedRequest& decoded) {
  for (const auto& [name, value] : request.parameters()) {
    if (name == "priority") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t priority, IntParameter(value, "parameter 'priority'", 0, INT64_MAX));
      decoded.spec.priority = static_cast<uint64_t>(priority);
    } else if (name == "timeout") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t timeout_us, IntParameter(value, "parameter 'timeout' (microseconds)", 0,
                                                                     INT64_MAX));
      decoded.spec.timeout = absl::Microseconds(timeout_us);
    }
    // Other parameters (binary_data_output, sequence ids of stateless clients, ...) do not apply and are ignored.
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DecodedRequest> DecodeInferRequest(const ModelInferRequest& request, const ModelSignature& model) {
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
