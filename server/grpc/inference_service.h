// InferenceService: inference.GRPCInferenceService (KServe v2 / Triton) on gRPC's callback API: no thread per call
// (ModelInfer, with Options::async_infer, on the completion-queue API instead: async_infer.h).
// Handlers are thin: look the model up in the ModelManager, decode and validate (infer_codec.h), queue on the
// model's batcher, and finish the call from the completion. Errors use canonical codes (NOT_FOUND unknown model or
// version, INVALID_ARGUMENT bad tensors, names or malformed messages, UNAVAILABLE not ready / queue full / shutting
// down, DEADLINE_EXCEEDED, CANCELLED), converted in grpc_status_util.cc. docs/server.md lists every RPC and every
// bad input with its status.
//
// Every method is registered with raw byte buffers and parses its own request: gRPC's callback API answers a
// request it cannot parse with UNIMPLEMENTED and no message, which tells a client nothing. Here a malformed message
// gets INVALID_ARGUMENT naming the message type and its size, and on ModelStreamInfer it is answered inline like any
// other bad request on the stream, which stays open.
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
#include "grpcpp/completion_queue.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "grpcpp/support/byte_buffer.h"
#include "kernels/common/mutex.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/inference/request_view.h"
#include "server/repository/model_manager.h"

namespace convoy::grpc_server {

namespace raw_methods {
using S = inference::GRPCInferenceService;
// Every method of the service with byte-buffer requests and responses (the order does not matter).
using RawService = S::WithRawCallbackMethod_ServerLive<S::WithRawCallbackMethod_ServerReady<
    S::WithRawCallbackMethod_ModelReady<S::WithRawCallbackMethod_ServerMetadata<
        S::WithRawCallbackMethod_ModelMetadata<S::WithRawCallbackMethod_ModelInfer<
            S::WithRawCallbackMethod_ModelStreamInfer<S::WithRawCallbackMethod_ModelConfig<
                S::WithRawCallbackMethod_ModelStatistics<S::WithRawCallbackMethod_RepositoryIndex<
                    S::WithRawCallbackMethod_RepositoryModelLoad<S::WithRawCallbackMethod_RepositoryModelUnload<
                        S::WithRawCallbackMethod_SystemSharedMemoryStatus<
                            S::WithRawCallbackMethod_SystemSharedMemoryRegister<
                                S::WithRawCallbackMethod_SystemSharedMemoryUnregister<
                                    S::WithRawCallbackMethod_CudaSharedMemoryStatus<
                                        S::WithRawCallbackMethod_CudaSharedMemoryRegister<
                                            S::WithRawCallbackMethod_CudaSharedMemoryUnregister<
                                                S::WithRawCallbackMethod_TraceSetting<
                                                    S::WithRawCallbackMethod_LogSettings<S::Service>>>>>>>>>>>>>>>>>>>>;
}  // namespace raw_methods

class InferenceService final : public raw_methods::RawService {
 public:
  struct Options {
    repository::ModelManager* manager = nullptr;  // required; not owned
    std::string server_version = "0.1.0";
    bool on_gpu = false;  // instance_group kind reported by ModelConfig
    // ModelInfer on gRPC's completion-queue API, served by an AsyncInferPoller (async_infer.h) that calls
    // RequestModelInfer, instead of the callback API's ModelInfer below. Every other RPC stays on the callback API.
    bool async_infer = false;
  };
  explicit InferenceService(const Options& options);
  ~InferenceService() override;

  // Decodes `request`, queues it, and calls `done` exactly once: with OK after `response` holds the result, or
  // with the error. `cancelled` is polled while the request waits; `deadline` is the client's. `received` is when
  // the call had the request's bytes, before parsing them (the start of the edge's decode phase in the metrics).
  // `raw`, when given, holds the raw_input_contents in place of the request's (infer_request_wire.h). With
  // `response_bytes`, the response's wire bytes go there, written straight from the output buffers
  // (WriteInferResponse), and `response` gets only the model's name and version.
  void StartInfer(const inference::ModelInferRequest& request, absl::Time received, absl::Time deadline,
                  std::function<bool()> cancelled, inference::ModelInferResponse* response,
                  std::function<void(absl::Status)> done, const std::vector<infer::RawBytes>* raw = nullptr,
                  grpc::ByteBuffer* response_bytes = nullptr);

  // With Options::async_infer: asks for the next ModelInfer call (its request's bytes in `request`), announced on
  // `cq` with `tag`.
  void RequestModelInfer(grpc::ServerContext* context, grpc::ByteBuffer* request,
                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder, grpc::ServerCompletionQueue* cq,
                         void* tag);
  // Records a ModelInfer response's send time (the edge's send phase) for the version that answered, if it is still
  // served.
  void RecordInferSend(const std::string& model, const std::string& version, absl::Duration send);

  using Unary = grpc::ServerUnaryReactor;
  using Context = grpc::CallbackServerContext;
  using Bytes = grpc::ByteBuffer;
  Unary* ServerLive(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ServerReady(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ModelReady(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ServerMetadata(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ModelMetadata(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ModelInfer(Context* context, const Bytes* request, Bytes* response) override;
  grpc::ServerBidiReactor<Bytes, Bytes>* ModelStreamInfer(Context* context) override;
  Unary* ModelConfig(Context* context, const Bytes* request, Bytes* response) override;
  Unary* ModelStatistics(Context* context, const Bytes* request, Bytes* response) override;
  Unary* RepositoryIndex(Context* context, const Bytes* request, Bytes* response) override;
  Unary* RepositoryModelLoad(Context* context, const Bytes* request, Bytes* response) override;
  Unary* RepositoryModelUnload(Context* context, const Bytes* request, Bytes* response) override;
  // Shared memory, trace and log settings: UNIMPLEMENTED, naming the RPC.
  Unary* SystemSharedMemoryStatus(Context* context, const Bytes* request, Bytes* response) override;
  Unary* SystemSharedMemoryRegister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* SystemSharedMemoryUnregister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryStatus(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryRegister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryUnregister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* TraceSetting(Context* context, const Bytes* request, Bytes* response) override;
  Unary* LogSettings(Context* context, const Bytes* request, Bytes* response) override;

 private:
  // The typed handlers: fill the response, return the outcome.
  absl::Status ModelMetadataOf(const inference::ModelMetadataRequest& request,
                               inference::ModelMetadataResponse* response);
  absl::Status StatisticsOf(const inference::ModelStatisticsRequest& request,
                            inference::ModelStatisticsResponse* response);

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
absl::Time DeadlineOf(const grpc::ServerContextBase& context);

// `bytes` parsed as `message`; INVALID_ARGUMENT naming the message type and the size when they are not one.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFERENCE_SERVICE_H_
