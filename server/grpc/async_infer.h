// AsyncInferPoller: ModelInfer on gRPC's completion-queue API, served by one thread of the server's own (as Triton
// serves it), while every other RPC stays on the callback API (inference_service.h). GrpcServer uses it with
// --grpc_infer_path=async; docs/server.md says when to choose which path, docs/performance.md ("The edge's cost per
// request") what each costs.
//
// The poller thread waits on the completion queue. A new call: it parses the request (infer_request_wire.h), queues
// it with InferenceService::StartInfer, and asks for the next call. The inference's completion finishes the call
// from whichever thread it runs on (no handoff back to the poller); the poller then sees the send complete and
// records its time (the edge's send phase). A call the client cancels or whose deadline passes is seen cancelled
// (gRPC's AsyncNotifyWhenDone), so a queued request leaves the queue without running, as on the callback path.
//
// Shutdown: GrpcServer shuts the gRPC server down first (its grace for the calls in flight, then it cancels them; the
// calls asked for and not arrived fail), then the poller: it waits until every call it asked for has failed or been
// finished (a cancelled call's queued request leaves the queue; a running one finishes when its batch does), then
// shuts the completion queue down, drains it and joins. No call is finished after its queue shut down.
#ifndef CONVOY_SERVER_GRPC_ASYNC_INFER_H_
#define CONVOY_SERVER_GRPC_ASYNC_INFER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>

#include "grpcpp/completion_queue.h"
#include "kernels/common/mutex.h"
#include "server/grpc/inference_service.h"

namespace convoy::grpc_server {

class AsyncInferPoller {
 public:
  // `service` was built with Options::async_infer and registered on the server `cq` belongs to; not owned.
  AsyncInferPoller(InferenceService* service, std::unique_ptr<grpc::ServerCompletionQueue> cq);
  ~AsyncInferPoller();  // Shutdown()

  // Call after the gRPC server's Shutdown returned: waits for the calls still open, shuts the queue down, drains
  // it, joins the thread. Later calls do nothing.
  void Shutdown();

  // Calls the client cancelled (or whose deadline passed) before they were answered, as the poller saw them.
  int64_t cancelled_calls() const { return cancelled_calls_.load(std::memory_order_relaxed); }

 private:
  class Call;
  void Loop();
  // A call asked for (or arrived) opens; it closes when its request fails or once it was finished.
  // False (nothing opened) once Shutdown began.
  bool Open();
  void Close();

  InferenceService* const service_;
  std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  std::thread thread_;
  std::atomic<int64_t> cancelled_calls_{0};
  convoy::Mutex mu_;
  int64_t open_calls_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ = false;
};

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_ASYNC_INFER_H_
