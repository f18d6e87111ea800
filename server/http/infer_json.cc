#include "server/http/infer_json.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/tensor.h"
#include "rapidjson/error/en.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "server/repository/model_names.h"

namespace convoy::http {
namespace {

using rapidjson::Value;
using repository::QuoteClientString;
using runtime::TensorMetadata;

constexpr int kMaxDataDepth = 32;         // nesting of `data` arrays (a model has far fewer dims)
constexpr size_t kDescribeLimit = 40;     // characters of a client's JSON value quoted in messages

absl::string_view StringOf(const Value& v) { return absl::string_view(v.GetString(), v.GetStringLength()); }

// Appends `v` as compact JSON, at most kDescribeDepth levels deep and about kDescribeLimit characters long (the
// request may nest arrays thousands deep: this never recurses further).
constexpr int kDescribeDepth = 8;
void AppendJson(const Value& v, int depth, std::string* out) {
  if (out->size() > kDescribeLimit) return;
  if ((v.IsArray() || v.IsObject()) && depth >= kDescribeDepth) {
    out->append(v.IsArray() ? "[...]" : "{...}");
    return;
  }
  if (v.IsArray()) {
    out->push_back('[');
    for (rapidjson::SizeType i = 0; i < v.Size() && out->size() <= kDescribeLimit; ++i) {
      if (i > 0) out->push_back(',');
      AppendJson(v[i], depth + 1, out);
    }
    out->push_back(']');
    return;
  }
  if (v.IsObject()) {
    out->push_back('{');
    bool first = true;
    for (auto it = v.MemberBegin(); it != v.MemberEnd() && out->size() <= kDescribeLimit; ++it) {
      if (!first) out->push_back(',');
      first = false;
      AppendJson(it->name, depth + 1, out);
      out->push_back(':');
      AppendJson(it->value, depth + 1, out);
    }
    out->push_back('}');
    return;
  }
  rapidjson::StringBuffer buffer;  // a scalar: Accept does not recurse
  rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>, rapidjson::CrtAllocator,
                    rapidjson::kWriteNanAndInfFlag>
      writer(buffer);
  v.Accept(writer);
  out->append(buffer.GetString(), buffer.GetSize());
}

// A JSON value as messages quote it: strings through QuoteClientString, others as compact JSON, both cut short.
std::string Describe(const Value& v) {
  if (v.IsString()) return QuoteClientString(StringOf(v).substr(0, kDescribeLimit));
  std::string text;
  AppendJson(v, 0, &text);
  if (text.size() > kDescribeLimit) text = absl::StrCat(text.substr(0, kDescribeLimit), "...");
  return text;
}

absl::Status Invalid(absl::string_view field, absl::string_view expected, const Value& got) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": expected ", expected, ", got ", Describe(got)));
}

// The member `name` of `object`, or nullptr.
const Value* Member(const Value& object, const char* name) {
  auto it = object.FindMember(name);
  return it == object.MemberEnd() ? nullptr : &it->value;
}

infer::ParameterValue ParameterOf(const Value& v) {
  infer::ParameterValue p;
  if (v.IsInt64()) {
    p.integer = v.GetInt64();
  } else if (v.IsUint64()) {
    p.integer = std::numeric_limits<int64_t>::max();
  }
  p.description = Describe(v);
  return p;
}

// Counts the numbers under `data` (nested arrays flattened); INVALID_ARGUMENT for nesting deeper than
// kMaxDataDepth. Elements of the wrong kind are found while writing.
absl::Status CountElements(const Value& data, int depth, const TensorMetadata& t, int64_t* count) {
  if (!data.IsArray()) {
    ++*count;
    return absl::OkStatus();
  }
  if (depth > kMaxDataDepth) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': data nests arrays deeper than ",
                                                   kMaxDataDepth, " levels"));
  }
  for (const Value& item : data.GetArray()) CONVOY_RETURN_IF_ERROR(CountElements(item, depth + 1, t, count));
  return absl::OkStatus();
}

