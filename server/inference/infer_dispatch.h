// StartInfer: the one path from a decoded-to-be request to a model's batcher, shared by the gRPC and HTTP edges.
// It looks the model and version up in the ModelManager, decodes the view against the model (request_decoder.h),
// and queues it; `done` is called exactly once, on any thread: with OK and the completed payload, or with the error
// (NOT_FOUND unknown model or version, INVALID_ARGUMENT bad request, UNAVAILABLE not ready / queue full / shutting
// down, DEADLINE_EXCEEDED, CANCELLED) and no model. The view is read only during the call.
//
//   StartInfer(manager, view, deadline, cancelled,
//              [](absl::Status s, const ServedModel* model, const std::vector<RequestedOutput>& outputs,
//                 const InferencePayload* payload) { ... encode with ResponseTensors(*model, outputs, *payload) ... });
#ifndef CONVOY_SERVER_INFERENCE_INFER_DISPATCH_H_
#define CONVOY_SERVER_INFERENCE_INFER_DISPATCH_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "server/inference/request_decoder.h"
#include "server/inference/request_view.h"
#include "server/repository/inference_payload.h"
#include "server/repository/model_manager.h"

namespace convoy::infer {

using InferDone = std::function<void(absl::Status status, const repository::ServedModel* model,
                                     const std::vector<RequestedOutput>& outputs,
                                     const repository::InferencePayload* payload)>;

// `cancelled` is polled while the request waits (may be empty); `deadline` is the client's (InfiniteFuture: none).
// A version retired by a reload between the lookup and the queueing hands the request to its successor (decoded
// again: the new version may have another config).
void StartInfer(repository::ModelManager& manager, const RequestView& request, absl::Time deadline,
                std::function<bool()> cancelled, InferDone done);

}  // namespace convoy::infer

#endif  // CONVOY_SERVER_INFERENCE_INFER_DISPATCH_H_
