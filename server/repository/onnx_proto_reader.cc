// See onnx_proto_reader.h.
#include "server/repository/onnx_proto_reader.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/repository/float16.h"

namespace convoy::repository {
namespace {

// Largest tensor the importer accepts (elements); guards against corrupt dims before any allocation.
constexpr int64_t kMaxElements = int64_t{1} << 31;

template <typename Raw, typename Out, typename Convert>
absl::Status DecodeRaw(const std::string& raw, int64_t count, const std::string& what, std::vector<Out>& out,
                       Convert convert) {
  if (static_cast<int64_t>(raw.size()) != count * static_cast<int64_t>(sizeof(Raw))) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": raw_data has ", raw.size(), " bytes, expected ",
                                                   count * sizeof(Raw), " for ", count, " elements"));
  }
  out.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    Raw v;
    std::memcpy(&v, raw.data() + i * sizeof(Raw), sizeof(Raw));
    out[i] = convert(v);
  }
  return absl::OkStatus();
}

template <typename Field, typename Out>
absl::Status DecodeTyped(const Field& field, int64_t count, const std::string& what, const char* field_name,
                         std::vector<Out>& out) {
  if (field.size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": ", field_name, " has ", field.size(), " values, expected ", count));
  }
  out.assign(field.begin(), field.end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<KnownValue> DecodeTensor(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(what, ": external tensor data is not supported"));
  }
  KnownValue v;
  int64_t count = 1;
  for (int64_t d : t.dims()) {
    if (d < 0 || (d > 0 && count > kMaxElements / d)) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": invalid dims [", absl::StrJoin(t.dims(), ","), "]"));
    }
    count *= d;
    v.shape.push_back(d);
  }
  const bool raw = t.has_raw_data();
  using T = onnx::TensorProto;
  absl::Status status;
  switch (t.data_type()) {
    case T::FLOAT:
      status = raw ? DecodeRaw<float>(t.raw_data(), count, what, v.floats, [](float x) { return x; })
                   : DecodeTyped(t.float_data(), count, what, "float_data", v.floats);
      break;
    case T::FLOAT16:
      status = raw ? DecodeRaw<uint16_t>(t.raw_data(), count, what, v.floats, HalfBitsToFloat)
                   : absl::UnimplementedError(absl::StrCat(what, ": FLOAT16 tensors must use raw_data"));
      break;
    case T::DOUBLE: {
      std::vector<double> d;
      status = raw ? DecodeRaw<double>(t.raw_data(), count, what, d, [](double x) { return x; })
                   : DecodeTyped(t.double_data(), count, what, "double_data", d);
      v.floats.assign(d.begin(), d.end());
      break;
    }
    case T::INT64:
      v.is_int = true;
      status = raw ? DecodeRaw<int64_t>(t.raw_data(), count, what, v.ints, [](int64_t x) { return x; })
                   : DecodeTyped(t.int64_data(), count, what, "int64_data", v.ints);
      break;
    case T::INT32:
    case T::BOOL:
      v.is_int = true;
      if (raw && t.data_type() == T::BOOL) {
        status = DecodeRaw<uint8_t>(t.raw_data(), count, what, v.ints, [](uint8_t x) { return int64_t{x}; });
      } else {
        status = raw ? DecodeRaw<int32_t>(t.raw_data(), count, what, v.ints, [](int32_t x) { return int64_t{x}; })
                     : DecodeTyped(t.int32_data(), count, what, "int32_data", v.ints);
      }
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(what, ": tensor element type ", t.data_type(),
                                                   " is not supported (FLOAT, FLOAT16, DOUBLE, INT64, INT32, BOOL)"));
  }
  if (!status.ok()) return status;
  return v;
}

const onnx::AttributeProto* OnnxAttributes::Find(const char* name) const {
  for (const auto& attr : node_.attribute()) {
    if (attr.name() == name) return &attr;
  }
  return nullptr;
}

absl::Status OnnxAttributes::Error(const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat(label_, ": ", what));
}

absl::Status OnnxAttributes::CheckKnown(std::initializer_list<const char*> names) const {
  for (const auto& attr : node_.attribute()) {
    bool known = false;
    for (const char* name : names) known = known || attr.name() == name;
    if (!known) {
      return absl::UnimplementedError(absl::StrCat(label_, ": attribute '", attr.name(), "' is not supported"));
    }
  }
  return absl::OkStatus();
}

absl::Status OnnxAttributes::ExpectType(const onnx::AttributeProto& attr,
                                        onnx::AttributeProto::AttributeType type) const {
  if (attr.type() != type) {
    return Error(absl::StrCat("attribute '", attr.name(), "' has type ",
                              onnx::AttributeProto::AttributeType_Name(attr.type()), ", expected ",
                              onnx::AttributeProto::AttributeType_Name(type)));
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> OnnxAttributes::Int(const char* name, int64_t default_value) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return default_value;
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::INT);
  if (!s.ok()) return s;
  return attr->i();
}

absl::StatusOr<float> OnnxAttributes::Float(const char* name, float default_value) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return default_value;
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::FLOAT);
  if (!s.ok()) return s;
  return attr->f();
}

absl::StatusOr<std::string> OnnxAttributes::String(const char* name, const std::string& default_value) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return default_value;
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::STRING);
  if (!s.ok()) return s;
  return attr->s();
}

absl::StatusOr<std::vector<int64_t>> OnnxAttributes::Ints(const char* name, std::vector<int64_t> default_value) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return default_value;
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::INTS);
  if (!s.ok()) return s;
  return std::vector<int64_t>(attr->ints().begin(), attr->ints().end());
}

absl::StatusOr<std::vector<float>> OnnxAttributes::Floats(const char* name) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return std::vector<float>{};
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::FLOATS);
  if (!s.ok()) return s;
  return std::vector<float>(attr->floats().begin(), attr->floats().end());
}

absl::StatusOr<const onnx::TensorProto*> OnnxAttributes::TensorAttr(const char* name) const {
  const onnx::AttributeProto* attr = Find(name);
  if (!attr) return Error(absl::StrCat("attribute '", name, "' is missing"));
  absl::Status s = ExpectType(*attr, onnx::AttributeProto::TENSOR);
  if (!s.ok()) return s;
  return &attr->t();
}

}  // namespace convoy::repository
