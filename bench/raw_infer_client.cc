// raw_infer_client: one KServe v2 inference request, built and serialized once, sent again and again at
// concurrency 1 over gRPC (ModelInfer with the request as pre-serialized bytes) or HTTP/1.1 (the binary tensor data
// extension, the whole request as pre-built bytes in one write), timing each round trip. It measures what the
// server and the transport cost with as little client work as a client can do, to set beside perf_analyzer's
// numbers (which include its own request building and serialization): bench/protocol_compare.py --raw_client.
//
//   raw_infer_client --protocol=grpc --address=127.0.0.1:8001 --model=wire_588k --input=images.raw
//                    --shape=1,3,224,224 --output=logits --output_bytes=4000 --requests=2000
//
// Prints one line: "protocol grpc model wire_588k requests 2000 p50_us ... p90_us ... mean_us ... infer_per_s ...
// client_cpu_us ... client_switches ...", the last two per request over the timed ones (getrusage: the client
// process's user and system time, and its voluntary and involuntary context switches, all threads).
// Every response is checked: a gRPC status or HTTP status other than OK, or an output of another size than
// --output_bytes, ends the run with the reason (exit 1).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/codegen/client_unary_call.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/impl/codegen/rpc_method.h"
#include "kernels/common/status_macros.h"
#include "proto/grpc_service.pb.h"

ABSL_FLAG(std::string, protocol, "grpc", "grpc or http");
ABSL_FLAG(std::string, address, "127.0.0.1:8001", "HOST:PORT of the server's gRPC or HTTP port (IPv4)");
ABSL_FLAG(std::string, model, "wire_588k", "model name");
ABSL_FLAG(std::string, input_name, "images", "the model's input");
ABSL_FLAG(std::string, input, "", "file with the input tensor's raw FP32 bytes");
ABSL_FLAG(std::string, shape, "1,3,224,224", "the input's shape");
ABSL_FLAG(std::string, output, "logits", "the output asked for");
ABSL_FLAG(int64_t, output_bytes, 4000, "the output's expected size in bytes");
ABSL_FLAG(int, requests, 2000, "timed requests");
ABSL_FLAG(int, warmup, 200, "requests before the timed ones");
ABSL_FLAG(bool, serialize_each_request, false,
          "build and serialize the request anew for every call, from the input's bytes (as a client that copies its "
          "tensor into the message does), instead of sending the bytes serialized once");

namespace convoy::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct Request {
  std::string model;
  std::string input_name;
  std::vector<int64_t> shape;
  std::string data;
  std::string output;
  int64_t output_bytes = 0;
};

// Sends the request once per call and checks the answer.
class Sender {
 public:
  virtual ~Sender() = default;
  virtual absl::Status Send() = 0;
};

class GrpcSender final : public Sender {
 public:
  static absl::StatusOr<std::unique_ptr<GrpcSender>> Create(const std::string& address, const Request& request) {
    inference::ModelInferRequest message;
    message.set_model_name(request.model);
    auto* input = message.add_inputs();
    input->set_name(request.input_name);
    input->set_datatype("FP32");
    for (int64_t d : request.shape) input->add_shape(d);
    message.add_outputs()->set_name(request.output);
    message.add_raw_input_contents(request.data);
    std::string bytes = message.SerializeAsString();
    auto sender = std::unique_ptr<GrpcSender>(new GrpcSender(request.output_bytes));
    sender->message_ = std::move(message);
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(-1);
    args.SetMaxSendMessageSize(-1);
    sender->channel_ = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    grpc::Slice slice(bytes);
    sender->request_ = grpc::ByteBuffer(&slice, 1);
    return sender;
  }

  // The request's slices are shared with the call, never copied by this client.
  absl::Status Send() override {
    if (absl::GetFlag(FLAGS_serialize_each_request)) {  // the tensor copied into the message, then serialized
      std::string* raw = message_.mutable_raw_input_contents(0);
      const std::string data = std::move(*raw);
      raw->assign(data);
      request_.Clear();
      bool own_buffer = false;  // serialized as the generated stub does (gRPC's protobuf traits)
      grpc::Status serialized =
          grpc::SerializationTraits<inference::ModelInferRequest>::Serialize(message_, &request_, &own_buffer);
      if (!serialized.ok()) return absl::InternalError(serialized.error_message());
    }
    grpc::ClientContext context;
    grpc::ByteBuffer response;
    grpc::Status status = grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(
        channel_.get(), method_, &context, request_, &response);
    if (!status.ok()) return absl::UnavailableError(absl::StrCat("ModelInfer: ", status.error_message()));
    if (checked_) return absl::OkStatus();
    std::vector<grpc::Slice> slices;
    if (!response.Dump(&slices).ok()) return absl::InternalError("cannot read the response");
    std::string whole;
    for (const grpc::Slice& s : slices) whole.append(reinterpret_cast<const char*>(s.begin()), s.size());
    inference::ModelInferResponse parsed;
    if (!parsed.ParseFromString(whole)) return absl::InternalError("the response is not a ModelInferResponse");
    std::vector<size_t> sizes;
    for (const std::string& raw : parsed.raw_output_contents()) sizes.push_back(raw.size());
    if (sizes.size() != 1 || static_cast<int64_t>(sizes[0]) != output_bytes_) {
      return absl::InternalError(absl::StrCat("unexpected response: expected one raw output of ", output_bytes_,
                                              " bytes, got [", absl::StrJoin(sizes, ","), "]"));
    }
    checked_ = true;
    return absl::OkStatus();
  }

