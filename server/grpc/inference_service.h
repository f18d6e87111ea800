// InferenceService: inference.GRPCInferenceService (KServe v2 / Triton), each RPC's handler written once and served
// on either of gRPC's APIs: the callback API (this class's overrides; no thread per call) or the completion-queue
// API (async_server.h calls UnaryHandlerOf and StreamInferCall directly). Handlers are thin: look the model up in the ModelManager, decode and validate (infer_codec.h), queue on the
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
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "kernels/common/mutex.h"
#include "proto/grpc_service.grpc.pb.h"
#include "server/grpc/hand_off.h"
#include "server/grpc/infer_request_wire.h"
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

  // One unary call as its handler sees it, whichever API serves it. The request's and the response's bytes live
  // until the call is finished.
  struct UnaryCall {
    absl::string_view rpc;  // the method's name ("ModelInfer"); lives as long as the service
    const grpc::ByteBuffer* request = nullptr;
    grpc::ByteBuffer* response = nullptr;
    absl::Time received;  // when the call had its whole message (the start of the edge's decode phase)
    absl::Time deadline;  // the client's (InfiniteFuture when it set none)
    std::function<bool()> cancelled;
    // Called once, from any thread: the call's status (with OK, `response` holds the answer). `on_sent`, when set,
    // gets how long the answer took to send once it was sent.
    std::function<void(const grpc::Status& status, std::function<void(absl::Duration)> on_sent)> finish;
  };
  using UnaryHandler = void (InferenceService::*)(UnaryCall call);
  // The handler of the service's method `index` (the proto's order, as the generated service numbers them); null
  // for ModelStreamInfer (StreamInferCall).
  UnaryHandler UnaryHandlerOf(int index) const;
  // Records a ModelInfer response's send time (the edge's send phase) for the version that answered, if it is still
  // served.
  void RecordInferSend(const std::string& model, const std::string& version, absl::Duration send);

  // The typed handlers of the unary RPCs, as UnaryHandlerOf returns them.
  void HandleServerLive(UnaryCall call);
  void HandleServerReady(UnaryCall call);
  void HandleModelReady(UnaryCall call);
  void HandleServerMetadata(UnaryCall call);
  void HandleModelMetadata(UnaryCall call);
  void HandleModelInfer(UnaryCall call);
  void HandleModelConfig(UnaryCall call);
  void HandleModelStatistics(UnaryCall call);
  void HandleRepositoryIndex(UnaryCall call);
  void HandleRepositoryModelLoad(UnaryCall call);
  void HandleRepositoryModelUnload(UnaryCall call);
  // Shared memory, trace and log settings: UNIMPLEMENTED, naming the RPC.
  void HandleUnimplemented(UnaryCall call);

  // The callback API's overrides: each serves its handler above.
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
  Unary* SystemSharedMemoryStatus(Context* context, const Bytes* request, Bytes* response) override;
  Unary* SystemSharedMemoryRegister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* SystemSharedMemoryUnregister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryStatus(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryRegister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* CudaSharedMemoryUnregister(Context* context, const Bytes* request, Bytes* response) override;
  Unary* TraceSetting(Context* context, const Bytes* request, Bytes* response) override;
  Unary* LogSettings(Context* context, const Bytes* request, Bytes* response) override;

 private:
  // Serves `handler` on the callback API.
  Unary* ServeCallback(Context* context, const Bytes* request, Bytes* response, UnaryHandler handler,
                       absl::string_view rpc);
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

// Times a unary response's send, from the call's finish to gRPC's report that it completed, whichever threads
// those run on: Start (any thread) before the call is finished, Sent once the send completed.
class SendTimer {
 public:
  // `on_sent` (may be empty) gets the send's duration.
  void Start(std::function<void(absl::Duration)> on_sent) {
    on_sent_ = std::move(on_sent);
    started_at_ = absl::Now();
    hand_off_.Release();
  }
  // Calls `on_sent` with the time since Start (nothing when Start got none or was not called).
  void Sent() {
    hand_off_.Acquire();
    if (on_sent_) on_sent_(absl::Now() - started_at_);
  }

 private:
  HandOff hand_off_;  // gRPC orders Start before Sent; this shows ThreadSanitizer that it does
  std::function<void(absl::Duration)> on_sent_;
  absl::Time started_at_;
};

// ModelStreamInfer, whichever API serves it: reads requests one after another and writes each response when its
// request completes (errors, a malformed message included, in error_message with the request's id). The stream
// finishes once the client half-closed and every response was written; a client that goes away cancels the queued
// requests (their cancellation check sees the call cancelled) and the responses it can no longer read are dropped.
// A subclass moves the bytes (one read and one write in flight at most) and reports each completion here.
//
// The bytes travel as in ModelInfer: each request is read from gRPC's slices by the wire reader
// (infer_request_wire.h), its raw_input_contents copied once, into the batch's input buffer; each response's
// ModelInferResponse is written straight from the output buffers and sent behind a small slice holding the
// ModelStreamInferResponse field's tag and length, so it is not copied again.
class StreamInferCall {
 public:
  explicit StreamInferCall(InferenceService* service) : service_(service) {}
  virtual ~StreamInferCall() = default;

  // A read into read_buffer() completed (`ok` false: the client half-closed or is gone). Starts the next read.
  void OnReadDone(bool ok);
  // The write StartWrite began completed.
  void OnWriteDone(bool ok);

 protected:
  grpc::ByteBuffer* read_buffer() { return &read_buffer_; }
  virtual void StartRead(grpc::ByteBuffer* bytes) = 0;
  virtual void StartWrite(const grpc::ByteBuffer* bytes) = 0;
  // Once, after the last read and write completed; nothing is started after it.
  virtual void Finish(const grpc::Status& status) = 0;
  virtual absl::Time deadline() const = 0;
  // True once the client cancelled or went away; any thread.
  virtual bool cancelled() const = 0;

 private:
  struct Answer;
  void Complete(const std::shared_ptr<Answer>& answer, const std::string& id, const std::string& model,
                absl::Status status);
  void QueueWrite(std::shared_ptr<grpc::ByteBuffer> bytes);
  void MaybeFinish();

  InferenceService* const service_;
  grpc::ByteBuffer read_buffer_;
  WireInferRequest request_;  // reused by each read; decoding copies what it needs
  int64_t received_ = 0;      // messages read (only the reaction to a read touches it)
  convoy::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // requests read, responses not yet queued
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<grpc::ByteBuffer>> writes_ ABSL_GUARDED_BY(mu_);
};

// A client deadline as absl::Time (InfiniteFuture when the client set none).
absl::Time DeadlineOf(const grpc::ServerContextBase& context);

// `bytes` parsed as `message`; INVALID_ARGUMENT naming the message type and the size when they are not one.
absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* message);
// `message`'s wire bytes in `bytes`; INTERNAL when it cannot be serialized.
absl::Status SerializeMessage(const google::protobuf::Message& message, grpc::ByteBuffer* bytes);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFERENCE_SERVICE_H_
