// HealthService: grpc.health.v1.Health (proto/health.proto), Check and Watch, answered from the ModelManager:
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

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"
#include "proto/health.grpc.pb.h"
#include "server/repository/model_manager.h"

namespace convoy::grpc_server {

using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

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

  grpc::ServerUnaryReactor* Check(grpc::CallbackServerContext* context,
                                  const grpc::health::v1::HealthCheckRequest* request,
                                  grpc::health::v1::HealthCheckResponse* response) override;
  grpc::ServerWriteReactor<grpc::health::v1::HealthCheckResponse>* Watch(
      grpc::CallbackServerContext* context, const grpc::health::v1::HealthCheckRequest* request) override;

 private:
  class Watcher;
  friend class Watcher;
  ServingStatus WatchStatusOf(const std::string& service) const;
  void Unregister(Watcher* watcher);

  repository::ModelManager* const manager_;
  convoy::Mutex mu_;  // taken before a watcher's own lock
  std::set<Watcher*> watchers_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_HEALTH_SERVICE_H_
