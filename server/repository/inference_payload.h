// InferencePayload: one decoded inference request as it travels through a model's batcher: the request decoder
// (server/grpc/infer_codec.h) fills its inputs, the model's executor (ServedModel) fills its outputs and timings.
#ifndef CONVOY_SERVER_REPOSITORY_INFERENCE_PAYLOAD_H_
#define CONVOY_SERVER_REPOSITORY_INFERENCE_PAYLOAD_H_

#include <cstdint>
#include <vector>

#include "absl/time/time.h"
#include "kernels/common/tensor.h"
#include "server/batching/batch_request.h"

namespace convoy::repository {

// A decoded request: its inputs in the model's input order, each batch_size x the input's item bytes in the
// input's datatype. The executor fills `outputs` (model output order) and the timings of the batch it ran in.
struct InferencePayload : public batching::BatchPayload {
  int64_t batch_size = 1;  // 1 for a model without batching
  std::vector<HostBuffer> inputs;
  std::vector<HostBuffer> outputs;
  absl::Duration compute_input = absl::ZeroDuration();
  absl::Duration compute_infer = absl::ZeroDuration();
  absl::Duration compute_output = absl::ZeroDuration();
  absl::Time queued_at = absl::InfinitePast();  // when the request entered the batcher (the edge's decode ends)
};

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_INFERENCE_PAYLOAD_H_