// Writes element `i` (`v`) of a tensor of t.datatype into `out`.
absl::Status StoreElement(const Value& v, const TensorMetadata& t, size_t i, void* out) {
  auto bad = [&](absl::string_view expected) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': data[", i, "] is ", Describe(v),
                                                   ", expected ", expected, " for ", DataTypeName(t.datatype)));
  };
  switch (t.datatype) {
    case DataType::kFloat32:
    case DataType::kFloat16:
    case DataType::kBFloat16: {
      if (!v.IsNumber()) return bad("a number");
      const double d = v.GetDouble();
      const double limit = t.datatype == DataType::kFloat16 ? 65504.0 : std::numeric_limits<float>::max();
      if (!(std::fabs(d) <= limit)) return bad(absl::StrCat("a number of magnitude at most ", limit));
      if (t.datatype == DataType::kFloat32) {
        static_cast<float*>(out)[i] = static_cast<float>(d);
      } else {
        StoreFromFloat(out, t.datatype, i, static_cast<float>(d));
      }
      return absl::OkStatus();
    }
    case DataType::kUInt8:
      if (!v.IsUint() || v.GetUint() > 255) return bad("an integer 0..255");
      static_cast<uint8_t*>(out)[i] = static_cast<uint8_t>(v.GetUint());
      return absl::OkStatus();
    case DataType::kInt8:
      if (!v.IsInt() || v.GetInt() < -128 || v.GetInt() > 127) return bad("an integer -128..127");
      static_cast<int8_t*>(out)[i] = static_cast<int8_t>(v.GetInt());
      return absl::OkStatus();
    case DataType::kInt32:
      if (!v.IsInt()) return bad("a 32-bit integer");
      static_cast<int32_t*>(out)[i] = v.GetInt();
      return absl::OkStatus();
    case DataType::kInt64:
      if (!v.IsInt64()) return bad("a 64-bit integer");
      static_cast<int64_t*>(out)[i] = v.GetInt64();
      return absl::OkStatus();
  }
  return bad("a value Convoy can store");
}

absl::Status StoreElements(const Value& data, const TensorMetadata& t, size_t* next, void* out) {
  if (!data.IsArray()) return StoreElement(data, t, (*next)++, out);
  for (const Value& item : data.GetArray()) CONVOY_RETURN_IF_ERROR(StoreElements(item, t, next, out));
  return absl::OkStatus();
}

// The `decode` hook of an input sent as JSON `data`.
absl::Status DecodeData(const Value& data, const TensorMetadata& t, int64_t count, absl::Span<const int64_t> shape,
                        HostBuffer* out) {
  int64_t given = 0;
  CONVOY_RETURN_IF_ERROR(CountElements(data, 0, t, &given));
  if (given != count) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", count,
                                                   " values in data for shape ", infer::ShapeString(shape), ", got ",
                                                   given));
  }
  CONVOY_ASSIGN_OR_RETURN(*out, HostBuffer::Allocate(static_cast<size_t>(count) * DataTypeSize(t.datatype)));
  size_t next = 0;
  return StoreElements(data, t, &next, out->data());
}

absl::Status ParseShape(const Value& input, const std::string& field, std::vector<int64_t>* shape) {
  const Value* v = Member(input, "shape");
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(field, ": 'shape' is missing"));
  if (!v->IsArray()) return Invalid(absl::StrCat(field, ".shape"), "an array of non-negative integers", *v);
  for (rapidjson::SizeType d = 0; d < v->Size(); ++d) {
    const Value& dim = (*v)[d];
    if (!dim.IsInt64() || dim.GetInt64() < 0) {
      return Invalid(absl::StrCat(field, ".shape[", d, "]"), "a non-negative integer", dim);
    }
    shape->push_back(dim.GetInt64());
  }
  return absl::OkStatus();
}

absl::StatusOr<const Value*> RequiredString(const Value& object, const char* name, const std::string& field) {
  const Value* v = Member(object, name);
  if (v == nullptr) return absl::InvalidArgumentError(absl::StrCat(field, ": '", name, "' is missing"));
  if (!v->IsString()) return Invalid(absl::StrCat(field, ".", name), "a string", *v);
  return v;
}

