// See safetensors.h. The JSON header is parsed with yaml-cpp (JSON is valid YAML flow syntax).
#include "server/repository/safetensors.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/repository/float16.h"
#include "server/repository/yaml_fields.h"

namespace convoy::repository {
namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;
constexpr int64_t kMaxElements = int64_t{1} << 32;

absl::StatusOr<size_t> ElementSize(const std::string& dtype, const std::string& what) {
  if (dtype == "F32") return 4;
  if (dtype == "F16" || dtype == "BF16") return 2;
  if (dtype == "I64") return 8;
  return absl::UnimplementedError(absl::StrCat(what, ": dtype '", dtype, "' is not supported (F32, F16, BF16, I64)"));
}

void ConvertToFloat(const std::string& dtype, const char* data, int64_t count, std::vector<float>& out) {
  out.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    if (dtype == "F32") {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else if (dtype == "I64") {
      int64_t v;
      std::memcpy(&v, data + 8 * i, 8);
      out[i] = static_cast<float>(v);
    } else {
      uint16_t bits;
      std::memcpy(&bits, data + 2 * i, 2);
      out[i] = dtype == "F16" ? HalfBitsToFloat(bits) : BFloat16BitsToFloat(bits);
    }
  }
}

absl::StatusOr<runtime::Tensor> ReadEntry(const YamlMap& entry, std::string_view data, const std::string& what) {
  CONVOY_RETURN_IF_ERROR(entry.CheckFields({"dtype", "shape", "data_offsets"}));
  CONVOY_ASSIGN_OR_RETURN(std::string dtype, entry.String("dtype"));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> shape, entry.IntList("shape"));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> offsets, entry.IntList("data_offsets"));
  CONVOY_ASSIGN_OR_RETURN(size_t element_size, ElementSize(dtype, what));
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && count > kMaxElements / d)) {
      return entry.Error("shape", absl::StrCat("invalid shape ", runtime::ShapeToString(shape)));
    }
    count *= d;
  }
  if (offsets.size() != 2 || offsets[0] < 0 || offsets[1] < offsets[0] ||
      static_cast<uint64_t>(offsets[1]) > data.size()) {
    return entry.Error("data_offsets", absl::StrCat("offsets must be [begin, end] within the ", data.size(),
                                                    " data bytes"));
  }
  const int64_t expected = count * static_cast<int64_t>(element_size);
  if (offsets[1] - offsets[0] != expected) {
    return entry.Error("data_offsets", absl::StrCat("span of ", offsets[1] - offsets[0], " bytes, expected ",
                                                    expected, " for ", dtype, " ", runtime::ShapeToString(shape)));
  }
  runtime::Tensor t;
  t.shape = shape;
  ConvertToFloat(dtype, data.data() + offsets[0], count, t.data);
  return t;
}

}  // namespace

absl::StatusOr<TensorMap> ParseSafetensors(std::string_view bytes, const std::string& source) {
  if (bytes.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": ", bytes.size(), " bytes, too short for a safetensors header"));
  }
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = (header_size << 8) | static_cast<uint8_t>(bytes[i]);
  if (header_size > kMaxHeaderBytes || header_size > bytes.size() - 8) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": header length ", header_size, " exceeds the file (",
                                                   bytes.size(), " bytes)"));
  }
  std::string header(bytes.substr(8, header_size));
  std::string_view data = bytes.substr(8 + header_size);
  CONVOY_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(header, source + " (header)"));
  CONVOY_ASSIGN_OR_RETURN(YamlMap map, YamlMap::Create(root, "", source + " (header)"));
  TensorMap tensors;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (!it->first.IsScalar()) return absl::InvalidArgumentError(absl::StrCat(source, ": non-string tensor name"));
    const std::string name = it->first.Scalar();
    if (name == "__metadata__") continue;
    const std::string what = absl::StrCat(source, ": tensor '", name, "'");
    CONVOY_ASSIGN_OR_RETURN(YamlMap entry, YamlMap::Create(it->second, name, source + " (header)"));
    CONVOY_ASSIGN_OR_RETURN(runtime::Tensor tensor, ReadEntry(entry, data, what));
    tensors.emplace(name, std::move(tensor));
  }
  return tensors;
}

absl::StatusOr<TensorMap> ReadSafetensorsFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open weights file '", path, "'"));
  std::stringstream buffer;
  buffer << file.rdbuf();
  return ParseSafetensors(buffer.str(), path);
}

}  // namespace convoy::repository
