#include "server/grpc/infer_codec.h"

#include <algorithm>
#include <cstring>
#include <utility>

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

infer::ParameterValue ParameterOf(const InferParameter& p) {
  infer::ParameterValue value;
  switch (p.parameter_choice_case()) {
    case InferParameter::kBoolParam:
      value.description = absl::StrCat("bool_param ", p.bool_param() ? "true" : "false");
      break;
    case InferParameter::kInt64Param:
      value.integer = p.int64_param();
      value.description = absl::StrCat("int64_param ", p.int64_param());
      break;
    case InferParameter::kStringParam:
      value.description = absl::StrCat("string_param ", QuoteClientString(p.string_param()));
      break;
    case InferParameter::kDoubleParam: value.description = absl::StrCat("double_param ", p.double_param()); break;
    case InferParameter::kUint64Param:
      value.integer = p.uint64_param() > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX
                                                                           : static_cast<int64_t>(p.uint64_param());
      value.description = absl::StrCat("uint64_param ", p.uint64_param());
      break;
    case InferParameter::PARAMETER_CHOICE_NOT_SET: value.description = "no value"; break;
  }
  return value;
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
  using infer::ShapeString;
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

}  // namespace

infer::RequestView ViewOf(const ModelInferRequest& request, const std::vector<infer::RawBytes>* raw_contents) {
  infer::RequestView view;
  view.model = request.model_name();
  view.version = request.model_version();
  view.id = request.id();
  view.integer_kinds = " (int64_param or uint64_param)";
  // By name: a protobuf map's iteration order differs between two maps of the same entries, and the first bad
  // parameter named in a message should not depend on it.
  for (const auto& [name, value] : request.parameters()) view.parameters.push_back({name, ParameterOf(value)});
  std::sort(view.parameters.begin(), view.parameters.end(),
            [](const infer::NamedParameter& a, const infer::NamedParameter& b) { return a.name < b.name; });
  const int raw_count = raw_contents != nullptr ? static_cast<int>(raw_contents->size())
                                               : request.raw_input_contents_size();
  const bool raw = raw_count > 0;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const ModelInferRequest::InferInputTensor& input = request.inputs(i);
    infer::InputTensorView tensor;
    tensor.name = input.name();
    tensor.datatype = input.datatype();
    tensor.shape.assign(input.shape().begin(), input.shape().end());
    if (!raw && input.datatype() == "BYTES" && input.contents().bytes_contents_size() > 0 &&
        FilledTypedFields(input.contents()).size() == 1) {
      // Photos (or other BYTES elements) one per contents.bytes_contents entry.
      tensor.bytes_elements.emplace();
      for (const std::string& element : input.contents().bytes_contents()) tensor.bytes_elements->push_back(element);
    } else if (!raw) {
      tensor.decode = [&input](const TensorMetadata& t, int64_t count, HostBuffer* out) -> absl::Status {
        CONVOY_ASSIGN_OR_RETURN(*out, CopyTypedContents(input, t, count));
        return absl::OkStatus();
      };
    } else if (!FilledTypedFields(input.contents()).empty()) {
      tensor.decode = [&input](const TensorMetadata& t, int64_t, HostBuffer*) {
        return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': both raw_input_contents and ",
                                                       FieldList(FilledTypedFields(input.contents())),
                                                       " are set; send one"));
      };
    } else if (i < raw_count) {
      tensor.raw = raw_contents != nullptr ? (*raw_contents)[i] : infer::RawBytes(request.raw_input_contents(i));
    }
    view.inputs.push_back(std::move(tensor));
  }
  for (const auto& requested : request.outputs()) {
    infer::RequestedOutputView out;
    out.name = requested.name();
    auto it = requested.parameters().find("classification");
    if (it != requested.parameters().end()) out.classification = ParameterOf(it->second);
    view.outputs.push_back(std::move(out));
  }
  return view;
}

