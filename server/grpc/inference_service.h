// InferenceService: inference.GRPCInferenceService (KServe v2 / Triton) on gRPC's callback API: no thread per call.
// Handlers are thin: look the model up in the ModelManager, decode and validate (infer_codec.h), queue on the
// model's batcher, and finish the call from the completion. Errors use canonical codes (NOT_FOUND unknown model or
// version, INVALID_ARGUMENT bad tensors, UNAVAILABLE not ready / queue full / shutting down, DEADLINE_EXCEEDED,
// CANCELLED), converted in grpc_status_util.cc. docs/server.md lists every RPC.
//
// Deadlines and cancellation: a request whose client deadline passes or whose call is cancelled while it waits in
// the queue leaves the queue without running. Model control RPCs (load/unload) run on one admin thread so they
// never block gRPC's threads.
#ifndef CONVOY_SERVER_GRPC_INFERENCE_SERVICE_H_
#define CONVOY_SERVER_GRPC_INFERENCE_SERVICE_H_

#include <deque>
#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/time/time.h"
#include "kernels/common/mutex.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/repository/model_manager.h"

namespace convoy::grpc_server {

class InferenceService final : public inference::GRPCInferenceService::CallbackService {
 public:
  struct Options {
    repository::ModelManager* manager = nullptr;  // required; not owned
    std::string server_version = "0.1.0";
    bool on_gpu = false;  // instance_group kind reported by ModelConfig
  };
  explicit InferenceService(const Options& options);
  ~InferenceService() override;

  // Decodes `request`, queues it, and calls `done` exactly once: with OK after `response` holds the result, or
  // with the error. `cancelled` is polled while the request waits; `deadline` is the client's.
  void StartInfer(const inference::ModelInferRequest& request, absl::Time deadline, std::function<bool()> cancelled,
                  inference::ModelInferResponse* response, std::function<void(absl::Status)> done);

  using Unary = grpc::ServerUnaryReactor;
  using Context = grpc::CallbackServerContext;
  Unary* ServerLive(Context* context, const inference::ServerLiveRequest*, inference::ServerLiveResponse*) override;
  Unary* ServerReady(Context* context, const inference::ServerReadyRequest*,
                     inference::ServerReadyResponse*) override;
  Unary* ModelReady(Context* context, const inference::ModelReadyRequest*, inference::ModelReadyResponse*) override;
  Unary* ServerMetadata(Context* context, const inference::ServerMetadataRequest*,
                        inference::ServerMetadataResponse*) override;
  Unary* ModelMetadata(Context* context, const inference::ModelMetadataRequest*,
                       inference::ModelMetadataResponse*) override;
  Unary* ModelInfer(Context* context, const inference::ModelInferRequest*, inference::ModelInferResponse*) override;
  grpc::ServerBidiReactor<inference::ModelInferRequest, inference::ModelStreamInferResponse>* ModelStreamInfer(
      Context* context) override;
  Unary* ModelConfig(Context* context, const inference::ModelConfigRequest*, inference::ModelConfigResponse*) override;
  Unary* ModelStatistics(Context* context, const inference::ModelStatisticsRequest*,
                         inference::ModelStatisticsResponse*) override;
  Unary* RepositoryIndex(Context* context, const inference::RepositoryIndexRequest*,
                         inference::RepositoryIndexResponse*) override;
  Unary* RepositoryModelLoad(Context* context, const inference::RepositoryModelLoadRequest*,
                             inference::RepositoryModelLoadResponse*) override;
  Unary* RepositoryModelUnload(Context* context, const inference::RepositoryModelUnloadRequest*,
                               inference::RepositoryModelUnloadResponse*) override;

 private:
  // Runs `task` on the admin thread (model loads and unloads can take seconds).
  void RunOnAdminThread(std::function<void()> task);
  void AdminLoop();

  const Options options_;
  repository::ModelManager* const manager_;
  convoy::Mutex admin_mu_;
  std::deque<std::function<void()>> admin_tasks_ ABSL_GUARDED_BY(admin_mu_);
  bool admin_stop_ ABSL_GUARDED_BY(admin_mu_) = false;
  std::thread admin_thread_;
};

// A client deadline as absl::Time (InfiniteFuture when the client set none).
absl::Time DeadlineOf(const grpc::CallbackServerContext& context);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFERENCE_SERVICE_H_