 private:
  explicit GrpcSender(int64_t output_bytes)
      : output_bytes_(output_bytes),
        method_("/inference.GRPCInferenceService/ModelInfer", grpc::internal::RpcMethod::NORMAL_RPC) {}

  const int64_t output_bytes_;
  const grpc::internal::RpcMethod method_;
  inference::ModelInferRequest message_;
  std::shared_ptr<grpc::Channel> channel_;
  grpc::ByteBuffer request_;
  bool checked_ = false;
};

class HttpSender final : public Sender {
 public:
  static absl::StatusOr<std::unique_ptr<HttpSender>> Create(const std::string& address, const Request& request) {
    std::vector<std::string> host_port = absl::StrSplit(address, ':');
    int port = 0;
    if (host_port.size() != 2 || !absl::SimpleAtoi(host_port[1], &port)) {
      return absl::InvalidArgumentError(absl::StrCat("--address: expected HOST:PORT, got '", address, "'"));
    }
    const std::string header = absl::StrCat(
        R"({"inputs":[{"name":")", request.input_name, R"(","shape":[)", absl::StrJoin(request.shape, ","),
        R"(],"datatype":"FP32","parameters":{"binary_data_size":)", request.data.size(), R"(}}],"outputs":[{"name":")",
        request.output, R"(","parameters":{"binary_data":true}}]})");
    auto sender = std::unique_ptr<HttpSender>(new HttpSender(request.output_bytes));
    sender->head_ = absl::StrCat("POST /v2/models/", request.model, "/infer HTTP/1.1\r\nHost: ", address,
                                 "\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length: ",
                                 header.size(), "\r\nContent-Length: ", header.size() + request.data.size(),
                                 "\r\n\r\n", header);
    sender->data_ = request.data;
    sender->request_ = absl::StrCat(sender->head_, sender->data_);
    sender->fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    if (inet_pton(AF_INET, host_port[0].c_str(), &to.sin_addr) != 1 ||
        connect(sender->fd_, reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
      return absl::UnavailableError(absl::StrCat("cannot connect to ", address));
    }
    int one = 1;
    setsockopt(sender->fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return sender;
  }
  ~HttpSender() override {
    if (fd_ >= 0) close(fd_);
  }

  absl::Status Send() override {
    if (absl::GetFlag(FLAGS_serialize_each_request)) {  // the tensor copied behind the headers anew
      request_.clear();
      absl::StrAppend(&request_, head_, data_);
    }
    for (size_t sent = 0; sent < request_.size();) {
      const ssize_t n = write(fd_, request_.data() + sent, request_.size() - sent);
      if (n <= 0) return absl::UnavailableError("the connection closed while sending");
      sent += static_cast<size_t>(n);
    }
    // The response: headers up to the blank line, then Content-Length bytes (kept: the next response follows).
    size_t header_end = std::string::npos;
    while ((header_end = buffer_.find("\r\n\r\n")) == std::string::npos) CONVOY_RETURN_IF_ERROR(ReadMore());
    const std::string head = buffer_.substr(0, header_end);
    if (head.compare(0, 12, "HTTP/1.1 200") != 0) {
      return absl::InternalError(absl::StrCat("HTTP: ", head.substr(0, head.find("\r\n"))));
    }
    const size_t at = head.find("\r\nContent-Length: ");  // not Inference-Header-Content-Length
    size_t length = 0;
    if (at == std::string::npos ||
        !absl::SimpleAtoi(head.substr(at + 18, head.find("\r\n", at + 2) - at - 18), &length)) {
      return absl::InternalError("HTTP: a response without Content-Length");
    }
    const size_t total = header_end + 4 + length;
    while (buffer_.size() < total) CONVOY_RETURN_IF_ERROR(ReadMore());
    // The body: the JSON header (Inference-Header-Content-Length bytes), then the one binary output.
    const size_t json_at = head.find("\r\nInference-Header-Content-Length: ");
    size_t json_length = 0;
    if (json_at == std::string::npos ||
        !absl::SimpleAtoi(head.substr(json_at + 35, head.find("\r\n", json_at + 2) - json_at - 35), &json_length) ||
        json_length > length) {
      return absl::InternalError("unexpected response: no binary output (no Inference-Header-Content-Length)");
    }
    if (static_cast<int64_t>(length - json_length) != output_bytes_) {
      return absl::InternalError(absl::StrCat("unexpected response: expected one binary output of ", output_bytes_,
                                              " bytes, got ", length - json_length));
    }
    buffer_.erase(0, total);
    return absl::OkStatus();
  }

 private:
  explicit HttpSender(int64_t output_bytes) : output_bytes_(output_bytes) {}
  absl::Status ReadMore() {
    char chunk[65536];
    const ssize_t n = read(fd_, chunk, sizeof(chunk));
    if (n <= 0) return absl::UnavailableError("the connection closed while receiving");
    buffer_.append(chunk, static_cast<size_t>(n));
    return absl::OkStatus();
  }

  const int64_t output_bytes_;
  std::string head_;  // request line, headers and the JSON header
  std::string data_;  // the tensor's bytes
  std::string request_;
  std::string buffer_;
  int fd_ = -1;
};