absl::StatusOr<DecodedRequest> DecodeInferRequest(const ModelInferRequest& request, const ModelSignature& model,
                                                  const std::vector<infer::RawBytes>* raw) {
  const int raw_count = raw != nullptr ? static_cast<int>(raw->size()) : request.raw_input_contents_size();
  if (raw_count > 0 && raw_count != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "expected one raw_input_contents entry per input: the request has ", request.inputs_size(),
        " inputs and ", raw_count, " raw_input_contents"));
  }
  return infer::DecodeRequest(ViewOf(request, raw), model);
}

namespace {

// Everything of the response but raw_output_contents.
void FillResponseHeader(absl::string_view model_name, int64_t version, const std::string& request_id,
                        const std::vector<infer::ResponseTensor>& tensors, inference::ModelInferResponse* response) {
  response->set_model_name(std::string(model_name));
  response->set_model_version(absl::StrCat(version));
  response->set_id(request_id);
  for (const infer::ResponseTensor& t : tensors) {
    auto* tensor = response->add_outputs();
    tensor->set_name(t.name);
    tensor->set_datatype(t.datatype);
    for (int64_t d : t.shape) tensor->add_shape(d);
  }
}

}  // namespace

size_t VarintSize(uint64_t value) {
  size_t size = 1;
  for (; value >= 0x80; value >>= 7) ++size;
  return size;
}

char* WriteVarint(uint64_t value, char* out) {
  for (; value >= 0x80; value >>= 7) *out++ = static_cast<char>((value & 0x7f) | 0x80);
  *out++ = static_cast<char>(value);
  return out;
}

absl::Status EncodeInferResponse(const ServedModel& model, const std::vector<RequestedOutput>& outputs,
                                 const std::string& request_id, const InferencePayload& payload,
                                 inference::ModelInferResponse* response) {
  CONVOY_ASSIGN_OR_RETURN(std::vector<infer::ResponseTensor> tensors, infer::ResponseTensors(model, outputs, payload));
  FillResponseHeader(model.name(), model.version(), request_id, tensors, response);
  for (const infer::ResponseTensor& t : tensors) {
    std::string* raw = response->add_raw_output_contents();
    if (t.is_classification) {
      *raw = infer::BytesWireForm(t.classes);
    } else {
      raw->assign(t.data.data(), t.data.size());
    }
  }
  return absl::OkStatus();
}

absl::Status WriteInferResponse(absl::string_view model_name, int64_t version, const std::string& request_id,
                                const std::vector<infer::ResponseTensor>& tensors,
                                const std::function<char*(size_t)>& allocate) {
  inference::ModelInferResponse header;
  FillResponseHeader(model_name, version, request_id, tensors, &header);
  std::string header_bytes;
  if (!header.SerializeToString(&header_bytes)) {
    return absl::InternalError("cannot serialize the inference.ModelInferResponse header");
  }
  std::vector<std::string> classes(tensors.size());  // classification outputs in their wire form
  std::vector<absl::string_view> contents(tensors.size());
  size_t size = header_bytes.size();
  constexpr uint32_t kRawOutputTag =  // raw_output_contents, length-delimited: one byte
      inference::ModelInferResponse::kRawOutputContentsFieldNumber << 3 | 2;
  static_assert(kRawOutputTag < 0x80, "raw_output_contents' tag takes one byte");
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].is_classification) {
      classes[i] = infer::BytesWireForm(tensors[i].classes);
      contents[i] = classes[i];
    } else {
      contents[i] = tensors[i].data;
    }
    size += 1 + VarintSize(contents[i].size()) + contents[i].size();
  }
  if (size > static_cast<size_t>(INT32_MAX)) {
    return absl::ResourceExhaustedError(absl::StrCat("the response would take ", size,
                                                     " bytes, more than a protobuf message can hold (2 GiB)"));
  }
  char* out = allocate(size);
  if (out == nullptr) return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a ", size, "-byte response"));
  std::memcpy(out, header_bytes.data(), header_bytes.size());
  out += header_bytes.size();
  for (absl::string_view c : contents) {
    *out++ = static_cast<char>(kRawOutputTag);
    out = WriteVarint(c.size(), out);
    if (!c.empty()) std::memcpy(out, c.data(), c.size());
    out += c.size();
  }
  return absl::OkStatus();
}

}  // namespace convoy::grpc_server
