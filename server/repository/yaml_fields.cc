// See yaml_fields.h.
#include "server/repository/yaml_fields.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace convoy::repository {

absl::StatusOr<YAML::Node> LoadYaml(const std::string& text, const std::string& source) {
  try {
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ":", e.mark.line + 1, ":", e.mark.column + 1,
                                                   ": YAML syntax error: ", e.msg));
  } catch (const std::exception& e) {  // yaml-cpp may also throw std exceptions on pathological input
    return absl::InvalidArgumentError(absl::StrCat(source, ": YAML error: ", e.what()));
  }
}

std::string DescribeYamlNode(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return absl::StrCat("'", node.Scalar(), "'");
  if (node.IsSequence()) return absl::StrCat("a list of ", node.size());
  return "a map";
}

absl::Status YamlError(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& message) {
  std::string where = source;
  if (node.IsDefined() && !node.Mark().is_null()) {
    absl::StrAppend(&where, ":", node.Mark().line + 1, ":", node.Mark().column + 1);
  }
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", path.empty() ? "" : path + ": ", message));
}

absl::StatusOr<YamlMap> YamlMap::Create(const YAML::Node& node, const std::string& path, const std::string& source) {
  if (!node.IsMap()) {
    return YamlError(source, node, path, absl::StrCat("expected a map, got ", DescribeYamlNode(node)));
  }
  return YamlMap(node, path, source);
}

absl::Status YamlMap::Error(const std::string& key, const std::string& message) const {
  YAML::Node value = Has(key) ? node_[key] : node_;
  return YamlError(source_, value, ChildPath(key), message);
}

bool YamlMap::Has(const std::string& key) const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (it->first.IsScalar() && it->first.Scalar() == key) return true;
  }
  return false;
}

absl::Status YamlMap::CheckFields(std::initializer_list<const char*> allowed) const {
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) return YamlError(source_, it->first, path_, "map keys must be plain names");
    const std::string& key = it->first.Scalar();
    bool known = false;
    for (const char* name : allowed) known = known || key == name;
    if (!known) {
      return YamlError(source_, it->first, ChildPath(key),
                       absl::StrCat("unknown field (expected one of: ", absl::StrJoin(allowed, ", "), ")"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<YAML::Node> YamlMap::Scalar(const std::string& key) const {
  YAML::Node value = node_[key];
  if (!value.IsScalar()) return Error(key, absl::StrCat("expected a value, got ", DescribeYamlNode(value)));
  return value;
}

absl::StatusOr<int64_t> YamlToInt(const YAML::Node& node, const std::string& path, const std::string& source) {
  int64_t v;
  if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v)) {
    return YamlError(source, node, path, absl::StrCat("expected an integer, got ", DescribeYamlNode(node)));
  }
  return v;
}

absl::StatusOr<double> YamlToDouble(const YAML::Node& node, const std::string& path, const std::string& source) {
  double v;
  if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v)) {
    return YamlError(source, node, path, absl::StrCat("expected a number, got ", DescribeYamlNode(node)));
  }
  return v;
}

absl::StatusOr<std::string> YamlMap::String(const std::string& key, std::optional<std::string> fallback) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  auto value = Scalar(key);
  if (!value.ok()) return value.status();
  return value->Scalar();
}

absl::StatusOr<int64_t> YamlMap::Int(const std::string& key, std::optional<int64_t> fallback) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  return YamlToInt(node_[key], ChildPath(key), source_);
}

absl::StatusOr<double> YamlMap::Double(const std::string& key, std::optional<double> fallback) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  return YamlToDouble(node_[key], ChildPath(key), source_);
}

absl::StatusOr<bool> YamlMap::Bool(const std::string& key, std::optional<bool> fallback) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  YAML::Node value = node_[key];
  std::string text = value.IsScalar() ? absl::AsciiStrToLower(value.Scalar()) : "";
  if (text == "true") return true;
  if (text == "false") return false;
  return Error(key, absl::StrCat("expected true or false, got ", DescribeYamlNode(value)));
}

absl::StatusOr<std::vector<int64_t>> YamlMap::IntList(const std::string& key,
                                                      std::optional<std::vector<int64_t>> fallback,
                                                      bool allow_scalar) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  YAML::Node value = node_[key];
  if (allow_scalar && value.IsScalar()) {
    auto v = YamlToInt(value, ChildPath(key), source_);
    if (!v.ok()) return v.status();
    return std::vector<int64_t>{*v};
  }
  if (!value.IsSequence()) return Error(key, absl::StrCat("expected a list of integers, got ", DescribeYamlNode(value)));
  std::vector<int64_t> out;
  for (size_t i = 0; i < value.size(); ++i) {
    auto v = YamlToInt(value[i], absl::StrCat(ChildPath(key), "[", i, "]"), source_);
    if (!v.ok()) return v.status();
    out.push_back(*v);
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> YamlMap::StringList(const std::string& key,
                                                             std::optional<std::vector<std::string>> fallback,
                                                             bool allow_scalar) const {
  if (!Has(key)) {
    if (fallback) return *fallback;
    return Error(key, "required field is missing");
  }
  YAML::Node value = node_[key];
  if (allow_scalar && value.IsScalar()) return std::vector<std::string>{value.Scalar()};
  if (!value.IsSequence()) return Error(key, absl::StrCat("expected a list of names, got ", DescribeYamlNode(value)));
  std::vector<std::string> out;
  for (size_t i = 0; i < value.size(); ++i) {
    if (!value[i].IsScalar()) {
      return YamlError(source_, value[i], absl::StrCat(ChildPath(key), "[", i, "]"),
                       absl::StrCat("expected a name, got ", DescribeYamlNode(value[i])));
    }
    out.push_back(value[i].Scalar());
  }
  return out;
}

absl::StatusOr<YamlMap> YamlMap::Map(const std::string& key) const {
  if (!Has(key)) return Error(key, "required field is missing");
  return Create(node_[key], ChildPath(key), source_);
}

absl::StatusOr<std::vector<std::pair<std::string, YAML::Node>>> YamlMap::Entries() const {
  std::vector<std::pair<std::string, YAML::Node>> out;
  for (auto it = node_.begin(); it != node_.end(); ++it) {
    if (!it->first.IsScalar()) return YamlError(source_, it->first, path_, "map keys must be plain names");
    out.emplace_back(it->first.Scalar(), it->second);
  }
  return out;
}

absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> YamlMap::Sequence(const std::string& key) const {
  if (!Has(key)) return Error(key, "required field is missing");
  YAML::Node value = node_[key];
  if (!value.IsSequence()) return Error(key, absl::StrCat("expected a list, got ", DescribeYamlNode(value)));
  std::vector<std::pair<YAML::Node, std::string>> out;
  for (size_t i = 0; i < value.size(); ++i) out.emplace_back(value[i], absl::StrCat(ChildPath(key), "[", i, "]"));
  return out;
}

}  // namespace convoy::repository
