// The protocol-neutral view of one inference request that both edges build: gRPC from a ModelInferRequest
// (server/grpc/infer_codec.h), HTTP/REST from the JSON header and binary body (server/http/). Nothing here owns
// bytes: names, datatypes and raw tensor bytes point into the received message, which must outlive the call that
// decodes the view (DecodeRequest, StartInfer). The view carries what the client said, unchecked; every check
// against the model lives in request_decoder.h, written once for both protocols.
//
//   InputTensorView input;
//   input.name = "images"; input.datatype = "FP32"; input.shape = {1, 3, 224, 224};
//   input.raw = absl::string_view(bytes, size);   // or input.decode = ... (typed values, JSON data)
//   view.inputs.push_back(std::move(input));
#ifndef CONVOY_SERVER_INFERENCE_REQUEST_VIEW_H_
#define CONVOY_SERVER_INFERENCE_REQUEST_VIEW_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/common/tensor.h"
#include "server/runtime/model_signature.h"

namespace convoy::infer {

// A request or output parameter as the client sent it. `integer` is set when the value is an integer (an unsigned
// value above INT64_MAX reads as INT64_MAX); `description` spells the value the way the protocol does, for messages
// ("int64_param -1" over gRPC, "-1" or "\"high\"" over HTTP).
struct ParameterValue {
  std::optional<int64_t> integer;
  std::string description;
};

// A tensor's raw bytes as the protocol received them: one piece, or several when the wire delivered them so (gRPC's
// slices, libevent's buffer chains). The decoder copies them into the batch's input buffer in one pass, so the bytes
// travel once from the received message to the input. The pieces point into the received message, like the rest of
// the view.
class RawBytes {
 public:
  RawBytes() = default;
  RawBytes(absl::string_view bytes) { Append(bytes); }  // NOLINT: one piece converts implicitly

  void Append(absl::string_view piece) {
    if (piece.empty()) return;
    pieces_.push_back(piece);
    size_ += piece.size();
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const std::vector<absl::string_view>& pieces() const { return pieces_; }
  // The bytes as one view when they lie in one piece (or none); nullopt when they are split.
  std::optional<absl::string_view> Contiguous() const {
    if (pieces_.empty()) return absl::string_view();
    if (pieces_.size() == 1) return pieces_[0];
    return std::nullopt;
  }
  // Writes all size() bytes to `out`.
  void CopyTo(char* out) const;
  // The bytes as one string (a copy), for the rare reader that needs them in one piece.
  std::string Flatten() const;
  // `length` bytes from `offset` (both within size()), as the pieces that hold them.
  RawBytes Substr(size_t offset, size_t length) const;

 private:
  std::vector<absl::string_view> pieces_;
  size_t size_ = 0;
};

struct NamedParameter {
  absl::string_view name;
  ParameterValue value;
};

// One input tensor. Its data comes one of two ways:
//  - `raw`: the tensor's bytes, row-major, little-endian (gRPC raw_input_contents, HTTP's binary data extension),
//    in one piece or several; the decoder checks the size against shape x datatype and copies them into the batch's
//    input buffer;
//  - `decode`: called once the name, datatype and shape have been checked, with the model tensor and the element
//    count; it fills `out` (a buffer of count x the datatype's size it allocates) or returns INVALID_ARGUMENT naming
//    the tensor (gRPC typed contents, HTTP JSON `data`). When set it wins over `raw`.
struct InputTensorView {
  absl::string_view name;
  absl::string_view datatype;
  std::vector<int64_t> shape;
  std::optional<RawBytes> raw;
  // BYTES elements the protocol delivered one by one (gRPC contents.bytes_contents, an HTTP photo body); a BYTES
  // input without them reads its elements from `raw` in Triton's wire form (4-byte little-endian length, bytes).
  std::optional<std::vector<absl::string_view>> bytes_elements;
  std::function<absl::Status(const runtime::TensorMetadata& tensor, int64_t elements, HostBuffer* out)> decode;
};

struct RequestedOutputView {
  absl::string_view name;
  std::optional<ParameterValue> classification;  // Triton's classification extension: the top-k classes
};

struct RequestView {
  absl::string_view model;
  absl::string_view version;  // empty: the model's served version
  absl::string_view id;
  std::vector<NamedParameter> parameters;  // priority and timeout are honoured; others are ignored
  std::vector<InputTensorView> inputs;
  std::vector<RequestedOutputView> outputs;  // empty: every output of the model
  // HTTP's photo body (Content-Type image/jpeg or image/png): inputs[0] is that photo, meant for the model's one
  // input that takes photos (the decoder finds it), at batch size 1; and when set, every floating-point output with
  // one value per class answers its top `photo_classification` classes instead of the tensor (0: the tensors).
  bool photo_body = false;
  int64_t photo_classification = 0;
  // How the protocol names its integer parameter kinds in "expected an integer<...>" messages, e.g.
  // " (int64_param or uint64_param)" over gRPC; empty over HTTP.
  absl::string_view integer_kinds;
};

}  // namespace convoy::infer

#endif  // CONVOY_SERVER_INFERENCE_REQUEST_VIEW_H_
