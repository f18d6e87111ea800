// ModelManager: the lifecycle of every model version the server knows. Each version moves
// LOADING -> READY | UNAVAILABLE (with the reason) -> UNLOADING -> UNAVAILABLE ("unloaded"); a model that fails to
// load is UNAVAILABLE with its reason while every other model keeps serving. A READY version owns a ServedModel
// (runtime, instances, dynamic batcher, metrics reporter: model_manager_served_model.h).
//
// Control modes (Triton's): kNone loads every model of the repository at start and never looks again; kPoll does
// the same, then rescans every poll_interval (new models and versions load, removed ones unload, a changed
// config.yaml or model file reloads); kExplicit loads only `startup_models`, then LoadModel / UnloadModel on request.
// Loads of different models run in parallel on up to load_threads threads; Create returns once the start-up loads
// have finished (successfully or not).
//
// A reload is seamless: the new ServedModel becomes READY and takes new requests before the old one stops taking
// them; the old one then drains its queue (nothing accepted is dropped). Readers hold a shared_ptr, so a version
// that is unloading stays alive until its last request completes.
//
//   ModelManager::Options options;
//   options.repository_path = "model_repo";
//   options.device = &CpuDevice::Default();
//   CONVOY_ASSIGN_OR_RETURN(auto manager, ModelManager::Create(options));
//   manager->AddListener([&] { health.Refresh(); });      // any state change
//   CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<ServedModel> resnet, manager->GetServedModel("resnet", ""));
//
// Thread-safe.
#ifndef CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_H_
#define CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "kernels/common/mutex.h"
#include "kernels/registry/device.h"
#include "server/batching/clock.h"
#include "server/metrics/metrics_registry.h"
#include "server/repository/model_manager_served_model.h"
#include "server/repository/model_repository.h"

namespace convoy::repository {

enum class ModelState { kUnavailable, kLoading, kReady, kUnloading };
// "UNAVAILABLE", "LOADING", "READY", "UNLOADING" (the RepositoryIndex spelling).
const char* ModelStateName(ModelState state);

enum class ModelControlMode { kNone, kPoll, kExplicit };
// "none", "poll", "explicit"; INVALID_ARGUMENT otherwise.
absl::StatusOr<ModelControlMode> ParseModelControlMode(absl::string_view text);

// One row of the repository index. version is 0 for a model none of whose versions is known (bad config, not
// loaded in explicit mode).
struct ModelVersionStatus {
  std::string model;
  int64_t version = 0;
  ModelState state = ModelState::kUnavailable;
  std::string reason;
  absl::Duration load_time = absl::ZeroDuration();
};

class ModelManager {
 public:
  struct Options {
    std::string repository_path;
    ModelControlMode control_mode = ModelControlMode::kNone;
    absl::Duration poll_interval = absl::Seconds(15);
    // kExplicit: models loaded at start (--load_model). Ignored otherwise.
    std::vector<std::string> startup_models;
    // Readiness: true (Triton's default) = at least one model and every model the server is expected to serve
    // READY; false = at least one model READY.
    bool strict_readiness = true;
    int load_threads = 2;
    // How long an unloaded or replaced version may take to finish its queued requests.
    absl::Duration drain_timeout = absl::Seconds(30);
    Device* device = nullptr;                               // required; not owned
    const batching::Clock* clock = &batching::Clock::Real();  // polling and batching; not owned
    metrics::MetricsRegistry* metrics = nullptr;            // optional; not owned
    // Optional: receives each model version's load progress (import, planning, tuning, memory, warm-up, CUDA graphs,
    // with times), from the loading thread.
    std::function<void(const std::string& model, int64_t version, const std::string& line)> load_log;
    // kPoll: run the polling thread. Tests turn it off and call Poll() themselves.
    bool start_poll_thread = true;
  };

  // Fails only for bad options or an unreadable repository; model failures show in Index().
  static absl::StatusOr<std::unique_ptr<ModelManager>> Create(const Options& options);
  // Shutdown with an immediate deadline when not called.
  ~ModelManager();
  ModelManager(const ModelManager&) = delete;
  ModelManager& operator=(const ModelManager&) = delete;

