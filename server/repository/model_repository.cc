// See model_repository.h. Uses std::filesystem with error codes only (no exceptions).
#include "server/repository/model_repository.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace convoy::repository {
namespace fs = std::filesystem;

namespace {

// Numbered version folders that hold the model file the config's format calls for.
absl::StatusOr<std::vector<ModelVersion>> FindVersions(const fs::path& dir, const ModelConfig& config) {
  const char* file_name = config.format == ModelFormat::kOnnx ? "model.onnx" : "model.yaml";
  std::vector<ModelVersion> found;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t version;
    if (!it->is_directory(ec) || !absl::SimpleAtoi(it->path().filename().string(), &version) || version < 1) continue;
    fs::path model = it->path() / file_name;
    if (fs::is_regular_file(model, ec)) found.push_back({version, model.string()});
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot list '", dir.string(), "': ", ec.message()));
  std::sort(found.begin(), found.end(), [](const ModelVersion& a, const ModelVersion& b) { return a.version < b.version; });
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("model '", dir.filename().string(), "': no version folder <N>/ holds ",
                                            file_name));
  }
  return found;
}

std::vector<ModelVersion> ApplyPolicy(const VersionPolicy& policy, std::vector<ModelVersion> all) {
  switch (policy.kind) {
    case VersionPolicyKind::kAll: return all;
    case VersionPolicyKind::kLatest:
      if (static_cast<int64_t>(all.size()) > policy.latest_count) all.erase(all.begin(), all.end() - policy.latest_count);
      return all;
    case VersionPolicyKind::kSpecific: {
      std::vector<ModelVersion> chosen;
      for (const ModelVersion& v : all) {
        if (std::count(policy.versions.begin(), policy.versions.end(), v.version)) chosen.push_back(v);
      }
      return chosen;
    }
  }
  return all;
}

}  // namespace

ScannedModel ScanModelDirectory(const std::string& model_directory) {
  ScannedModel model;
  fs::path dir(model_directory);
  model.name = dir.filename().string();
  model.directory = model_directory;
  auto config = ParseModelConfig((dir / "config.yaml").string());
  if (!config.ok()) {
    model.status = config.status();
    return model;
  }
  if (config->name != model.name) {
    model.status = absl::InvalidArgumentError(absl::StrCat((dir / "config.yaml").string(), ": name '", config->name,
                                                           "' differs from the folder name '", model.name, "'"));
    return model;
  }
  model.config = std::move(*config);
  auto versions = FindVersions(dir, model.config);
  if (!versions.ok()) {
    model.status = versions.status();
    return model;
  }
  model.versions = ApplyPolicy(model.config.version_policy, std::move(*versions));
  if (model.versions.empty()) {
    model.status = absl::NotFoundError(absl::StrCat("model '", model.name, "': the version policy selects none of the ",
                                                    versions->size(), " versions present"));
  }
  return model;
}

absl::StatusOr<RepositoryScan> ScanModelRepository(const std::string& repository_path) {
  std::error_code ec;
  if (!fs::is_directory(repository_path, ec)) {
    return absl::NotFoundError(absl::StrCat("model repository '", repository_path, "' is not a directory"));
  }
  RepositoryScan scan;
  for (fs::directory_iterator it(repository_path, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_directory(ec) || it->path().filename().string().front() == '.') continue;
    scan.models.push_back(ScanModelDirectory(it->path().string()));
  }
  if (ec) return absl::UnavailableError(absl::StrCat("cannot list '", repository_path, "': ", ec.message()));
  std::sort(scan.models.begin(), scan.models.end(),
            [](const ScannedModel& a, const ScannedModel& b) { return a.name < b.name; });
  return scan;
}

}  // namespace convoy::repository
