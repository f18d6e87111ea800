#include "server/grpc/inference_service.h"

#include <chrono>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc/grpc_status_util.h"
#include "server/grpc/infer_codec.h"
#include "server/grpc/model_config_proto.h"

namespace convoy::grpc_server {
namespace {

using repository::InferencePayload;
using repository::ServedModel;

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* context, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

void FillStatistics(const ServedModel& model, inference::ModelStatistics* out) {
  const repository::ModelStats s = model.stats();
  auto duration = [](const repository::DurationStat& d, inference::StatisticDuration* o) {
    o->set_count(d.count);
    o->set_ns(d.ns);
  };
  out->set_name(model.name());
  out->set_version(absl::StrCat(model.version()));
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  inference::InferStatistics* stats = out->mutable_inference_stats();
  duration(s.success, stats->mutable_success());
  duration(s.fail, stats->mutable_fail());
  duration(s.queue, stats->mutable_queue());
  duration(s.compute_input, stats->mutable_compute_input());
  duration(s.compute_infer, stats->mutable_compute_infer());
  duration(s.compute_output, stats->mutable_compute_output());
  for (const auto& [size, batch] : s.batch_stats) {
    inference::InferBatchStatistics* b = out->add_batch_stats();
    b->set_batch_size(static_cast<uint64_t>(size));
    duration(batch.compute_input, b->mutable_compute_input());
    duration(batch.compute_infer, b->mutable_compute_infer());
    duration(batch.compute_output, b->mutable_compute_output());
  }
}

// ModelStreamInfer: reads requests one after another and writes each response when its request completes
// (errors in error_message). The call finishes once the client half-closed and every response was written.
class StreamInferReactor final
    : public grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse> {
 public:
  StreamInferReactor(InferenceService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      {
        convoy::MutexLock lock(&mu_);
        reads_done_ = true;
      }
      MaybeFinish();
      return;
    }
    {
      convoy::MutexLock lock(&mu_);
      ++pending_;
    }
    auto response = std::make_shared<inference::ModelStreamInferResponse>();
    const std::string id = request_.id();
    const std::string model = request_.model_name();
    grpc::CallbackServerContext* context = context_;
    service_->StartInfer(request_, DeadlineOf(*context), [context] { return context->IsCancelled(); },
                         response->mutable_infer_response(), [this, response, id, model](absl::Status status) {
                           if (!status.ok()) {
                             response->clear_infer_response();
                             response->set_error_message(std::string(status.message()));
                             response->mutable_infer_response()->set_id(id);
                             response->mutable_infer_response()->set_model_name(model);
                           }
                           QueueWrite(response);
                         });
    StartRead(&request_);
  }

  void OnWriteDone(bool ok) override {
    std::shared_ptr<inference::ModelStreamInferResponse> next;
    {
      convoy::MutexLock lock(&mu_);
      writes_.pop_front();
      if (!ok) writes_.clear();  // the client is gone: drop what it can no longer read
      if (!writes_.empty()) {
        next = writes_.front();
      } else {
        writing_ = false;
      }
    }
    if (next != nullptr) {
      StartWrite(next.get());
    } else {
      MaybeFinish();
    }
  }

  void OnDone() override { delete this; }

 private:
  void QueueWrite(std::shared_ptr<inference::ModelStreamInferResponse> response) {
    bool start = false;
    {
      convoy::MutexLock lock(&mu_);
      --pending_;
      writes_.push_back(response);
      if (!writing_) writing_ = start = true;
    }
    if (start) StartWrite(response.get());
  }

