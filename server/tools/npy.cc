// .npy parsing and writing (see npy.h).
#include "server/tools/npy.h"

#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace convoy::tools {
namespace {

constexpr char kMagic[] = "\x93NUMPY";

absl::Status Error(const std::string& source, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": not a usable .npy file: ", what));
}

// The value text after `'key':` in the header dict, up to the matching end (a quoted string, a bool, a tuple).
absl::StatusOr<std::string> HeaderValue(absl::string_view header, absl::string_view key, const std::string& source) {
  const std::string quoted = absl::StrCat("'", key, "'");
  size_t at = header.find(quoted);
  if (at == absl::string_view::npos) return Error(source, absl::StrCat("header has no ", quoted, ": ", header));
  at = header.find(':', at + quoted.size());
  if (at == absl::string_view::npos) return Error(source, absl::StrCat("header has no value for ", quoted));
  absl::string_view rest = absl::StripLeadingAsciiWhitespace(header.substr(at + 1));
  const size_t end = rest.empty() ? 0
                     : rest[0] == '(' ? rest.find(')') + 1
                     : rest[0] == '\'' ? rest.find('\'', 1) + 1
                                       : rest.find_first_of(",}");
  if (end == 0 || end > rest.size()) {
    return Error(source, absl::StrCat("cannot read the value of ", quoted));
  }
  return std::string(rest.substr(0, end));
}

absl::StatusOr<std::vector<int64_t>> ParseShape(const std::string& text, const std::string& source) {
  absl::string_view inner = absl::StripSuffix(absl::StripPrefix(text, "("), ")");
  std::vector<int64_t> shape;
  for (absl::string_view part : absl::StrSplit(inner, ',', absl::SkipWhitespace())) {
    int64_t dim = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &dim) || dim < 0) {
      return Error(source, absl::StrCat("bad shape ", text));
    }
    shape.push_back(dim);
  }
  return shape;
}

}  // namespace

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& source) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != absl::string_view(kMagic, 6)) {
    return Error(source, "missing the \\x93NUMPY magic");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const size_t length_bytes = major == 1 ? 2 : 4;
  if (major < 1 || major > 3) return Error(source, absl::StrCat("unsupported format version ", major));
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) header_length |= size_t{static_cast<uint8_t>(bytes[8 + i])} << (8 * i);
  const size_t data_start = 8 + length_bytes + header_length;
  if (bytes.size() < data_start) return Error(source, "truncated header");
  const absl::string_view header = bytes.substr(8 + length_bytes, header_length);

  auto descr = HeaderValue(header, "descr", source);
  auto fortran = HeaderValue(header, "fortran_order", source);
  auto shape_text = HeaderValue(header, "shape", source);
  if (!descr.ok()) return descr.status();
  if (!fortran.ok()) return fortran.status();
  if (!shape_text.ok()) return shape_text.status();
  if (*fortran != "False") return Error(source, "Fortran-ordered arrays are not supported");
  NpyArray array;
  auto shape = ParseShape(*shape_text, source);
  if (!shape.ok()) return shape.status();
  array.shape = *std::move(shape);
  int64_t count = 1;
  for (int64_t d : array.shape) count *= d;
  bool narrow_f64 = false;
  if (*descr == "'<f4'") array.dtype = DataType::kFloat32;
  else if (*descr == "'<f2'") array.dtype = DataType::kFloat16;
  else if (*descr == "'|u1'" || *descr == "'<u1'") array.dtype = DataType::kUInt8;
  else if (*descr == "'<i8'") array.dtype = DataType::kInt64;
  else if (*descr == "'<i4'") array.dtype = DataType::kInt32;
  else if (*descr == "'<f8'") array.dtype = DataType::kFloat32, narrow_f64 = true;
  else return Error(source, absl::StrCat("unsupported dtype ", *descr, " (use float32, float16, uint8 or int64)"));
  const size_t element = narrow_f64 ? 8 : DataTypeSize(array.dtype);
  const size_t expected = static_cast<size_t>(count) * element;
  if (bytes.size() - data_start != expected) {
    return Error(source, absl::StrCat("shape ", *shape_text, " ", *descr, " needs ", expected, " data bytes, the file has ",
                                      bytes.size() - data_start));
  }
  const char* data = bytes.data() + data_start;
  array.data.resize(static_cast<size_t>(count) * DataTypeSize(array.dtype));
  if (narrow_f64) {
    for (int64_t i = 0; i < count; ++i) {
      double v;
      std::memcpy(&v, data + i * 8, 8);
      const float f = static_cast<float>(v);
      std::memcpy(array.data.data() + i * 4, &f, 4);
    }
  } else {
    std::memcpy(array.data.data(), data, array.data.size());
  }
  return array;
}

absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return ParseNpy(buffer.str(), path);
}

std::string SerializeNpy(const NpyArray& array) {
  const bool widen_bf16 = array.dtype == DataType::kBFloat16;
  const char* descr = array.dtype == DataType::kFloat16 ? "<f2"
                      : array.dtype == DataType::kUInt8 ? "|u1"
                      : array.dtype == DataType::kInt64 ? "<i8"
                      : array.dtype == DataType::kInt32 ? "<i4"
                                                        : "<f4";
  std::string shape = absl::StrJoin(array.shape, ", ");
  if (array.shape.size() == 1) shape += ",";
  std::string header = absl::StrCat("{'descr': '", descr, "', 'fortran_order': False, 'shape': (", shape, "), }");
  // Pad with spaces so that magic + version + length + header + '\n' is a multiple of 64 bytes.
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::string out(kMagic, 6);
  out.push_back('\x01');
  out.push_back('\x00');
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  if (!widen_bf16) {
    out.append(reinterpret_cast<const char*>(array.data.data()), array.data.size());
  } else {
    for (size_t i = 0; i < array.data.size() / 2; ++i) {
      const float f = LoadAsFloat(array.data.data(), DataType::kBFloat16, i);
      out.append(reinterpret_cast<const char*>(&f), 4);
    }
  }
  return out;
}

absl::Status WriteNpyFile(const std::string& path, const NpyArray& array) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = SerializeNpy(array);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) return absl::InternalError(absl::StrCat("cannot write '", path, "'"));
  return absl::OkStatus();
}

}  // namespace convoy::tools
