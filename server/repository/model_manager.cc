#include "server/repository/model_manager.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/repository/model_names.h"

namespace convoy::repository {
namespace {

namespace fs = std::filesystem;

std::string FileStamp(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (error) return "missing";
  const auto mtime = fs::last_write_time(path, error);
  return absl::StrCat(size, "@", mtime.time_since_epoch().count());
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ModelNotFound(absl::string_view model) { return absl::StrCat("unknown model ", QuoteClientString(model)); }

// A request's version string: empty (the newest READY version) or a positive decimal number.
absl::StatusOr<int64_t> ParseVersion(absl::string_view model, absl::string_view version) {
  int64_t number = 0;
  const bool digits = !version.empty() && version.size() <= 18 &&
                      std::all_of(version.begin(), version.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits || !absl::SimpleAtoi(version, &number) || number < 1) {
    return absl::InvalidArgumentError(absl::StrCat("model '", model, "': version ", QuoteClientString(version),
                                                   " is not a version number (expected a positive integer, or "
                                                   "empty for the newest ready version)"));
  }
  return number;
}

}  // namespace

const char* ModelStateName(ModelState state) {
  switch (state) {
    case ModelState::kUnavailable: return "UNAVAILABLE";
    case ModelState::kLoading: return "LOADING";
    case ModelState::kReady: return "READY";
    case ModelState::kUnloading: return "UNLOADING";
  }
  return "UNAVAILABLE";
}

absl::StatusOr<ModelControlMode> ParseModelControlMode(absl::string_view text) {
  if (text == "none") return ModelControlMode::kNone;
  if (text == "poll") return ModelControlMode::kPoll;
  if (text == "explicit") return ModelControlMode::kExplicit;
  return absl::InvalidArgumentError(
      absl::StrCat("model control mode: expected none, poll or explicit, got '", text, "'"));
}

std::string ModelVersionFingerprint(const std::string& model_directory, const std::string& model_path) {
  std::string fingerprint = ReadText(model_directory + "/config.yaml");
  absl::StrAppend(&fingerprint, "|", FileStamp(model_path));
  // A Convoy model.yaml keeps its weights beside it.
  const std::string weights = (fs::path(model_path).parent_path() / "model.safetensors").string();
  absl::StrAppend(&fingerprint, "|", FileStamp(weights));
  return fingerprint;
}

ModelManager::ModelManager(const Options& options) : options_(options) {}

absl::StatusOr<std::unique_ptr<ModelManager>> ModelManager::Create(const Options& options) {
  if (options.device == nullptr) return absl::InvalidArgumentError("ModelManager: no device");
  if (options.clock == nullptr) return absl::InvalidArgumentError("ModelManager: no clock");
  if (options.control_mode == ModelControlMode::kPoll && options.poll_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("poll interval: expected > 0, got ",
                                                   absl::FormatDuration(options.poll_interval)));
  }
  std::unique_ptr<ModelManager> manager(new ModelManager(options));
  CONVOY_ASSIGN_OR_RETURN(RepositoryScan scan, ScanModelRepository(options.repository_path));
  {
    convoy::MutexLock control(&manager->control_mu_);
    if (options.control_mode == ModelControlMode::kExplicit) {
      for (const ScannedModel& model : scan.models) {
        convoy::MutexLock lock(&manager->mu_);
        manager->models_[model.name].model_reason = "unloaded";
      }
      for (const std::string& name : options.startup_models) {
        // A start-up model that fails stays UNAVAILABLE with its reason, like any other.
        manager->ApplyScan(ScanModelDirectory(options.repository_path + "/" + name), true).IgnoreError();
      }
    } else {
      for (const ScannedModel& model : scan.models) manager->ApplyScan(model, true).IgnoreError();
    }
  }
  if (options.control_mode == ModelControlMode::kPoll && options.start_poll_thread) {
    // The schedule starts now, not when the thread first runs, so time that moves meanwhile still counts.
    const absl::Time first_poll = options.clock->Now() + options.poll_interval;
    manager->poll_thread_ = std::thread([m = manager.get(), first_poll] { m->PollLoop(first_poll); });
  }
  return manager;
}

ModelManager::~ModelManager() {
  Shutdown(absl::Now()).IgnoreError();
  if (poll_thread_.joinable()) poll_thread_.join();
}

// Loads the versions the scan selects that are new or changed, then retires versions the scan no longer selects.
// A changed version keeps serving its old ServedModel until the new one is READY.
absl::Status ModelManager::ApplyScan(const ScannedModel& scanned, bool retry_failed) {
  std::vector<LoadTask> tasks;
  std::vector<std::shared_ptr<ServedModel>> retired;
  {
    convoy::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the server is shutting down");
    ModelSlot& slot = models_[scanned.name];
    slot.expected = true;
    if (!scanned.status.ok()) {
      slot.model_reason = std::string(scanned.status.message());
    } else {
      slot.model_reason.clear();
      for (const ModelVersion& version : scanned.versions) {
        const std::string fingerprint = ModelVersionFingerprint(scanned.directory, version.model_path);
        auto it = slot.versions.find(version.version);
        if (it != slot.versions.end() && it->second.fingerprint == fingerprint &&
            (it->second.state != ModelState::kUnavailable || !retry_failed)) {
          continue;
        }
        tasks.push_back({scanned.name, scanned.directory, scanned.config, version, fingerprint});
      }
    }
  }
  NotifyListeners();
  absl::Status loaded = RunLoads(tasks);
  {
    // Versions the scan no longer selects (an older one once a new version appears, with `latest: 1`) kept serving
    // while the selected ones loaded, so a new version takes over without a gap; they retire now, unless none of
    // the selected versions is READY (a new version that failed to load leaves the old one serving).
    convoy::MutexLock lock(&mu_);
    ModelSlot& slot = models_[scanned.name];
    auto selected = [&](int64_t number) {
      return scanned.status.ok() && std::any_of(scanned.versions.begin(), scanned.versions.end(),
                                                [&](const ModelVersion& v) { return v.version == number; });
    };
    const bool selected_ready = std::any_of(slot.versions.begin(), slot.versions.end(), [&](const auto& entry) {
      return selected(entry.first) && entry.second.state == ModelState::kReady;
    });
    for (auto it = slot.versions.begin(); it != slot.versions.end();) {
      const bool keep = selected(it->first) || (!selected_ready && scanned.status.ok() &&
                                                it->second.state == ModelState::kReady);
      if (keep) {
        ++it;
        continue;
      }
      if (it->second.served != nullptr) retired.push_back(std::move(it->second.served));
      it = slot.versions.erase(it);
    }
  }
  absl::Status drained = DrainAll(std::move(retired), absl::Now() + options_.drain_timeout);
  NotifyListeners();
  if (!scanned.status.ok()) return scanned.status;
  return loaded.ok() ? drained : loaded;
}

absl::Status ModelManager::RunLoads(const std::vector<LoadTask>& tasks) {
  if (tasks.empty()) return absl::OkStatus();
  for (const LoadTask& task : tasks) {
    convoy::MutexLock lock(&mu_);
    VersionSlot& slot = models_[task.model].versions[task.version.version];
    if (slot.state != ModelState::kReady) {
      slot.state = ModelState::kLoading;
      slot.reason.clear();
    }
  }
  NotifyListeners();
  std::vector<absl::Status> results(tasks.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < tasks.size(); i = next++) results[i] = LoadOne(tasks[i]);
  };
  const size_t thread_count = std::min<size_t>(tasks.size(), std::max(1, options_.load_threads));
  std::vector<std::thread> threads;
  for (size_t t = 1; t < thread_count; ++t) threads.emplace_back(worker);
  worker();
  for (std::thread& thread : threads) thread.join();
  for (const absl::Status& status : results) {
    if (!status.ok()) return status;
  }
  return absl::OkStatus();
}