  // The serving version: `version` as decimal text, or empty for the newest READY one. NOT_FOUND for an unknown
  // model or version; UNAVAILABLE (with state and reason) when it is not READY or the server is shutting down.
  absl::StatusOr<std::shared_ptr<ServedModel>> GetServedModel(absl::string_view model,
                                                              absl::string_view version) const;
  // Every READY version (name, then version ascending).
  std::vector<std::shared_ptr<ServedModel>> ServedModels() const;

  std::vector<ModelVersionStatus> Index() const;
  // Server readiness (see Options::strict_readiness); false once WithdrawReadiness or Shutdown was called.
  bool IsReady() const;
  // A model's readiness: true when a version is READY (false once readiness is withdrawn); NOT_FOUND for a model the
  // repository does not hold.
  absl::StatusOr<bool> IsModelReady(absl::string_view model) const;

  // kExplicit only (UNAVAILABLE otherwise, as Triton): (re)loads the model's versions from the repository and
  // returns once they are READY or failed (the load error). NOT_FOUND when the repository has no such model.
  absl::Status LoadModel(const std::string& model);
  // kExplicit only: drains and unloads every version of the model. NOT_FOUND for an unknown model.
  absl::Status UnloadModel(const std::string& model);
  // Rescans the repository and applies the differences (kPoll's step; callable in any mode by tests).
  absl::Status Poll();

  // Called (outside the manager's lock) after any state change, and once Shutdown starts.
  void AddListener(std::function<void()> listener);

  // The first step of a graceful exit: server and model readiness turn false (listeners are told, so health Watch
  // streams and load balancers' checks see NOT_SERVING) while requests are still accepted and served, so a load
  // balancer takes the server out of rotation before Shutdown starts refusing requests. Idempotent.
  void WithdrawReadiness();
  bool readiness_withdrawn() const;

  // Readiness turns false at once, new requests get UNAVAILABLE, every version drains until `deadline`. OK when
  // everything drained; DEADLINE_EXCEEDED otherwise. Later calls return OK.
  absl::Status Shutdown(absl::Time deadline);
  bool shutting_down() const;

  ModelControlMode control_mode() const { return options_.control_mode; }

 private:
  struct VersionSlot {
    ModelState state = ModelState::kUnavailable;
    std::string reason;
    std::string fingerprint;  // of config.yaml and the model file it was loaded from
    std::shared_ptr<ServedModel> served;
    absl::Duration load_time = absl::ZeroDuration();
  };
  struct ModelSlot {
    bool expected = false;      // readiness counts it
    std::string model_reason;   // why no version is known (bad config, not loaded, unloaded)
    std::map<int64_t, VersionSlot> versions;
  };
  // A version to (re)load.
  struct LoadTask {
    std::string model;
    std::string directory;
    ModelConfig config;
    ModelVersion version;
    std::string fingerprint;
  };

  explicit ModelManager(const Options& options);
  // Brings `model` in line with its scan: loads new or changed versions, retires removed ones. Returns the first
  // load error.
  // retry_failed: also retry versions that failed with the same files (explicit loads; polling does not).
  absl::Status ApplyScan(const ScannedModel& scanned, bool retry_failed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::Status RunLoads(const std::vector<LoadTask>& tasks) ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::Status LoadOne(const LoadTask& task);
  absl::Status RetireModel(const std::string& model, const std::string& reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(control_mu_);
  absl::Status DrainAll(std::vector<std::shared_ptr<ServedModel>> retired, absl::Time deadline);
  void SetState(const std::string& model, int64_t version, ModelState state, const std::string& reason);
  void NotifyListeners();
  void PollLoop(absl::Time first_poll);
  bool ModelExpectedReady(const ModelSlot& slot) const;

  const Options options_;
  convoy::Mutex control_mu_;  // serializes Poll, LoadModel, UnloadModel, Shutdown; taken before mu_
  mutable convoy::Mutex mu_;
  std::map<std::string, ModelSlot> models_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool readiness_withdrawn_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_polling_ ABSL_GUARDED_BY(mu_) = false;
  convoy::Mutex listeners_mu_;
  std::vector<std::function<void()>> listeners_ ABSL_GUARDED_BY(listeners_mu_);
  std::thread poll_thread_;
};

// The fingerprint of a model version: config.yaml's text plus the model file's size and modification time (and
// those of a model.yaml's weights). Changes when either is edited.
std::string ModelVersionFingerprint(const std::string& model_directory, const std::string& model_path);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_MODEL_MANAGER_H_
