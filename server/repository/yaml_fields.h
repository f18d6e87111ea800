// Typed, strict reading of YAML maps for config.yaml and Convoy graph files. Every error names the source file,
// line and column, the field path ("dynamic_batching.preferred_batch_size[1]"), what was expected and what was found;
// CheckFields rejects unknown keys so typos are never silently ignored. Nothing here throws: yaml-cpp's own
// exceptions are caught by LoadYaml.
//
//   CONVOY_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, "config.yaml"));
//   CONVOY_ASSIGN_OR_RETURN(YamlMap map, YamlMap::Create(root, "", "config.yaml"));
//   CONVOY_RETURN_IF_ERROR(map.CheckFields({"name", "max_batch_size"}));
//   CONVOY_ASSIGN_OR_RETURN(int64_t max_batch, map.Int("max_batch_size", 0));
#ifndef CONVOY_SERVER_REPOSITORY_YAML_FIELDS_H_
#define CONVOY_SERVER_REPOSITORY_YAML_FIELDS_H_

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "yaml-cpp/yaml.h"

namespace convoy::repository {

// Parses YAML text; a syntax error becomes InvalidArgument with "source:line:column".
absl::StatusOr<YAML::Node> LoadYaml(const std::string& text, const std::string& source);

// "source:line:col: path: message" for a node.
absl::Status YamlError(const std::string& source, const YAML::Node& node, const std::string& path,
                       const std::string& message);
// A short description of what a node holds, for "got ..." in messages.
std::string DescribeYamlNode(const YAML::Node& node);

class YamlMap {
 public:
  // Fails unless `node` is a map. `path` is the field path of the map itself ("" for the document root).
  static absl::StatusOr<YamlMap> Create(const YAML::Node& node, const std::string& path, const std::string& source);

  absl::Status CheckFields(std::initializer_list<const char*> allowed) const;
  bool Has(const std::string& key) const;
  YAML::Node Get(const std::string& key) const { return node_[key]; }
  std::string ChildPath(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }
  const std::string& path() const { return path_; }
  const std::string& source() const { return source_; }
  // An error located at `key`'s value (or at the map when the key is absent).
  absl::Status Error(const std::string& key, const std::string& message) const;

  // Getters: with `fallback` unset the field is required.
  absl::StatusOr<std::string> String(const std::string& key, std::optional<std::string> fallback = {}) const;
  absl::StatusOr<int64_t> Int(const std::string& key, std::optional<int64_t> fallback = {}) const;
  absl::StatusOr<double> Double(const std::string& key, std::optional<double> fallback = {}) const;
  absl::StatusOr<bool> Bool(const std::string& key, std::optional<bool> fallback = {}) const;
  // A list of integers; a single integer is accepted as a one-element list when `allow_scalar`.
  absl::StatusOr<std::vector<int64_t>> IntList(const std::string& key, std::optional<std::vector<int64_t>> fallback = {},
                                               bool allow_scalar = false) const;
  absl::StatusOr<std::vector<std::string>> StringList(const std::string& key,
                                                      std::optional<std::vector<std::string>> fallback = {},
                                                      bool allow_scalar = false) const;
  absl::StatusOr<YamlMap> Map(const std::string& key) const;
  // Every key (must be plain scalars) with its value, in file order.
  absl::StatusOr<std::vector<std::pair<std::string, YAML::Node>>> Entries() const;
  // Items of a sequence field with their paths ("key[i]").
  absl::StatusOr<std::vector<std::pair<YAML::Node, std::string>>> Sequence(const std::string& key) const;

 private:
  YamlMap(YAML::Node node, std::string path, std::string source)
      : node_(std::move(node)), path_(std::move(path)), source_(std::move(source)) {}

  absl::StatusOr<YAML::Node> Scalar(const std::string& key) const;

  YAML::Node node_;
  std::string path_;
  std::string source_;
};

// Scalar conversions with the same error style, for list items.
absl::StatusOr<int64_t> YamlToInt(const YAML::Node& node, const std::string& path, const std::string& source);
absl::StatusOr<double> YamlToDouble(const YAML::Node& node, const std::string& path, const std::string& source);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_YAML_FIELDS_H_