// Loads one version and swaps it in; the ServedModel it replaces (a reload) drains afterwards.
absl::Status ModelManager::LoadOne(const LoadTask& task) {
  ServedModel::Options options;
  options.model_name = task.model;
  options.version = task.version.version;
  options.model_directory = task.directory;
  options.model_path = task.version.model_path;
  options.config = task.config;
  options.device = options_.device;
  options.clock = options_.clock;
  options.metrics = options_.metrics;
  if (options_.load_log) {
    options.load_log = [log = options_.load_log, model = options.model_name,
                        version = options.version](const std::string& line) { log(model, version, line); };
  }
  absl::StatusOr<std::unique_ptr<ServedModel>> loaded = ServedModel::Load(options);
  std::shared_ptr<ServedModel> replaced;
  {
    convoy::MutexLock lock(&mu_);
    VersionSlot& slot = models_[task.model].versions[task.version.version];
    if (loaded.ok()) {
      replaced = std::move(slot.served);
      slot.served = std::move(*loaded);
      slot.state = ModelState::kReady;
      slot.reason.clear();
      slot.load_time = slot.served->load_time();
    } else if (slot.state != ModelState::kReady) {
      slot.state = ModelState::kUnavailable;
      slot.reason = std::string(loaded.status().message());
    }
    slot.fingerprint = task.fingerprint;  // a broken file is not retried until it changes again
  }
  NotifyListeners();
  if (replaced != nullptr) {
    DrainAll({std::move(replaced)}, absl::Now() + options_.drain_timeout).IgnoreError();
  }
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(), absl::StrCat("failed to load '", task.model, "' version ",
                                                             task.version.version, ": ",
                                                             loaded.status().message()));
  }
  return absl::OkStatus();
}

