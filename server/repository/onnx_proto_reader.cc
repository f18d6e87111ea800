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

KnownValue KnownValue::Float(runtime::Shape shape, std::vector<float> values) {
  KnownValue v;
  v.type = onnx::TensorProto::FLOAT;
  v.shape = std::move(shape);
  v.floats = std::move(values);
  return v;
}

KnownValue KnownValue::Int64(runtime::Shape shape, std::vector<int64_t> values) {
  KnownValue v;
  v.type = onnx::TensorProto::INT64;
  v.shape = std::move(shape);
  v.ints = std::move(values);
  return v;
}

bool KnownValue::IsIntegerOnnxType(int32_t type) {
  using T = onnx::TensorProto;
  switch (type) {
    case T::INT8: case T::INT16: case T::INT32: case T::INT64:
    case T::UINT8: case T::UINT16: case T::UINT32: case T::UINT64:
    case T::BOOL:
      return true;
    default:
      return false;
  }
}

bool KnownValue::IsFloatOnnxType(int32_t type) {
  using T = onnx::TensorProto;
  return type == T::FLOAT || type == T::FLOAT16 || type == T::BFLOAT16 || type == T::DOUBLE;
}

std::string KnownValue::Describe() const {
  return absl::StrCat(onnx::TensorProto::DataType_Name(static_cast<onnx::TensorProto::DataType>(type)), " ",
                      runtime::ShapeToString(shape));
}

absl::StatusOr<KnownValue> DecodeTensor(const onnx::TensorProto& t, const std::string& what) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    return absl::UnimplementedError(absl::StrCat(what, ": external tensor data is not supported"));
  }
  KnownValue v;
  v.type = t.data_type();
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
  auto as_int64 = [](auto x) { return static_cast<int64_t>(x); };
  absl::Status status;
  switch (t.data_type()) {
    case T::FLOAT:
      status = raw ? DecodeRaw<float>(t.raw_data(), count, what, v.floats, [](float x) { return x; })
                   : DecodeTyped(t.float_data(), count, what, "float_data", v.floats);
      break;
    case T::FLOAT16:
    case T::BFLOAT16: {
      const auto bits_to_float = t.data_type() == T::FLOAT16 ? HalfBitsToFloat : BFloat16BitsToFloat;
      if (raw) {
        status = DecodeRaw<uint16_t>(t.raw_data(), count, what, v.floats, bits_to_float);
      } else {  // int32_data holds the 16-bit patterns
        std::vector<int64_t> bits;
        status = DecodeTyped(t.int32_data(), count, what, "int32_data", bits);
        for (int64_t b : bits) v.floats.push_back(bits_to_float(static_cast<uint16_t>(b)));
      }
      break;
    }
    case T::DOUBLE: {
      std::vector<double> d;
      status = raw ? DecodeRaw<double>(t.raw_data(), count, what, d, [](double x) { return x; })
                   : DecodeTyped(t.double_data(), count, what, "double_data", d);
      v.floats.assign(d.begin(), d.end());
      break;
    }
    case T::INT64:
      status = raw ? DecodeRaw<int64_t>(t.raw_data(), count, what, v.ints, as_int64)
                   : DecodeTyped(t.int64_data(), count, what, "int64_data", v.ints);
      break;
    case T::UINT64:
    case T::UINT32:
      if (raw) {
        status = t.data_type() == T::UINT64 ? DecodeRaw<uint64_t>(t.raw_data(), count, what, v.ints, as_int64)
                                            : DecodeRaw<uint32_t>(t.raw_data(), count, what, v.ints, as_int64);
      } else {
        status = DecodeTyped(t.uint64_data(), count, what, "uint64_data", v.ints);
      }
      break;
    case T::INT32:
    case T::INT16:
    case T::INT8:
    case T::UINT16:
    case T::UINT8:
    case T::BOOL:
      if (!raw) {  // int32_data holds every narrower integer type
        status = DecodeTyped(t.int32_data(), count, what, "int32_data", v.ints);
      } else if (t.data_type() == T::INT32) {
        status = DecodeRaw<int32_t>(t.raw_data(), count, what, v.ints, as_int64);
      } else if (t.data_type() == T::INT16) {
        status = DecodeRaw<int16_t>(t.raw_data(), count, what, v.ints, as_int64);
      } else if (t.data_type() == T::UINT16) {
        status = DecodeRaw<uint16_t>(t.raw_data(), count, what, v.ints, as_int64);
      } else if (t.data_type() == T::INT8) {
        status = DecodeRaw<int8_t>(t.raw_data(), count, what, v.ints, as_int64);
      } else {
        status = DecodeRaw<uint8_t>(t.raw_data(), count, what, v.ints, as_int64);
      }
      if (status.ok() && t.data_type() == T::BOOL) {
        for (int64_t& b : v.ints) b = b != 0;
      }
      break;
    default:
      return absl::UnimplementedError(absl::StrCat(
          what, ": tensor element type ", T::DataType_Name(static_cast<T::DataType>(t.data_type())),
          " is not supported (floating-point, integer and BOOL tensors are)"));
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
