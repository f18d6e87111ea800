// KServe v2 HTTP/REST infer requests and responses <-> the protocol-neutral request (server/inference/), with
// Triton's binary tensor data extension. Parsing uses RapidJSON (iterative, so no nesting depth can overflow the
// stack); nothing is checked against the model here beyond the JSON's own shape: the view goes to
// infer::DecodeRequest like a gRPC request's, and JSON `data` is decoded by the view's `decode` hook straight into
// the batch's input buffer once the name, datatype and shape have passed.
//
//   CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<HttpInferRequest> request,
//                           ParseInferRequest(body, header_length, "resnet", ""));
//   infer::StartInfer(manager, request->view, ...);     // request must outlive the call
//   HttpInferResponse response = EncodeInferResponse(*model, *request, tensors);
//
// The request body is the JSON object, or (binary extension) the JSON object of `header_length` bytes
// (Inference-Header-Content-Length) followed by the raw bytes of each input that carries
// parameters.binary_data_size, in input order. Every error is INVALID_ARGUMENT naming the field, the expected and
// the actual value ("inputs[0].shape: expected an array of non-negative integers, got \"abc\"").
#ifndef CONVOY_SERVER_HTTP_INFER_JSON_H_
#define CONVOY_SERVER_HTTP_INFER_JSON_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "rapidjson/document.h"
#include "server/inference/request_decoder.h"
#include "server/inference/request_view.h"

namespace convoy::http {

// A parsed request: the JSON document and the view pointing into it and into the body (which must outlive it).
struct HttpInferRequest {
  rapidjson::Document json;
  std::string model;  // from the URL
  std::string version;
  std::string id;
  infer::RequestView view;
  // Per requested output (view.outputs order), whether to send it as binary data; `binary_default` applies when the
  // request names no outputs (parameters.binary_data_output).
  std::vector<bool> binary_outputs;
  bool binary_default = false;
};

// `header_length`: the Inference-Header-Content-Length value, absent when the header was not sent. `model` and
// `version` come from the URL.
absl::StatusOr<std::unique_ptr<HttpInferRequest>> ParseInferRequest(absl::string_view body,
                                                                    std::optional<size_t> header_length,
                                                                    absl::string_view model,
                                                                    absl::string_view version);

// The same over a body in pieces (libevent's buffer chains): `json` is the body's first `header_length` bytes (all
// of it without one) in one piece, `body` the whole body; binary tensors are views of its pieces (not copied),
// which the decoder copies once into the batch's input buffers. `json` and `body` must outlive the request.
absl::StatusOr<std::unique_ptr<HttpInferRequest>> ParseInferRequest(absl::string_view json,
                                                                    const infer::RawBytes& body,
                                                                    std::optional<size_t> header_length,
                                                                    absl::string_view model,
                                                                    absl::string_view version);

// A response: `body` is the JSON object followed by the binary outputs; `header_length` is the JSON's size when
// any output is binary (sent as Inference-Header-Content-Length), else absent.
struct HttpInferResponse {
  std::string body;
  std::optional<size_t> header_length;
};

// `outputs[i]` answers request output i (request order; every model output when the request named none).
HttpInferResponse EncodeInferResponse(absl::string_view model_name, int64_t model_version,
                                      const HttpInferRequest& request,
                                      const std::vector<infer::ResponseTensor>& outputs);

// The error body: {"error": "<message>"}.
std::string ErrorJson(absl::string_view message);

}  // namespace convoy::http

#endif  // CONVOY_SERVER_HTTP_INFER_JSON_H_
