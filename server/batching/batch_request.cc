// BatchRequest: a request as the dynamic batcher sees it. See batch_request.h.
#include "server/batching/batch_request.h"

#include <cstdlib>

#include "absl/base/internal/raw_logging.h"

namespace convoy::batching {

BatchRequest::BatchRequest(Spec spec, std::unique_ptr<BatchPayload> payload, CompletionCallback on_complete)
    : spec_(std::move(spec)), payload_(std::move(payload)), on_complete_(std::move(on_complete)) {}

void BatchRequest::Complete(absl::Status status) {
  // A second completion is a batcher bug: the client would get two answers or a dangling stream write.
  ABSL_RAW_CHECK(!completed_, "BatchRequest completed twice");
  completed_ = true;
  if (on_complete_) on_complete_(std::move(status));
}

}  // namespace convoy::batching
