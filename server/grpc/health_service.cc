#include "server/grpc/health_service.h"

#include <utility>

#include "server/grpc/grpc_status_util.h"

namespace convoy::grpc_server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

// One Watch call: keeps the latest status and writes it whenever it differs from the last one written (one write
// in flight at a time). End() finishes the stream only after the latest status was written: with a write in flight
// the finish waits for OnWriteDone, which first writes the latest status if it still differs (so a shutdown's
// NOT_SERVING always reaches the client before the stream closes).
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse> {
 public:
  Watcher(HealthService* service, std::string name) : service_(service), name_(std::move(name)) {}

  void Update(ServingStatus status) {
    {
      convoy::MutexLock lock(&mu_);
      if (ending_) return;  // the last status is fixed once End() was called
      latest_ = status;
      if (writing_ || (sent_any_ && sent_ == latest_)) return;
      writing_ = true;
      response_.set_status(latest_);
    }
    StartWrite(&response_);
  }

  // Finishes the stream once the latest status is written (at once when no write is in flight).
  void End() {
    {
      convoy::MutexLock lock(&mu_);
      if (ending_) return;
      ending_ = true;
      if (writing_) return;  // OnWriteDone finishes
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  const std::string& name() const { return name_; }

  void OnWriteDone(bool ok) override {
    bool again = false;
    bool finish = false;
    {
      convoy::MutexLock lock(&mu_);
      sent_ = response_.status();
      sent_any_ = true;
      writing_ = false;
      if (!ok) ending_ = true;  // the client is gone: nothing more can reach it
      if (ok && sent_ != latest_) {
        writing_ = again = true;
        response_.set_status(latest_);
      } else if (ending_ && !finished_) {
        finished_ = finish = true;
      }
    }
    if (again) StartWrite(&response_);
    if (finish) Finish(grpc::Status::OK);
  }

  void OnCancel() override { End(); }

  void OnDone() override {
    service_->Unregister(this);
    delete this;
  }

 private:
  HealthService* const service_;
  const std::string name_;
  convoy::Mutex mu_;
  HealthCheckResponse response_;  // the write in flight
  ServingStatus latest_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  ServingStatus sent_ ABSL_GUARDED_BY(mu_) = HealthCheckResponse::UNKNOWN;
  bool sent_any_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool ending_ ABSL_GUARDED_BY(mu_) = false;    // End() called or the client gone: finish after the last write
  bool finished_ ABSL_GUARDED_BY(mu_) = false;  // Finish() called
};

absl::StatusOr<ServingStatus> HealthService::StatusOf(const std::string& service) const {
  if (service.empty() || service == "liveness") return HealthCheckResponse::SERVING;
  if (service == "readiness") {
    return manager_->IsReady() ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
  }
  absl::StatusOr<bool> ready = manager_->IsModelReady(service);
  if (!ready.ok()) return absl::NotFoundError(absl::StrCat("unknown health service '", service, "'"));
  return *ready ? HealthCheckResponse::SERVING : HealthCheckResponse::NOT_SERVING;
}

ServingStatus HealthService::WatchStatusOf(const std::string& service) const {
  absl::StatusOr<ServingStatus> status = StatusOf(service);
  return status.ok() ? *status : HealthCheckResponse::SERVICE_UNKNOWN;
}

grpc::ServerUnaryReactor* HealthService::Check(grpc::CallbackServerContext* context,
                                               const HealthCheckRequest* request, HealthCheckResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  absl::StatusOr<ServingStatus> status = StatusOf(request->service());
  if (status.ok()) response->set_status(*status);
  reactor->Finish(ToGrpcStatus(status.status()));
  return reactor;
}

grpc::ServerWriteReactor<HealthCheckResponse>* HealthService::Watch(grpc::CallbackServerContext* context,
                                                                    const HealthCheckRequest* request) {
  auto* watcher = new Watcher(this, request->service());
  bool shut_down = false;
  {
    convoy::MutexLock lock(&mu_);
    shut_down = shut_down_;
    if (!shut_down) watchers_.insert(watcher);
  }
  if (shut_down) {
    watcher->End();
  } else {
    watcher->Update(WatchStatusOf(request->service()));
  }
  return watcher;
}

void HealthService::Refresh() {
  convoy::MutexLock lock(&mu_);
  for (Watcher* watcher : watchers_) watcher->Update(WatchStatusOf(watcher->name()));
}

void HealthService::Shutdown() {
  convoy::MutexLock lock(&mu_);
  shut_down_ = true;
  for (Watcher* watcher : watchers_) {
    watcher->Update(WatchStatusOf(watcher->name()));
    watcher->End();
  }
}

void HealthService::Unregister(Watcher* watcher) {
  convoy::MutexLock lock(&mu_);
  watchers_.erase(watcher);
}

}  // namespace convoy::grpc_server