// One entry of "inputs". `binary_at` is where the next binary tensor starts in `body`; advanced past this input's.
absl::Status ParseInput(const Value& input, int index, const infer::RawBytes& body, size_t* binary_at,
                        bool has_header_length, infer::InputTensorView* out) {
  const std::string field = absl::StrCat("inputs[", index, "]");
  if (!input.IsObject()) return Invalid(field, "an object", input);
  CONVOY_ASSIGN_OR_RETURN(const Value* name, RequiredString(input, "name", field));
  CONVOY_ASSIGN_OR_RETURN(const Value* datatype, RequiredString(input, "datatype", field));
  out->name = StringOf(*name);
  out->datatype = StringOf(*datatype);
  CONVOY_RETURN_IF_ERROR(ParseShape(input, field, &out->shape));
  const std::string named = absl::StrCat("input ", QuoteClientString(out->name));
  const Value* data = Member(input, "data");
  const Value* binary_size = nullptr;
  if (const Value* parameters = Member(input, "parameters"); parameters != nullptr) {
    if (!parameters->IsObject()) return Invalid(absl::StrCat(field, ".parameters"), "an object", *parameters);
    binary_size = Member(*parameters, "binary_data_size");
  }
  if (data != nullptr && binary_size != nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(named, ": both 'data' and parameters.binary_data_size are set; "
                                                   "send one"));
  }
  if (binary_size != nullptr) {
    if (!binary_size->IsUint64()) {
      return Invalid(absl::StrCat(named, ": parameters.binary_data_size"), "a non-negative integer", *binary_size);
    }
    if (!has_header_length) {
      return absl::InvalidArgumentError(absl::StrCat(named, ": parameters.binary_data_size is set but the request "
                                                     "has no Inference-Header-Content-Length header"));
    }
    const uint64_t size = binary_size->GetUint64();
    if (size > body.size() - *binary_at) {
      return absl::InvalidArgumentError(absl::StrCat(named, ": parameters.binary_data_size is ", size, " but only ",
                                                     body.size() - *binary_at,
                                                     " bytes of binary data are left in the body"));
    }
    out->raw = body.Substr(*binary_at, size);
    *binary_at += size;
    return absl::OkStatus();
  }
  if (data == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(named, ": no data: expected 'data' or "
                                                   "parameters.binary_data_size"));
  }
  std::vector<int64_t> shape = out->shape;
  out->decode = [data, shape](const TensorMetadata& t, int64_t count, HostBuffer* buffer) {
    return DecodeData(*data, t, count, shape, buffer);
  };
  return absl::OkStatus();
}

absl::Status ParseOutputs(const Value& outputs, HttpInferRequest* request) {
  if (!outputs.IsArray()) return Invalid("outputs", "an array", outputs);
  for (rapidjson::SizeType i = 0; i < outputs.Size(); ++i) {
    const Value& output = outputs[i];
    const std::string field = absl::StrCat("outputs[", i, "]");
    if (!output.IsObject()) return Invalid(field, "an object", output);
    CONVOY_ASSIGN_OR_RETURN(const Value* name, RequiredString(output, "name", field));
    infer::RequestedOutputView view;
    view.name = StringOf(*name);
    bool binary = request->binary_default;
    if (const Value* parameters = Member(output, "parameters"); parameters != nullptr) {
      if (!parameters->IsObject()) return Invalid(absl::StrCat(field, ".parameters"), "an object", *parameters);
      if (const Value* b = Member(*parameters, "binary_data"); b != nullptr) {
        if (!b->IsBool()) return Invalid(absl::StrCat(field, ".parameters.binary_data"), "true or false", *b);
        binary = b->GetBool();
      }
      if (const Value* c = Member(*parameters, "classification"); c != nullptr) view.classification = ParameterOf(*c);
    }
    request->view.outputs.push_back(view);
    request->binary_outputs.push_back(binary);
  }
  return absl::OkStatus();
}

