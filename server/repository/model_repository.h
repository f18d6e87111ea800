// Scans a model repository directory: <repo>/<model>/config.yaml plus numbered version folders
// <repo>/<model>/<version>/ holding model.onnx or model.yaml. Lists each model with the versions its version_policy
// selects and the model file of each. A broken model (bad config, no usable version) is reported on its own entry
// while the other models scan fine. Loading, lifecycle and polling live elsewhere.
//
//   CONVOY_ASSIGN_OR_RETURN(RepositoryScan scan, ScanModelRepository("model_repo"));
//   for (const ScannedModel& m : scan.models) if (m.status.ok()) ...
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_REPOSITORY_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_REPOSITORY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/repository/model_config.h"

namespace convoy::repository {

struct ModelVersion {
  int64_t version = 0;
  std::string model_path;  // <repo>/<model>/<version>/model.onnx or model.yaml
};

struct ScannedModel {
  std::string name;       // the folder name
  std::string directory;  // <repo>/<model>
  absl::Status status;    // why this model cannot be served, or OK
  ModelConfig config;     // valid when status is OK
  std::vector<ModelVersion> versions;  // selected by the version policy, ascending
};

struct RepositoryScan {
  std::vector<ScannedModel> models;  // sorted by name
};

// Fails only when `repository_path` itself cannot be read; per-model problems go into ScannedModel::status.
absl::StatusOr<RepositoryScan> ScanModelRepository(const std::string& repository_path);

// Scans one model folder.
ScannedModel ScanModelDirectory(const std::string& model_directory);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_REPOSITORY_H_