absl::Status ModelManager::DrainAll(std::vector<std::shared_ptr<ServedModel>> retired, absl::Time deadline) {
  absl::Status result;
  for (const std::shared_ptr<ServedModel>& served : retired) {
    absl::Status drained = served->Drain(deadline);
    if (!drained.ok() && result.ok()) result = drained;
  }
  return result;
}

absl::Status ModelManager::RetireModel(const std::string& model, const std::string& reason) {
  std::vector<std::shared_ptr<ServedModel>> retired;
  {
    convoy::MutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end()) return absl::NotFoundError(ModelNotFound(model));
    for (auto& [version, slot] : it->second.versions) {
      if (slot.served != nullptr) retired.push_back(slot.served);
      slot.state = ModelState::kUnloading;
    }
  }
  NotifyListeners();
  absl::Status drained = DrainAll(retired, absl::Now() + options_.drain_timeout);
  {
    convoy::MutexLock lock(&mu_);
    ModelSlot& slot = models_[model];
    slot.versions.clear();
    slot.expected = false;
    slot.model_reason = reason;
  }
  NotifyListeners();
  return drained;
}

absl::StatusOr<std::shared_ptr<ServedModel>> ModelManager::GetServedModel(absl::string_view model,
                                                                          absl::string_view version) const {
  if (model.empty()) return absl::InvalidArgumentError("the request names no model (model name is empty)");
  convoy::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("the server is shutting down");
  auto it = models_.find(std::string(model));
  if (it == models_.end()) return absl::NotFoundError(ModelNotFound(model));
  const ModelSlot& slot = it->second;
  if (version.empty()) {
    for (auto v = slot.versions.rbegin(); v != slot.versions.rend(); ++v) {
      if (v->second.state == ModelState::kReady) return v->second.served;
    }
    std::string why = slot.model_reason;
    if (why.empty() && !slot.versions.empty()) {
      const VersionSlot& newest = slot.versions.rbegin()->second;
      why = absl::StrCat(ModelStateName(newest.state), newest.reason.empty() ? "" : ": ", newest.reason);
    }
    return absl::UnavailableError(absl::StrCat("model '", model, "' is not ready", why.empty() ? "" : " (",
                                               why, why.empty() ? "" : ")"));
  }
  CONVOY_ASSIGN_OR_RETURN(const int64_t number, ParseVersion(model, version));
  if (slot.versions.count(number) == 0) {
    return absl::NotFoundError(absl::StrCat("model '", model, "' has no version '", number, "'"));
  }
  const VersionSlot& v = slot.versions.at(number);
  if (v.state != ModelState::kReady) {
    return absl::UnavailableError(absl::StrCat("model '", model, "' version ", number, " is not ready (",
                                               ModelStateName(v.state), v.reason.empty() ? "" : ": ", v.reason,
                                               ")"));
  }
  return v.served;
}