  void MaybeFinish() {
    {
      convoy::MutexLock lock(&mu_);
      if (!reads_done_ || pending_ > 0 || writing_ || finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  InferenceService* const service_;
  grpc::CallbackServerContext* const context_;
  inference::ModelInferRequest request_;  // reused by each read; decoding copies what it needs
  convoy::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // requests queued, not completed
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<inference::ModelStreamInferResponse>> writes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Time DeadlineOf(const grpc::CallbackServerContext& context) {
  const auto deadline = context.deadline();
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

InferenceService::InferenceService(const Options& options) : options_(options), manager_(options.manager) {
  admin_thread_ = std::thread([this] { AdminLoop(); });
}

InferenceService::~InferenceService() {
  {
    convoy::MutexLock lock(&admin_mu_);
    admin_stop_ = true;
  }
  admin_thread_.join();
}

void InferenceService::RunOnAdminThread(std::function<void()> task) {
  convoy::MutexLock lock(&admin_mu_);
  admin_tasks_.push_back(std::move(task));
}

void InferenceService::AdminLoop() {
  while (true) {
    std::function<void()> task;
    {
      convoy::MutexLock lock(&admin_mu_);
      admin_mu_.Await(absl::Condition(
          +[](InferenceService* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->admin_stop_ || !s->admin_tasks_.empty(); },
          this));
      if (admin_tasks_.empty()) return;
      task = std::move(admin_tasks_.front());
      admin_tasks_.pop_front();
    }
    task();
  }
}

// Looks the model up, decodes against it, and queues; a version retired by a reload between the lookup and the
// queueing hands the request to its successor (decoded again: the new version may have another config).
void InferenceService::StartInfer(const inference::ModelInferRequest& request, absl::Time deadline,
                                  std::function<bool()> cancelled, inference::ModelInferResponse* response,
                                  std::function<void(absl::Status)> done) {
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::shared_ptr<ServedModel>> served =
        manager_->GetServedModel(request.model_name(), request.model_version());
    if (!served.ok()) return done(served.status());
    absl::StatusOr<DecodedRequest> decoded = DecodeInferRequest(request, **served);
    if (!decoded.ok()) {
      (*served)->RecordRejectedRequest(decoded.status());  // a known model and version: counts as its failure
      return done(decoded.status());
    }
    decoded->spec.is_cancelled = [cancelled, deadline] { return cancelled() || absl::Now() >= deadline; };
    if (absl::Now() >= deadline) return done(absl::DeadlineExceededError("the request's deadline has passed"));
    const ServedModel* model = served->get();
    auto on_complete = [model, outputs = decoded->outputs, id = request.id(), response, done](
                           absl::Status status, InferencePayload& payload) {
      if (status.ok()) status = EncodeInferResponse(*model, outputs, id, payload, response);
      done(status);
    };
    absl::Status queued = (*served)->Infer(std::move(decoded->spec), decoded->payload, std::move(on_complete));
    if (queued.ok()) return;
    if (decoded->payload == nullptr || !(*served)->draining()) return done(queued);
  }
  done(absl::UnavailableError(absl::StrCat("model '", request.model_name(), "' is reloading; try again")));
}

grpc::ServerUnaryReactor* InferenceService::ServerLive(Context* context, const inference::ServerLiveRequest*,
                                                       inference::ServerLiveResponse* response) {
  response->set_live(true);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(Context* context, const inference::ServerReadyRequest*,
                                                        inference::ServerReadyResponse* response) {
  response->set_ready(manager_->IsReady());
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelReady(Context* context, const inference::ModelReadyRequest* request,
                                                       inference::ModelReadyResponse* response) {
  response->set_ready(manager_->GetServedModel(request->name(), request->version()).ok());
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(Context* context, const inference::ServerMetadataRequest*,
                                                           inference::ServerMetadataResponse* response) {
  response->set_name("convoy");
  response->set_version(options_.server_version);
  for (const char* extension : {"classification", "model_configuration", "model_repository", "schedule_policy",
                                "statistics"}) {
    response->add_extensions(extension);
  }
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(Context* context,
                                                          const inference::ModelMetadataRequest* request,
                                                          inference::ModelMetadataResponse* response) {
  absl::StatusOr<std::shared_ptr<ServedModel>> served = manager_->GetServedModel(request->name(), request->version());
  if (!served.ok()) return Finish(context, served.status());
  const ServedModel& model = **served;
  response->set_name(model.name());
  for (const auto& other : manager_->ServedModels()) {
    if (other->name() == model.name()) response->add_versions(absl::StrCat(other->version()));
  }
  response->set_platform(PlatformName(model.config()));
  auto fill = [](const runtime::TensorMetadata& t, inference::ModelMetadataResponse::TensorMetadata* out) {
    out->set_name(t.name);
    out->set_datatype(std::string(DataTypeName(t.datatype)));
    for (int64_t d : t.dims) out->add_shape(d);
  };
  for (const auto& t : model.runtime().inputs()) fill(t, response->add_inputs());
  for (const auto& t : model.runtime().outputs()) fill(t, response->add_outputs());
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelInfer(Context* context, const inference::ModelInferRequest* request,
                                                       inference::ModelInferResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  StartInfer(*request, DeadlineOf(*context), [context] { return context->IsCancelled(); }, response,
             [reactor](absl::Status status) { reactor->Finish(ToGrpcStatus(status)); });
  return reactor;
}

grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>*
InferenceService::ModelStreamInfer(Context* context) {
  return new StreamInferReactor(this, context);
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(Context* context, const inference::ModelConfigRequest* request,
                                                        inference::ModelConfigResponse* response) {
  absl::StatusOr<std::shared_ptr<ServedModel>> served = manager_->GetServedModel(request->name(), request->version());
  if (!served.ok()) return Finish(context, served.status());
  *response->mutable_config() = ToModelConfigProto(**served, options_.on_gpu);
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(Context* context,
                                                            const inference::ModelStatisticsRequest* request,
                                                            inference::ModelStatisticsResponse* response) {
  if (!request->name().empty()) {
    absl::StatusOr<std::shared_ptr<ServedModel>> served =
        manager_->GetServedModel(request->name(), request->version());
    if (!served.ok()) return Finish(context, served.status());
  }
  for (const auto& model : manager_->ServedModels()) {
    if (!request->name().empty() && model->name() != request->name()) continue;
    if (!request->version().empty() && absl::StrCat(model->version()) != request->version()) continue;
    FillStatistics(*model, response->add_model_stats());
  }
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(Context* context,
                                                            const inference::RepositoryIndexRequest* request,
                                                            inference::RepositoryIndexResponse* response) {
  for (const repository::ModelVersionStatus& status : manager_->Index()) {
    if (request->ready() && status.state != repository::ModelState::kReady) continue;
    auto* entry = response->add_models();
    entry->set_name(status.model);
    entry->set_version(status.version > 0 ? absl::StrCat(status.version) : "");
    entry->set_state(repository::ModelStateName(status.state));
    entry->set_reason(status.reason);
  }
  return Finish(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(Context* context,
                                                                const inference::RepositoryModelLoadRequest* request,
                                                                inference::RepositoryModelLoadResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunOnAdminThread([this, reactor, model = request->model_name()] {
    reactor->Finish(ToGrpcStatus(manager_->LoadModel(model)));
  });
  return reactor;
}

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(
    Context* context, const inference::RepositoryModelUnloadRequest* request,
    inference::RepositoryModelUnloadResponse*) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  RunOnAdminThread([this, reactor, model = request->model_name()] {
    reactor->Finish(ToGrpcStatus(manager_->UnloadModel(model)));
  });
  return reactor;
}

}  // namespace convoy::grpc_server
