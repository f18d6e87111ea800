// AsyncServer: every RPC of inference.GRPCInferenceService and grpc.health.v1.Health on gRPC's completion-queue API,
// served by one thread of the server's own (`grpc_cq`, as Triton serves its RPCs), with no RPC left on the callback
// API: gRPC 1.51 then starts none of its callback threads (`nexting_thread`), which would otherwise poll the same
// sockets, read a request and hand it over. GrpcServer uses it with --grpc_infer_path=async; docs/server.md says
// when to choose which path, docs/performance.md ("The edge's cost per request") what each costs.
//
// Both services are registered as raw byte-buffer services built from their descriptors; each handler is the one
// the callback path serves (InferenceService::UnaryHandlerOf, StreamInferCall, HealthService's StatusOf and
// HealthWatch), so the answers, errors, limits, deadlines and edge metrics are the same on both paths.
//
// The poller thread waits on the completion queue. A unary call that arrived (with its message read) asks for the
// next call of its method, then runs its handler, which queues it; the completion finishes the call from whichever
// thread it runs on (no hand-off back to the poller), and the poller then sees the send complete and records its
// time (ModelInfer's send phase). Streams (ModelStreamInfer, Watch) read and write through the same queue. A call
// the client cancels or whose deadline passes is seen cancelled (gRPC's AsyncNotifyWhenDone), so a queued request
// leaves the queue without running, as on the callback path.
//
// Shutdown: GrpcServer ends every health Watch, shuts the gRPC server down (its grace for the calls in flight, then
// it cancels them; the calls asked for and not arrived fail), then this: it waits until every call it asked for has
// failed or been finished (a cancelled call's queued request leaves the queue; a running one finishes when its
// batch does), then shuts the completion queue down, drains it and joins. No call is finished after its queue shut
// down.
#ifndef CONVOY_SERVER_GRPC_ASYNC_SERVER_H_
#define CONVOY_SERVER_GRPC_ASYNC_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/completion_queue.h"
#include "grpcpp/impl/service_type.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/support/async_stream.h"
#include "grpcpp/support/async_unary_call.h"
#include "kernels/common/mutex.h"
#include "server/grpc/hand_off.h"
#include "server/grpc/health_service.h"
#include "server/grpc/inference_service.h"

namespace convoy::grpc_server {

// A service registered for the completion-queue API with every method of `descriptor` taking and answering raw
// bytes (no handler: each call is asked for with the Request methods, by the method's index in the proto).
class RawAsyncService final : public grpc::Service {
 public:
  explicit RawAsyncService(const google::protobuf::ServiceDescriptor* descriptor);

  void RequestUnary(int index, grpc::ServerContext* context, grpc::ByteBuffer* request,
                    grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder, grpc::ServerCompletionQueue* cq,
                    void* tag) {
    RequestAsyncUnary(index, context, request, responder, cq, cq, tag);
  }
  void RequestServerStream(int index, grpc::ServerContext* context, grpc::ByteBuffer* request,
                           grpc::ServerAsyncWriter<grpc::ByteBuffer>* writer, grpc::ServerCompletionQueue* cq,
                           void* tag) {
    RequestAsyncServerStreaming(index, context, request, writer, cq, cq, tag);
  }
  void RequestBidi(int index, grpc::ServerContext* context,
                   grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer>* stream,
                   grpc::ServerCompletionQueue* cq, void* tag) {
    RequestAsyncBidiStreaming(index, context, stream, cq, cq, tag);
  }

 private:
  std::vector<std::unique_ptr<std::string>> paths_;  // "/package.Service/Method", as gRPC keeps the pointers
};

class AsyncServer {
 public:
  // Registers both services and adds the completion queue on `builder`; call before its BuildAndStart. `inference`
  // and `health` are not owned and must outlive this.
  AsyncServer(InferenceService* inference, HealthService* health, grpc::ServerBuilder* builder);
  ~AsyncServer();  // Shutdown()

  // Once the server was built and started: asks for the first calls and starts the poller thread.
  void Start();
  // Call after the gRPC server's Shutdown returned (or when it failed to start): waits for the calls still open,
  // shuts the queue down, drains it, joins the thread. Later calls do nothing.
  void Shutdown();

  // Calls the client cancelled (or whose deadline passed) before they were answered, as the poller saw them.
  int64_t cancelled_calls() const { return cancelled_calls_.load(std::memory_order_relaxed); }

 private:
  class Call;
  class UnaryCall;
  class StreamCall;
  class WatchCall;
  // A unary method: where to ask for its calls, and its handler.
  struct UnaryMethod {
    RawAsyncService* service;
    int index;
    absl::string_view name;
    std::function<void(InferenceService::UnaryCall)> handle;
  };
  void Loop();
  // A call asked for (or arrived) opens; it closes when its request fails or once it was finished.
  // False (nothing opened) once Shutdown began.
  bool Open();
  void Close();

  InferenceService* const inference_;
  HealthService* const health_;
  RawAsyncService inference_service_;
  RawAsyncService health_service_;
  std::vector<UnaryMethod> unary_methods_;
  int stream_infer_index_ = -1;
  int watch_index_ = -1;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  std::atomic<int64_t> cancelled_calls_{0};
  convoy::Mutex mu_;
  int64_t open_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ = false;
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_ASYNC_SERVER_H_