absl::Status ParseParameters(const Value& parameters, HttpInferRequest* request) {
  if (!parameters.IsObject()) return Invalid("parameters", "an object", parameters);
  for (const auto& member : parameters.GetObject()) {
    const absl::string_view name = StringOf(member.name);
    if (name == "binary_data_output") {
      if (!member.value.IsBool()) return Invalid("parameters.binary_data_output", "true or false", member.value);
      request->binary_default = member.value.GetBool();
    }
    request->view.parameters.push_back({name, ParameterOf(member.value)});
  }
  return absl::OkStatus();
}

absl::Status ParseInputs(const Value& root, const infer::RawBytes& body, size_t json_size, bool has_header_length,
                         HttpInferRequest* request) {
  const Value* inputs = Member(root, "inputs");
  if (inputs == nullptr) return absl::InvalidArgumentError("'inputs' is missing");
  if (!inputs->IsArray()) return Invalid("inputs", "an array", *inputs);
  size_t binary_at = json_size;
  for (rapidjson::SizeType i = 0; i < inputs->Size(); ++i) {
    infer::InputTensorView view;
    CONVOY_RETURN_IF_ERROR(ParseInput((*inputs)[i], static_cast<int>(i), body, &binary_at, has_header_length, &view));
    request->view.inputs.push_back(std::move(view));
  }
  if (binary_at != body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the inputs' binary_data_size values add up to ",
                                                   binary_at - json_size, " bytes, but the body carries ",
                                                   body.size() - json_size,
                                                   " bytes after the JSON header (Inference-Header-Content-Length ",
                                                   json_size, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpInferRequest>> ParseInferRequest(absl::string_view body,
                                                                    std::optional<size_t> header_length,
                                                                    absl::string_view model,
                                                                    absl::string_view version) {
  const absl::string_view json = body.substr(0, header_length.value_or(body.size()));
  return ParseInferRequest(json, infer::RawBytes(body), header_length, model, version);
}

absl::StatusOr<std::unique_ptr<HttpInferRequest>> ParseInferRequest(absl::string_view json,
                                                                    const infer::RawBytes& body,
                                                                    std::optional<size_t> header_length,
                                                                    absl::string_view model,
                                                                    absl::string_view version) {
  if (header_length.has_value() && *header_length > body.size()) {
    return absl::InvalidArgumentError(absl::StrCat("Inference-Header-Content-Length is ", *header_length,
                                                   ", larger than the ", body.size(), "-byte body"));
  }
  const size_t json_size = header_length.value_or(body.size());
  if (json.size() != json_size) {
    return absl::InternalError(absl::StrCat("the JSON header given is ", json.size(), " bytes, expected ",
                                            json_size));
  }
  auto request = std::make_unique<HttpInferRequest>();
  // Not kParseFullPrecisionFlag: its slow path in RapidJSON 1.1.0 calls __builtin_clzll(0) for some inputs
  // (undefined; found by tests/fuzz/http_infer_json_fuzzer.cc), and the default parse is within 3 ULP of a double,
  // far inside an FP32 / FP16 / BF16 value's rounding.
  request->json.Parse<rapidjson::kParseIterativeFlag>(json.data(), json_size);
  if (request->json.HasParseError()) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON at byte ", request->json.GetErrorOffset(),
                                                   " of the ", json_size, "-byte request: ",
                                                   rapidjson::GetParseError_En(request->json.GetParseError())));
  }
  const Value& root = request->json;
  if (!root.IsObject()) return Invalid("the request", "a JSON object", root);
  request->model = std::string(model);
  request->version = std::string(version);
  request->view.model = request->model;
  request->view.version = request->version;
  if (const Value* id = Member(root, "id"); id != nullptr) {
    if (!id->IsString()) return Invalid("id", "a string", *id);
    request->id = std::string(StringOf(*id));
  }
  if (const Value* parameters = Member(root, "parameters"); parameters != nullptr) {
    CONVOY_RETURN_IF_ERROR(ParseParameters(*parameters, request.get()));
  }
  CONVOY_RETURN_IF_ERROR(ParseInputs(root, body, json_size, header_length.has_value(), request.get()));
  if (const Value* outputs = Member(root, "outputs"); outputs != nullptr) {
    CONVOY_RETURN_IF_ERROR(ParseOutputs(*outputs, request.get()));
  }
  request->view.id = request->id;
  return request;
}

