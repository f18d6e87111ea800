#include "server/grpc/health_service.h"

#include <utility>

#include "server/grpc/grpc_status_util.h"
#include "server/grpc/hand_off.h"

namespace convoy::grpc_server {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void HealthWatch::Update(ServingStatus status) {
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

void HealthWatch::End() {
  {
    convoy::MutexLock lock(&mu_);
    if (ending_) return;
    ending_ = true;
    if (writing_) return;  // OnWriteDone finishes
    finished_ = true;
  }
  Finish(grpc::Status::OK);
}

void HealthWatch::OnWriteDone(bool ok) {
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

// A Watch call on the callback API.
class HealthService::Watcher final : public grpc::ServerWriteReactor<HealthCheckResponse>, public HealthWatch {
 public:
  Watcher(HealthService* service, std::string name) : HealthWatch(std::move(name)), service_(service) {}

  void OnWriteDone(bool ok) override {
    hand_off_.Acquire();
    HealthWatch::OnWriteDone(ok);
  }
  void OnCancel() override {
    hand_off_.Acquire();
    End();
  }
  void OnDone() override {
    hand_off_.Acquire();
    service_->RemoveWatch(this);
    delete this;
  }

 private:
  void StartWrite(const HealthCheckResponse* response) override {
    hand_off_.Release();
    ServerWriteReactor::StartWrite(response);
  }
  void Finish(const grpc::Status& status) override {
    hand_off_.Release();
    ServerWriteReactor::Finish(status);
  }

  HealthService* const service_;
  HandOff hand_off_;  // each write and the finish happen before the reaction to them, on gRPC's threads
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
  AddWatch(watcher);
  return watcher;
}

void HealthService::AddWatch(HealthWatch* watch) {
  bool shut_down = false;
  {
    convoy::MutexLock lock(&mu_);
    shut_down = shut_down_;
    if (!shut_down) watchers_.insert(watch);
  }
  if (shut_down) {
    watch->End();
  } else {
    watch->Update(WatchStatusOf(watch->name()));
  }
}

void HealthService::Refresh() {
  convoy::MutexLock lock(&mu_);
  for (HealthWatch* watch : watchers_) watch->Update(WatchStatusOf(watch->name()));
}

void HealthService::Shutdown() {
  convoy::MutexLock lock(&mu_);
  shut_down_ = true;
  for (HealthWatch* watch : watchers_) {
    watch->Update(WatchStatusOf(watch->name()));
    watch->End();
  }
}

void HealthService::RemoveWatch(HealthWatch* watch) {
  convoy::MutexLock lock(&mu_);
  watchers_.erase(watch);
}

}  // namespace convoy::grpc_server
