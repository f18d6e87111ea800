// ModelInferRequest read from the bytes gRPC received, with each raw_input_contents payload left where it lies in
// gRPC's slices: the tensor bytes then travel once, from the slices into the batch's input buffer (the decoder's
// copy), instead of twice (protobuf's copy into a std::string, then the decoder's).
//
// The reader walks the message's top-level fields in the wire format; every field but raw_input_contents (field 7,
// length-delimited) is copied through, in order, to a small buffer that protobuf parses, so names, shapes,
// parameters and typed contents keep protobuf's own semantics (a field repeated or in any order, unknown fields,
// UTF-8 checks). A message the walk finds malformed, or whose raw_input_contents it leaves to protobuf (a tag or
// length in a non-canonical encoding), is parsed whole by protobuf as before, so exactly what protobuf accepts is
// accepted; what it refuses is INVALID_ARGUMENT, "malformed request: the N bytes
// received are not a valid inference.ModelInferRequest" followed by what is wrong and where (the field by name, the
// byte offset, the declared and the remaining length).
//
//   WireInferRequest request;
//   CONVOY_RETURN_IF_ERROR(ParseWireInferRequest(byte_buffer, &request));
//   infer::RequestView view = ViewOf(request.message, &request.raw_input_contents);   // infer_codec.h
#ifndef CONVOY_SERVER_GRPC_INFER_REQUEST_WIRE_H_
#define CONVOY_SERVER_GRPC_INFER_REQUEST_WIRE_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"
#include "proto/grpc_service.pb.h"
#include "server/inference/request_view.h"

namespace convoy::grpc_server {

// Not copied or moved once parsed: raw_input_contents may point into `message`.
struct WireInferRequest {
  WireInferRequest() = default;
  WireInferRequest(const WireInferRequest&) = delete;
  WireInferRequest& operator=(const WireInferRequest&) = delete;

  // Every field but raw_input_contents (which it holds only where the whole message went through protobuf).
  inference::ModelInferRequest message;
  // raw_input_contents in order, each as the pieces of the received slices that hold it.
  std::vector<infer::RawBytes> raw_input_contents;
  std::vector<grpc::Slice> slices;  // the received bytes the pieces point into (references, not copies)
};

// Reads `bytes` (gRPC's received message) into `out`, which holds references to its slices.
absl::Status ParseWireInferRequest(const grpc::ByteBuffer& bytes, WireInferRequest* out);

// The same over the message's bytes in `pieces` (which must outlive `out`'s raw_input_contents).
absl::Status ParseWireInferRequest(absl::Span<const absl::string_view> pieces, WireInferRequest* out);

}  // namespace convoy::grpc_server

#endif  // CONVOY_SERVER_GRPC_INFER_REQUEST_WIRE_H_
