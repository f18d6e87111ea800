// HealthService: grpc.health.v1.Health (proto/health.proto), Check and Watch, answered from the ModelManager (on
// gRPC's callback API by this class's overrides; on its completion-queue API by async_server.h with StatusOf and a
// HealthWatch):
//   "" and "liveness"  process health: SERVING while the process runs;
//   "readiness"        SERVING when the server is ready (ModelManager::IsReady: strict readiness, not shutting down);
//   "<model name>"     SERVING when a version of that model is READY, NOT_SERVING otherwise.
// An unknown service is NOT_FOUND for Check and SERVICE_UNKNOWN for Watch (which keeps watching: the model may
// appear later). Watch sends the current status at once, then each change; Refresh() (wired to the manager's
// listener) recomputes. Shutdown() sends every Watch its final status (readiness: NOT_SERVING) and finishes each
// stream once that write completed, so the server can stop.
#ifndef CONVOY_SERVER_GRPC_HEALTH_SERVICE_H_
#define CONVOY_SERVER_GRPC_HEALTH_SERVICE_H_

#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"
#include "proto/health.grpc.pb.h"
#include "server/repository/model_manager.h"

namespace convoy::grpc_server {

using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

// One Watch stream, whichever of gRPC's APIs serves it: keeps the latest status and writes it whenever it differs
// from the last one written (one write in flight at a time). End() finishes the stream only after the latest status
// was written: with a write in flight the finish waits for OnWriteDone, which first writes the latest status if it
// still differs (so a shutdown's NOT_SERVING always reaches the client before the stream closes). A subclass moves
// the bytes and reports each write's completion here.
class HealthWatch {
 public:
  explicit HealthWatch(std::string service) : name_(std::move(service)) {}
  virtual ~HealthWatch() = default;

  void Update(ServingStatus status);
  // Finishes the stream once the latest status is written (at once when no write is in flight).
  void End();
  // The write StartWrite began completed (`ok` false: the client is gone).
  void OnWriteDone(bool ok);
  const std::string& name() const { return name_; }

 protected:
  // Before the watch is added (a subclass that learns the name later).
  void set_name(std::string service) { name_ = std::move(service); }
  virtual void StartWrite(const grpc::health::v1::HealthCheckResponse* response) = 0;
  // Once; nothing is written after it.
  virtual void Finish(const grpc::Status& status) = 0;

 private:
  std::string name_;
  convoy::Mutex mu_;
  grpc::health::v1::HealthCheckResponse response_;  // the write in flight
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = grpc::health::v1::HealthCheckResponse::UNKNOWN;
  ServingStatus sent_ ABSL_GUARDED_BY(mu_) = grpc::health::v1::HealthCheckResponse::UNKNOWN;
  bool sent_any_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;    // End() called or the client gone: finish after the last write
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
};

class HealthService final : public grpc::health::v1::Health::CallbackService {
 public:
  // `manager` is not owned and must outlive the service.
  explicit HealthService(repository::ModelManager* manager) : manager_(manager) {}

  // The status of `service`; NOT_FOUND for a name that is neither a health service nor a model.
  absl::StatusOr<ServingStatus> StatusOf(const std::string& service) const;
  // Sends every watcher its status if it changed.
  void Refresh();
  // Sends every Watch its current status, then finishes it after that write completed; later Watch calls finish
  // at once.
  void Shutdown();

  // A Watch call began: sends it its current status and keeps it up to date until RemoveWatch (after shutdown:
  // ends it at once).
  void AddWatch(HealthWatch* watch);
  // Before the watch goes; no Update reaches it after this returns.
  void RemoveWatch(HealthWatch* watch);

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  ServingStatus WatchStatusOf(const std::string& service) const;

  repository::ModelManager* const manager_;
  convoy::Mutex mu_;  // taken before a watcher's own lock
  std::set<HealthWatch*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_HEALTH_SERVICE_H_
