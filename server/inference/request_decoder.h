// The one place an inference request is validated against a model and its inputs copied into the batch's input
// buffers, for both protocols: each edge builds a RequestView (request_view.h) and calls DecodeRequest; a completed
// payload turns into response tensors through ResponseTensors, which each edge then writes in its own wire form.
//
//   CONVOY_ASSIGN_OR_RETURN(DecodedRequest decoded, DecodeRequest(view, served->signature()));
//   ... served->Infer(decoded.spec, decoded.payload, done) ...
//   CONVOY_ASSIGN_OR_RETURN(std::vector<ResponseTensor> tensors, ResponseTensors(*served, decoded.outputs, payload));
//
// Decoding depends only on the view and the model's signature (server/runtime/model_signature.h), so the decoder
// fuzzers run exactly this code. Errors are INVALID_ARGUMENT naming the tensor, field or parameter with the expected
// and the actual value (datatype, shape, byte size, element count, parameter type or range); values the client sent
// are quoted by repository::QuoteClientString. Nothing a request holds (NaN, Inf, zero-size or overflowing shapes,
// junk bytes, contents of the wrong kind) can crash the server, and no input buffer is allocated before the
// request's sizes have been checked.
#ifndef CONVOY_SERVER_INFERENCE_REQUEST_DECODER_H_
#define CONVOY_SERVER_INFERENCE_REQUEST_DECODER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "server/batching/batch_request.h"
#include "server/inference/request_view.h"
#include "server/repository/inference_payload.h"
#include "server/runtime/model_signature.h"

namespace convoy::repository {
class ServedModel;
}  // namespace convoy::repository

namespace convoy::infer {

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

absl::StatusOr<DecodedRequest> DecodeRequest(const RequestView& request, const runtime::ModelSignature& model);

// One output of a response: a tensor whose `data` points into the payload's output buffer (which must outlive it),
// or for a classification the BYTES entries in `classes` (batch items x k, row-major) and no `data`.
struct ResponseTensor {
  std::string name;
  std::string datatype;
  std::vector<int64_t> shape;
  absl::string_view data;
  bool is_classification = false;
  std::vector<std::string> classes;
};

// BYTES elements in Triton's wire form: each as a 4-byte little-endian length and its bytes.
std::string BytesWireForm(const std::vector<std::string>& elements);

// The requested outputs of a completed payload, in request order. INTERNAL if the model produced the wrong number
// of outputs.
absl::StatusOr<std::vector<ResponseTensor>> ResponseTensors(const repository::ServedModel& model,
                                                            const std::vector<RequestedOutput>& outputs,
                                                            const repository::InferencePayload& payload);

// The top-k entries of `scores` (highest first; NaN ranks lowest) as "score:index:label" (":label" omitted when
// there are no labels), as Triton's classification extension spells them.
std::vector<std::string> TopKClasses(const std::vector<float>& scores, int64_t k,
                                     const std::vector<std::string>& labels);

// A client's shape as messages print it: at most 16 dims, then "...(N dims)".
std::string ShapeString(absl::Span<const int64_t> dims);

}  // namespace convoy::infer

#endif  // CONVOY_SERVER_INFERENCE_REQUEST_DECODER_H_
