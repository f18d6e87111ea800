// ModelInferRequest <-> the protocol-neutral request (server/inference/). ViewOf turns a request into a RequestView
// whose tensor bytes point into the message; the checks against the model are request_decoder.h's, shared with the
// HTTP edge. What is gRPC's own stays here: raw_input_contents against the input count, the typed contents fields
// (fp32_contents, ...), InferParameter spelling in messages, and the response's raw_output_contents.
//
//   RequestView view = ViewOf(request);                          // valid while `request` lives
//   CONVOY_ASSIGN_OR_RETURN(DecodedRequest decoded, DecodeInferRequest(request, served->signature()));
//   CONVOY_RETURN_IF_ERROR(EncodeInferResponse(*served, decoded.outputs, request_id, payload, &response));
//
// The decoder fuzzer (tests/fuzz/infer_request_fuzzer.cc) runs DecodeInferRequest, i.e. this file and the shared
// decoder. Errors are INVALID_ARGUMENT naming the tensor, field or parameter with the expected and the actual value.
#ifndef CONVOY_SERVER_GRPC_INFER_CODEC_H_
#define CONVOY_SERVER_GRPC_INFER_CODEC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/request_decoder.h"
#include "server/inference/request_view.h"
#include "server/repository/inference_payload.h"
#include "server/runtime/model_signature.h"

namespace convoy::repository {
class ServedModel;
}  // namespace convoy::repository

namespace convoy::grpc_server {

using infer::DecodedRequest;
using infer::RequestedOutput;
using infer::TopKClasses;

// The neutral view of `request`; it points into `request`, which must outlive it. Typed contents (and a request
// mixing raw and typed contents) decode through the view's `decode` hook, with gRPC's messages. `raw`, when given,
// holds the request's raw_input_contents (read from the received slices, infer_request_wire.h) in place of the
// message's own; it too must outlive the view.
infer::RequestView ViewOf(const inference::ModelInferRequest& request,
                          const std::vector<infer::RawBytes>* raw = nullptr);

// ViewOf + infer::DecodeRequest, after the gRPC-only check of raw_input_contents against the input count. `raw` as
// for ViewOf.
absl::StatusOr<DecodedRequest> DecodeInferRequest(const inference::ModelInferRequest& request,
                                                  const runtime::ModelSignature& model,
                                                  const std::vector<infer::RawBytes>* raw = nullptr);

// Fills `response` (model name, version, id, outputs as raw_output_contents) from a completed payload.
absl::Status EncodeInferResponse(const repository::ServedModel& model, const std::vector<RequestedOutput>& outputs,
                                 const std::string& request_id, const repository::InferencePayload& payload,
                                 inference::ModelInferResponse* response);

// The response's wire bytes for `tensors` (infer::ResponseTensors of a completed payload), written into the memory
// `allocate(size)` returns (null: RESOURCE_EXHAUSTED): byte for byte what serializing the response
// EncodeInferResponse fills gives, with each output tensor copied once, from the output buffer into those bytes
// (EncodeInferResponse and serialization copy it twice).
absl::Status WriteInferResponse(absl::string_view model_name, int64_t version, const std::string& request_id,
                                const std::vector<infer::ResponseTensor>& tensors,
                                const std::function<char*(size_t)>& allocate);

// Protobuf's base-128 varint (tags and lengths on the wire): its size in bytes, and writing it at `out` (returns the
// byte after it; at most 10 bytes).
size_t VarintSize(uint64_t value);
char* WriteVarint(uint64_t value, char* out);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFER_CODEC_H_