namespace {

using JsonWriter = rapidjson::Writer<rapidjson::StringBuffer, rapidjson::UTF8<>, rapidjson::UTF8<>,
                                     rapidjson::CrtAllocator, rapidjson::kWriteNanAndInfFlag>;

void WriteString(JsonWriter& w, absl::string_view s) { w.String(s.data(), static_cast<rapidjson::SizeType>(s.size())); }

// The tensor's elements as a flat JSON array (row-major), NaN and infinities as NaN / Infinity / -Infinity.
void WriteData(JsonWriter& w, const infer::ResponseTensor& t) {
  w.StartArray();
  if (t.is_classification) {
    for (const std::string& entry : t.classes) WriteString(w, entry);
  } else {
    absl::StatusOr<DataType> dtype = ParseDataType(t.datatype);
    const size_t n = dtype.ok() ? t.data.size() / DataTypeSize(*dtype) : 0;
    for (size_t i = 0; i < n; ++i) {
      switch (*dtype) {
        case DataType::kInt64: {
          int64_t v;
          std::memcpy(&v, t.data.data() + 8 * i, 8);
          w.Int64(v);
          break;
        }
        case DataType::kInt32: {
          int32_t v;
          std::memcpy(&v, t.data.data() + 4 * i, 4);
          w.Int(v);
          break;
        }
        case DataType::kUInt8: w.Uint(static_cast<uint8_t>(t.data[i])); break;
        case DataType::kInt8: w.Int(static_cast<int8_t>(t.data[i])); break;
        default: w.Double(LoadAsFloat(t.data.data(), *dtype, i));
      }
    }
  }
  w.EndArray();
}

}  // namespace

HttpInferResponse EncodeInferResponse(absl::string_view model_name, int64_t model_version,
                                      const HttpInferRequest& request,
                                      const std::vector<infer::ResponseTensor>& outputs) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  std::vector<std::string> binary_parts;
  std::vector<const infer::ResponseTensor*> binary_tensors;
  w.StartObject();
  w.Key("model_name");
  WriteString(w, model_name);
  w.Key("model_version");
  WriteString(w, absl::StrCat(model_version));
  if (!request.id.empty()) {
    w.Key("id");
    WriteString(w, request.id);
  }
  w.Key("outputs");
  w.StartArray();
  for (size_t i = 0; i < outputs.size(); ++i) {
    const infer::ResponseTensor& t = outputs[i];
    const bool binary = i < request.binary_outputs.size() ? request.binary_outputs[i] : request.binary_default;
    w.StartObject();
    w.Key("name");
    WriteString(w, t.name);
    w.Key("datatype");
    WriteString(w, t.datatype);
    w.Key("shape");
    w.StartArray();
    for (int64_t d : t.shape) w.Int64(d);
    w.EndArray();
    if (binary) {
      binary_tensors.push_back(&t);
      const size_t size = t.is_classification ? infer::BytesWireForm(t.classes).size() : t.data.size();
      w.Key("parameters");
      w.StartObject();
      w.Key("binary_data_size");
      w.Uint64(size);
      w.EndObject();
    } else {
      w.Key("data");
      WriteData(w, t);
    }
    w.EndObject();
  }
  w.EndArray();
  w.EndObject();
  HttpInferResponse response;
  response.body.assign(buffer.GetString(), buffer.GetSize());
  if (!binary_tensors.empty()) {
    response.header_length = response.body.size();
    for (const infer::ResponseTensor* t : binary_tensors) {
      if (t->is_classification) {
        response.body += infer::BytesWireForm(t->classes);
      } else {
        response.body.append(t->data.data(), t->data.size());
      }
    }
  }
  return response;
}

std::string ErrorJson(absl::string_view message) {
  rapidjson::StringBuffer buffer;
  JsonWriter w(buffer);
  w.StartObject();
  w.Key("error");
  WriteString(w, message);
  w.EndObject();
  return std::string(buffer.GetString(), buffer.GetSize());
}

}  // namespace convoy::http
