#include "server/inference/infer_dispatch.h"

#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/repository/model_manager_served_model.h"

namespace convoy::infer {

using repository::InferencePayload;
using repository::ServedModel;

void StartInfer(repository::ModelManager& manager, const RequestView& request, absl::Time deadline,
                std::function<bool()> cancelled, InferDone done) {
  const std::vector<RequestedOutput> none;
  for (int attempt = 0; attempt < 3; ++attempt) {
    absl::StatusOr<std::shared_ptr<ServedModel>> served = manager.GetServedModel(request.model, request.version);
    if (!served.ok()) return done(served.status(), nullptr, none, nullptr);
    absl::StatusOr<DecodedRequest> decoded = DecodeRequest(request, (*served)->signature());
    if (!decoded.ok()) {
      (*served)->RecordRejectedRequest(decoded.status());  // a known model and version: counts as its failure
      return done(decoded.status(), nullptr, none, nullptr);
    }
    decoded->spec.is_cancelled = [cancelled, deadline] {
      return (cancelled && cancelled()) || absl::Now() >= deadline;
    };
    if (absl::Now() >= deadline) {
      return done(absl::DeadlineExceededError("the request's deadline has passed"), nullptr, none, nullptr);
    }
    const ServedModel* model = served->get();
    if (decoded->payload != nullptr) decoded->payload->queued_at = absl::Now();
    auto on_complete = [model, outputs = decoded->outputs, done](absl::Status status, InferencePayload& payload) {
      if (status.ok()) return done(status, model, outputs, &payload);
      done(status, nullptr, outputs, nullptr);
    };
    absl::Status queued = (*served)->Infer(std::move(decoded->spec), decoded->payload, std::move(on_complete));
    if (queued.ok()) return;
    if (decoded->payload == nullptr || !(*served)->draining()) return done(queued, nullptr, none, nullptr);
  }
  done(absl::UnavailableError(absl::StrCat("model '", request.model, "' is reloading; try again")), nullptr, none,
       nullptr);
}

}  // namespace convoy::infer
