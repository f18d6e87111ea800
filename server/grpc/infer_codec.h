// The one place ModelInfer requests are decoded and validated against a model, and responses encoded. The gRPC
// handlers (unary and streaming) call DecodeInferRequest, queue the result on the model, and call
// EncodeInferResponse when it completes.
//
//   CONVOY_ASSIGN_OR_RETURN(DecodedRequest decoded, DecodeInferRequest(request, served->signature()));
//   ... served->Infer(decoded.spec, decoded.payload, done) ...
//   CONVOY_RETURN_IF_ERROR(EncodeInferResponse(*served, decoded.outputs, request_id, payload, &response));
//
// Decoding depends only on the request and the model's signature (server/runtime/model_signature.h), so the
// decoder fuzzer (tests/fuzz/infer_request_fuzzer.cc) runs exactly this code. Errors are INVALID_ARGUMENT naming the
// tensor, field or parameter with the expected and the actual value (datatype, shape, byte size, element count,
// parameter type or range); values the client sent are quoted by repository::QuoteClientString. Nothing any
// request holds (NaN, Inf, zero-size or overflowing shapes, junk bytes, contents of the wrong kind) can crash the
// server, and no input buffer is allocated before the request's sizes have been checked.
#ifndef CONVOY_SERVER_GRPC_INFER_CODEC_H_
#define CONVOY_SERVER_GRPC_INFER_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/grpc_service.pb.h"
#include "server/batching/batch_request.h"
#include "server/repository/inference_payload.h"
#include "server/runtime/model_signature.h"

namespace convoy::repository {
class ServedModel;
}  // namespace convoy::repository

namespace convoy::grpc_server {

// An output the client asked for, by model output index; classification > 0 asks for the top-k classes as
// "score:index:label" BYTES strings instead of the tensor (Triton's classification extension).
struct RequestedOutput {
  size_t index = 0;
  int64_t classification = 0;
};

struct DecodedRequest {
  batching::BatchRequest::Spec spec;  // batch size, priority and timeout; cancellation is the caller's
  std::unique_ptr<repository::InferencePayload> payload;
  std::vector<RequestedOutput> outputs;
};

absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& request,
                                                  const runtime::ModelSignature& model);

// Fills `response` (model name, version, id, outputs as raw_output_contents) from a completed payload.
absl::Status EncodeInferResponse(const repository::ServedModel& model, const std::vector<RequestedOutput>& outputs,
                                 const std::string& request_id, const repository::InferencePayload& payload,
                                 inference::ModelInferResponse* response);

// The top-k entries of `scores` (highest first; NaN ranks lowest) as "score:index:label" (":label" omitted when
// there are no labels), as Triton's classification extension spells them.
std::vector<std::string> TopKClasses(const std::vector<float>& scores, int64_t k,
                                     const std::vector<std::string>& labels);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFER_CODEC_H_