std::vector<std::shared_ptr<ServedModel>> ModelManager::ServedModels() const {
  std::vector<std::shared_ptr<ServedModel>> served;
  convoy::MutexLock lock(&mu_);
  for (const auto& [name, slot] : models_) {
    for (const auto& [version, v] : slot.versions) {
      if (v.state == ModelState::kReady) served.push_back(v.served);
    }
  }
  return served;
}

std::vector<ModelVersionStatus> ModelManager::Index() const {
  std::vector<ModelVersionStatus> index;
  convoy::MutexLock lock(&mu_);
  for (const auto& [name, slot] : models_) {
    if (slot.versions.empty()) {
      index.push_back({name, 0, ModelState::kUnavailable, slot.model_reason, absl::ZeroDuration()});
    }
    for (const auto& [version, v] : slot.versions) {
      index.push_back({name, version, v.state, v.reason, v.load_time});
    }
  }
  return index;
}

bool ModelManager::ModelExpectedReady(const ModelSlot& slot) const {
  if (slot.versions.empty()) return false;
  for (const auto& [version, v] : slot.versions) {
    if (v.state != ModelState::kReady) return false;
  }
  return true;
}

bool ModelManager::IsReady() const {
  convoy::MutexLock lock(&mu_);
  if (shutting_down_ || readiness_withdrawn_) return false;
  int ready = 0;
  int expected = 0;
  for (const auto& [name, slot] : models_) {
    const bool model_ready = ModelExpectedReady(slot);
    bool any_ready = false;
    for (const auto& [version, v] : slot.versions) any_ready |= v.state == ModelState::kReady;
    ready += any_ready ? 1 : 0;
    if (slot.expected) {
      ++expected;
      if (options_.strict_readiness && !model_ready) return false;
    }
  }
  return options_.strict_readiness ? expected > 0 : ready > 0;
}

absl::StatusOr<bool> ModelManager::IsModelReady(absl::string_view model) const {
  convoy::MutexLock lock(&mu_);
  auto it = models_.find(std::string(model));
  if (it == models_.end()) return absl::NotFoundError(ModelNotFound(model));
  if (shutting_down_ || readiness_withdrawn_) return false;
  for (const auto& [version, v] : it->second.versions) {
    if (v.state == ModelState::kReady) return true;
  }
  return false;
}

absl::Status ModelManager::LoadModel(const std::string& model) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return absl::UnavailableError("explicit model load / unload is not allowed if polling is enabled or the "
                                  "model control mode is none (start with --model_control_mode=explicit)");
  }
  CONVOY_RETURN_IF_ERROR(CheckModelName(model));
  convoy::MutexLock control(&control_mu_);
  const std::string directory = options_.repository_path + "/" + model;
  std::error_code error;
  if (!fs::is_directory(directory, error)) {
    return absl::NotFoundError(absl::StrCat("failed to load '", model, "': no such model in the repository ",
                                            options_.repository_path));
  }
  return ApplyScan(ScanModelDirectory(directory), true);
}

absl::Status ModelManager::UnloadModel(const std::string& model) {
  if (options_.control_mode != ModelControlMode::kExplicit) {
    return absl::UnavailableError("explicit model load / unload is not allowed if polling is enabled or the "
                                  "model control mode is none (start with --model_control_mode=explicit)");
  }
  CONVOY_RETURN_IF_ERROR(CheckModelName(model));
  convoy::MutexLock control(&control_mu_);
  return RetireModel(model, "unloaded");
}