absl::Status Run() {
  Request request;
  request.model = absl::GetFlag(FLAGS_model);
  request.input_name = absl::GetFlag(FLAGS_input_name);
  request.output = absl::GetFlag(FLAGS_output);
  request.output_bytes = absl::GetFlag(FLAGS_output_bytes);
  int64_t elements = 1;
  for (absl::string_view d : absl::StrSplit(absl::GetFlag(FLAGS_shape), ',')) {
    int64_t value = 0;
    if (!absl::SimpleAtoi(d, &value) || value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("--shape: expected positive integers, got '", d, "'"));
    }
    request.shape.push_back(value);
    elements *= value;
  }
  std::ifstream file(absl::GetFlag(FLAGS_input), std::ios::binary);
  request.data.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  if (static_cast<int64_t>(request.data.size()) != elements * 4) {
    return absl::InvalidArgumentError(absl::StrCat("--input: expected ", elements * 4, " bytes for shape [",
                                                   absl::GetFlag(FLAGS_shape), "] FP32, got ", request.data.size()));
  }
  const std::string protocol = absl::GetFlag(FLAGS_protocol);
  std::unique_ptr<Sender> sender;
  if (protocol == "grpc") {
    CONVOY_ASSIGN_OR_RETURN(sender, GrpcSender::Create(absl::GetFlag(FLAGS_address), request));
  } else if (protocol == "http") {
    CONVOY_ASSIGN_OR_RETURN(sender, HttpSender::Create(absl::GetFlag(FLAGS_address), request));
  } else {
    return absl::InvalidArgumentError(absl::StrCat("--protocol: expected grpc or http, got '", protocol, "'"));
  }
  for (int i = 0; i < absl::GetFlag(FLAGS_warmup); ++i) CONVOY_RETURN_IF_ERROR(sender->Send());
  const int n = absl::GetFlag(FLAGS_requests);
  if (n < 1) return absl::InvalidArgumentError("--requests: at least 1");
  std::vector<double> us;
  us.reserve(static_cast<size_t>(n));
  rusage usage_before{};
  getrusage(RUSAGE_SELF, &usage_before);
  const Clock::time_point start = Clock::now();
  for (int i = 0; i < n; ++i) {
    const Clock::time_point sent = Clock::now();
    CONVOY_RETURN_IF_ERROR(sender->Send());
    us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - sent).count());
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  rusage usage_after{};
  getrusage(RUSAGE_SELF, &usage_after);
  const auto cpu_us = [](const rusage& u) {
    return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e6 + u.ru_utime.tv_usec + u.ru_stime.tv_usec;
  };
  const double switches = static_cast<double>(usage_after.ru_nvcsw + usage_after.ru_nivcsw -
                                              usage_before.ru_nvcsw - usage_before.ru_nivcsw);
  double sum = 0;
  for (double x : us) sum += x;
  std::sort(us.begin(), us.end());
  std::printf("protocol %s model %s requests %d p50_us %.1f p90_us %.1f mean_us %.1f infer_per_s %.1f "
              "client_cpu_us %.1f client_switches %.2f\n",
              protocol.c_str(), request.model.c_str(), n, us[us.size() / 2], us[us.size() * 9 / 10], sum / n,
              n / seconds, (cpu_us(usage_after) - cpu_us(usage_before)) / n, switches / n);
  return absl::OkStatus();
}

}  // namespace
}  // namespace convoy::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  absl::Status status = convoy::bench::Run();
  if (!status.ok()) {
    std::fprintf(stderr, "raw_infer_client: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