absl::Status ModelManager::Poll() {
  convoy::MutexLock control(&control_mu_);
  CONVOY_ASSIGN_OR_RETURN(RepositoryScan scan, ScanModelRepository(options_.repository_path));
  std::vector<std::string> removed;
  {
    convoy::MutexLock lock(&mu_);
    for (const auto& [name, slot] : models_) {
      const bool present = std::any_of(scan.models.begin(), scan.models.end(),
                                       [&](const ScannedModel& m) { return m.name == name; });
      if (!present) removed.push_back(name);
    }
  }
  for (const std::string& name : removed) {
    RetireModel(name, "removed from the repository").IgnoreError();
    convoy::MutexLock lock(&mu_);
    models_.erase(name);
  }
  for (const ScannedModel& model : scan.models) ApplyScan(model, false).IgnoreError();
  NotifyListeners();
  return absl::OkStatus();
}

// Polls at first_poll, first_poll + interval, ...: each deadline follows the previous one, not the end of the
// previous poll, so a clock that moved while a poll ran (a FakeClock stepped by a test, or a poll slower than the
// interval) leads to the next poll at once instead of being lost. After a long stall it polls once at once, not
// once per missed interval.
void ModelManager::PollLoop(absl::Time first_poll) {
  absl::Time next_poll = first_poll;
  convoy::MutexLock lock(&mu_);
  while (!stop_polling_) {
    options_.clock->AwaitWithDeadline(&mu_, absl::Condition(&stop_polling_), next_poll);
    if (stop_polling_) break;
    if (options_.clock->Now() < next_poll) continue;  // woke early
    mu_.Unlock();
    Poll().IgnoreError();
    mu_.Lock();
    next_poll = std::max(next_poll + options_.poll_interval, options_.clock->Now());
  }
}

void ModelManager::AddListener(std::function<void()> listener) {
  convoy::MutexLock lock(&listeners_mu_);
  listeners_.push_back(std::move(listener));
}

void ModelManager::NotifyListeners() {
  std::vector<std::function<void()>> listeners;
  {
    convoy::MutexLock lock(&listeners_mu_);
    listeners = listeners_;
  }
  for (const auto& listener : listeners) listener();
}

void ModelManager::WithdrawReadiness() {
  {
    convoy::MutexLock lock(&mu_);
    if (readiness_withdrawn_) return;
    readiness_withdrawn_ = true;
  }
  NotifyListeners();
}

bool ModelManager::readiness_withdrawn() const {
  convoy::MutexLock lock(&mu_);
  return readiness_withdrawn_;
}

bool ModelManager::shutting_down() const {
  convoy::MutexLock lock(&mu_);
  return shutting_down_;
}

absl::Status ModelManager::Shutdown(absl::Time deadline) {
  std::vector<std::shared_ptr<ServedModel>> served;
  {
    convoy::MutexLock lock(&mu_);
    if (shutting_down_) return absl::OkStatus();
    shutting_down_ = true;
    stop_polling_ = true;
  }
  NotifyListeners();
  if (poll_thread_.joinable()) poll_thread_.join();
  convoy::MutexLock control(&control_mu_);
  {
    convoy::MutexLock lock(&mu_);
    for (auto& [name, slot] : models_) {
      for (auto& [version, v] : slot.versions) {
        if (v.served != nullptr) served.push_back(v.served);
        v.state = ModelState::kUnloading;
      }
    }
  }
  NotifyListeners();
  absl::Status drained = DrainAll(served, deadline);
  {
    convoy::MutexLock lock(&mu_);
    for (auto& [name, slot] : models_) {
      for (auto& [version, v] : slot.versions) {
        v.state = ModelState::kUnavailable;
        v.reason = "unloaded";
      }
    }
  }
  NotifyListeners();
  return drained;
}

}  // namespace convoy::repository
