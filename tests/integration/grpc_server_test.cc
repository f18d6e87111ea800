// The real server in-process (ModelManager + GrpcServer on a loopback ephemeral port) driven through a real gRPC
// channel: every RPC, input errors with exact codes and messages, streaming, health Check/Watch, explicit
// load/unload, poll-mode reload under traffic, deadlines in the queue, overload, and graceful shutdown under load.
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <random>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/impl/client_unary_call.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/forwarding_device.h"
#include "proto/grpc_service.grpc.pb.h"
#include "proto/health.grpc.pb.h"
#include "server/grpc/grpc_server.h"
#include "server/repository/model_manager.h"
#include "tests/integration/test_repository.h"

namespace convoy {
namespace {

using ::convoy::testing::ResnetConfig;
using ::convoy::testing::SimpleCnnConfig;
using ::convoy::testing::TestRepository;
using ::testing::HasSubstr;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

class ServerHarness {
 public:
  ServerHarness(const TestRepository& repo, repository::ModelControlMode mode, Device* device = &CpuDevice::Default(),
                grpc_server::InferPath infer_path = grpc_server::InferPath::kCallback) {
    repository::ModelManager::Options options;
    options.repository_path = repo.path();
    options.control_mode = mode;
    options.device = device;
    options.start_poll_thread = false;
    manager = std::move(repository::ModelManager::Create(options)).value();
    grpc_server::GrpcServer::Options server_options;
    server_options.address = "127.0.0.1:0";
    server_options.manager = manager.get();
    server_options.infer_path = infer_path;
    server = std::move(grpc_server::GrpcServer::Start(server_options)).value();
    channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(server->port()),
                                       grpc::InsecureChannelCredentials());
    stub = inference::GRPCInferenceService::NewStub(channel);
    health = grpc::health::v1::Health::NewStub(channel);
  }
  ~ServerHarness() {
    manager->Shutdown(absl::Now() + absl::Seconds(10)).IgnoreError();
    server->Shutdown(absl::Now() + absl::Seconds(10));
  }

  grpc::Status Infer(const inference::ModelInferRequest& request, inference::ModelInferResponse* response,
                     absl::Duration timeout = absl::Seconds(20)) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    return stub->ModelInfer(&context, request, response);
  }

  // ModelInfer with `bytes` as the request message, whatever they hold.
  grpc::Status InferBytes(const std::string& bytes, grpc::ByteBuffer* response) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(20)));
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    const grpc::internal::RpcMethod method("/inference.GRPCInferenceService/ModelInfer",
                                           grpc::internal::RpcMethod::NORMAL_RPC);
    return grpc::internal::BlockingUnaryCall<grpc::ByteBuffer, grpc::ByteBuffer>(channel.get(), method, &context,
                                                                                 request, response);
  }

  std::unique_ptr<repository::ModelManager> manager;
  std::unique_ptr<grpc_server::GrpcServer> server;
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<inference::GRPCInferenceService::Stub> stub;
  std::unique_ptr<grpc::health::v1::Health::Stub> health;
};

// The CPU device, except that once armed, every batch an executor runs waits at its end (the executor's wait for its
// queue, executor.cc) until the test opens the gate: the test decides how long a batch runs, not the machine's speed (a sanitizer build on a loaded
// machine). The gate also opens after a minute, so a failing test ends instead of hanging.
class GatedCpuDevice : public ForwardingDevice {
 public:
  GatedCpuDevice() : ForwardingDevice(&CpuDevice::Default()) {}
  void Arm() { armed_ = true; }
  void Open() {
    if (!open_.HasBeenNotified()) open_.Notify();
  }
  int64_t batches_held() const { return batches_held_; }

  absl::StatusOr<std::unique_ptr<DeviceQueue>> CreateQueue() override {
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DeviceQueue> queue, inner().CreateQueue());
    return std::unique_ptr<DeviceQueue>(new Queue(std::move(queue), this));
  }

 private:
  class Queue : public DeviceQueue {
   public:
    Queue(std::unique_ptr<DeviceQueue> inner, GatedCpuDevice* device) : inner_(std::move(inner)), device_(device) {}
    ExecutionContext context() const override { return inner_->context(); }
    absl::Status CopyToDevice(void* d, const void* h, size_t n) override { return inner_->CopyToDevice(d, h, n); }
    absl::Status CopyToHost(void* h, const void* d, size_t n) override { return inner_->CopyToHost(h, d, n); }
    absl::Status Synchronize() override {
      if (device_->armed_ && !device_->open_.HasBeenNotified()) {
        ++device_->batches_held_;
        device_->open_.WaitForNotificationWithTimeout(absl::Minutes(1));
      }
      return inner_->Synchronize();
    }

   private:
    std::unique_ptr<DeviceQueue> inner_;
    GatedCpuDevice* device_;
  };

  std::atomic<bool> armed_{false};
  std::atomic<int64_t> batches_held_{0};
  absl::Notification open_;
};

// A request for an image model: `batch` images of [3, side, side] FP32 as raw bytes.
inference::ModelInferRequest ImageRequest(const std::string& model, int64_t batch, int64_t side, float value = 0.5f) {
  inference::ModelInferRequest request;
  request.set_model_name(model);
  auto* input = request.add_inputs();
  input->set_name("images");
  input->set_datatype("FP32");
  for (int64_t d : {batch, int64_t{3}, side, side}) input->add_shape(d);
  std::vector<float> data(static_cast<size_t>(batch * 3 * side * side), value);
  request.add_raw_input_contents(std::string(reinterpret_cast<const char*>(data.data()), data.size() * 4));
  return request;
}

template <typename Call>
grpc::Status Unary(Call call) {
  grpc::ClientContext context;
  return call(&context);
}

// Every test that serves an RPC runs on both paths (--grpc_infer_path): the callback API, and every RPC on the
// server's completion queue.
class GrpcInferPathTest : public ::testing::TestWithParam<grpc_server::InferPath> {};
INSTANTIATE_TEST_SUITE_P(BothPaths, GrpcInferPathTest,
                         ::testing::Values(grpc_server::InferPath::kAsync, grpc_server::InferPath::kCallback),
                         [](const ::testing::TestParamInfo<grpc_server::InferPath>& info) {
                           return info.param == grpc_server::InferPath::kAsync ? "Async" : "Callback";
                         });

TEST_P(GrpcInferPathTest, MetadataConfigIndexAndInference) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  repo.AddBroken("broken");
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());

  inference::ServerLiveResponse live;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ServerLive(c, {}, &live); }).ok());
  EXPECT_TRUE(live.live());
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ServerReady(c, {}, &ready); }).ok());
  EXPECT_FALSE(ready.ready());  // strict readiness: "broken" is UNAVAILABLE
  inference::ModelReadyRequest model_ready_request;
  model_ready_request.set_name("cnn");
  inference::ModelReadyResponse model_ready;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ModelReady(c, model_ready_request, &model_ready); }).ok());
  EXPECT_TRUE(model_ready.ready());

  inference::ServerMetadataResponse server_metadata;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ServerMetadata(c, {}, &server_metadata); }).ok());
  EXPECT_EQ(server_metadata.name(), "convoy");
  EXPECT_THAT(server_metadata.extensions(), ::testing::Contains("classification"));

  inference::ModelMetadataRequest metadata_request;
  metadata_request.set_name("cnn");
  inference::ModelMetadataResponse metadata;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ModelMetadata(c, metadata_request, &metadata); }).ok());
  ASSERT_EQ(metadata.inputs_size(), 1);
  EXPECT_THAT(metadata.inputs(0).shape(), ::testing::ElementsAre(-1, 3, 32, 32));
  EXPECT_EQ(metadata.outputs(0).datatype(), "FP32");

  inference::ModelConfigRequest config_request;
  config_request.set_name("cnn");
  inference::ModelConfigResponse config;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ModelConfig(c, config_request, &config); }).ok());
  EXPECT_EQ(config.config().max_batch_size(), 8);
  EXPECT_EQ(config.config().dynamic_batching().max_queue_delay_microseconds(), 500u);
  EXPECT_THAT(config.config().input(0).dims(), ::testing::ElementsAre(3, 32, 32));

  inference::RepositoryIndexResponse index;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->RepositoryIndex(c, {}, &index); }).ok());
  ASSERT_EQ(index.models_size(), 2);
  EXPECT_EQ(index.models(0).name(), "broken");
  EXPECT_EQ(index.models(0).state(), "UNAVAILABLE");
  EXPECT_THAT(index.models(0).reason(), HasSubstr("max_batch_size"));
  EXPECT_EQ(index.models(1).state(), "READY");

  // Raw and typed contents give the same answer; the id is echoed; classification gives labelled top-k.
  inference::ModelInferRequest raw = ImageRequest("cnn", 2, 32);
  raw.set_id("req-7");
  inference::ModelInferResponse raw_response;
  ASSERT_TRUE(h.Infer(raw, &raw_response).ok());
  EXPECT_EQ(raw_response.id(), "req-7");
  EXPECT_THAT(raw_response.outputs(0).shape(), ::testing::ElementsAre(2, 10));
  ASSERT_EQ(raw_response.raw_output_contents(0).size(), 2u * 10 * 4);
  inference::ModelInferRequest typed = raw;
  typed.clear_raw_input_contents();
  for (int i = 0; i < 2 * 3 * 32 * 32; ++i) typed.mutable_inputs(0)->mutable_contents()->add_fp32_contents(0.5f);
  inference::ModelInferResponse typed_response;
  ASSERT_TRUE(h.Infer(typed, &typed_response).ok());
  EXPECT_EQ(typed_response.raw_output_contents(0), raw_response.raw_output_contents(0));
  inference::ModelInferRequest classify = raw;
  auto* output = classify.add_outputs();
  output->set_name("probabilities");
  (*output->mutable_parameters())["classification"].set_int64_param(3);
  inference::ModelInferResponse classes;
  ASSERT_TRUE(h.Infer(classify, &classes).ok());
  EXPECT_EQ(classes.outputs(0).datatype(), "BYTES");
  EXPECT_THAT(classes.outputs(0).shape(), ::testing::ElementsAre(2, 3));
  EXPECT_THAT(classes.raw_output_contents(0), HasSubstr(":class_"));

  inference::ModelStatisticsRequest stats_request;
  stats_request.set_name("cnn");
  inference::ModelStatisticsResponse stats;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->ModelStatistics(c, stats_request, &stats); }).ok());
  ASSERT_EQ(stats.model_stats_size(), 1);
  EXPECT_EQ(stats.model_stats(0).inference_count(), 6u);
  EXPECT_EQ(stats.model_stats(0).inference_stats().success().count(), 3u);
}

TEST_P(GrpcInferPathTest, InvalidRequestsGetExactCodesAndMessages) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  repo.AddBroken("broken");
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());
  struct Case {
    std::string what;
    inference::ModelInferRequest request;
    grpc::StatusCode code;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({"unknown model", ImageRequest("nope", 1, 32), grpc::NOT_FOUND, "unknown model 'nope'"});
  Case version{"unknown version", ImageRequest("cnn", 1, 32), grpc::NOT_FOUND, "has no version '9'"};
  version.request.set_model_version("9");
  cases.push_back(version);
  cases.push_back({"broken model", ImageRequest("broken", 1, 32), grpc::UNAVAILABLE, "model 'broken' is not ready"});
  Case dtype{"datatype", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT,
             "input 'images': expected datatype FP32, got 'FP16'"};
  dtype.request.mutable_inputs(0)->set_datatype("FP16");
  cases.push_back(dtype);
  Case bytes{"byte size", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT,
             "input 'images': expected 12288 bytes for shape [1,3,32,32] FP32, got 12284"};
  bytes.request.mutable_raw_input_contents(0)->resize(12284);
  cases.push_back(bytes);
  cases.push_back({"shape", ImageRequest("cnn", 1, 31), grpc::INVALID_ARGUMENT,
                   "input 'images': expected shape [-1,3,32,32], got [1,3,31,31]"});
  cases.push_back({"batch too big", ImageRequest("cnn", 9, 32), grpc::INVALID_ARGUMENT, "batch size 9 is outside 1..8"});
  cases.push_back({"zero batch", ImageRequest("cnn", 0, 32), grpc::INVALID_ARGUMENT, "batch size 0 is outside 1..8"});
  Case missing{"missing input", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT, "missing input 'images'"};
  missing.request.clear_inputs();
  missing.request.clear_raw_input_contents();
  cases.push_back(missing);
  Case extra{"extra input", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT, "unexpected input 'extra'"};
  *extra.request.add_inputs() = extra.request.inputs(0);
  extra.request.mutable_inputs(1)->set_name("extra");
  extra.request.add_raw_input_contents(extra.request.raw_input_contents(0));
  cases.push_back(extra);
  Case output{"unknown output", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT, "unexpected output 'nope'"};
  output.request.add_outputs()->set_name("nope");
  cases.push_back(output);
  Case priority{"priority", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT, "parameter 'priority'"};
  (*priority.request.mutable_parameters())["priority"].set_string_param("high");
  cases.push_back(priority);
  Case raw_count{"raw_input_contents count", ImageRequest("cnn", 1, 32), grpc::INVALID_ARGUMENT,
                 "the request has 1 inputs and 2 raw_input_contents"};
  raw_count.request.add_raw_input_contents("x");
  cases.push_back(raw_count);
  for (const Case& c : cases) {
    inference::ModelInferResponse response;
    grpc::Status status = h.Infer(c.request, &response);
    EXPECT_EQ(status.error_code(), c.code) << c.what << ": " << status.error_message();
    EXPECT_THAT(status.error_message(), HasSubstr(c.message)) << c.what;
  }
  // A message that is not a ModelInferRequest: INVALID_ARGUMENT naming the field and where it breaks. Field 7
  // (raw_input_contents) declares 100 bytes and 3 follow.
  grpc::ByteBuffer bytes_response;
  grpc::Status malformed = h.InferBytes(std::string("\x3a\x64xyz", 5), &bytes_response);
  EXPECT_EQ(malformed.error_code(), grpc::INVALID_ARGUMENT) << malformed.error_message();
  EXPECT_THAT(malformed.error_message(), HasSubstr("field 7 (raw_input_contents) at byte 0 declares 100 bytes, 3 remain"));
  // A message over the server's limit: refused by gRPC before it reaches the service.
  grpc::Status too_big = h.InferBytes(std::string((64 << 20) + 1, 'x'), &bytes_response);
  EXPECT_EQ(too_big.error_code(), grpc::RESOURCE_EXHAUSTED) << too_big.error_message();
  // NaN and Inf are data, not errors.
  inference::ModelInferResponse response;
  EXPECT_TRUE(h.Infer(ImageRequest("cnn", 1, 32, std::numeric_limits<float>::quiet_NaN()), &response).ok());
  EXPECT_TRUE(h.Infer(ImageRequest("cnn", 1, 32, std::numeric_limits<float>::infinity()), &response).ok());
}

TEST_P(GrpcInferPathTest, StreamAnswersEveryRequestAndReportsErrorsInline) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());
  grpc::ClientContext context;
  auto stream = h.stub->ModelStreamInfer(&context);
  for (int i = 0; i < 4; ++i) {
    inference::ModelInferRequest request = ImageRequest(i == 2 ? "nope" : "cnn", 1, 32);
    request.set_id("s" + std::to_string(i));
    ASSERT_TRUE(stream->Write(request));
  }
  stream->WritesDone();
  std::vector<std::string> ok_ids, errors;
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) {
    if (response.error_message().empty()) {
      ok_ids.push_back(response.infer_response().id());
    } else {
      errors.push_back(response.error_message());
    }
  }
  EXPECT_TRUE(stream->Finish().ok());
  EXPECT_THAT(ok_ids, ::testing::UnorderedElementsAre("s0", "s1", "s3"));
  EXPECT_THAT(errors, ::testing::ElementsAre(HasSubstr("unknown model 'nope'")));
}

// The stream's requests go through the wire reader and its responses are written from the output buffers behind
// a tag-and-length slice: on fresh random images (the ResNet's 588 KiB request spans many of gRPC's slices), each
// stream answer is the unary answer for the same request, field for field and byte for byte (neither model batches,
// so each request runs alone at its own batch size both ways).
TEST_P(GrpcInferPathTest, StreamAnswersEqualUnaryAnswers) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn", 8, ""));  // no batching: each request runs alone both ways
  repo.AddResnet("resnet", ResnetConfig("resnet", ""));
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<inference::ModelInferRequest> requests;
  for (const auto& [model, side, batch] : std::vector<std::tuple<std::string, int64_t, int64_t>>{
           {"cnn", 32, 1}, {"resnet", 224, 1}, {"cnn", 32, 3}}) {
    inference::ModelInferRequest request = ImageRequest(model, batch, side);
    std::string& raw = *request.mutable_raw_input_contents(0);
    for (size_t i = 0; i < raw.size(); i += sizeof(float)) {
      const float value = uniform(rng);
      std::memcpy(&raw[i], &value, sizeof(float));
    }
    request.set_id("q" + std::to_string(requests.size()));
    requests.push_back(std::move(request));
  }
  std::map<std::string, inference::ModelInferResponse> unary;
  for (const auto& request : requests) {
    ASSERT_TRUE(h.Infer(request, &unary[request.id()]).ok()) << request.id();
  }
  grpc::ClientContext context;
  auto stream = h.stub->ModelStreamInfer(&context);
  for (const auto& request : requests) ASSERT_TRUE(stream->Write(request));
  stream->WritesDone();
  std::map<std::string, inference::ModelInferResponse> streamed;
  inference::ModelStreamInferResponse response;
  while (stream->Read(&response)) {
    EXPECT_EQ(response.error_message(), "");
    streamed[response.infer_response().id()] = response.infer_response();
  }
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(streamed.size(), requests.size());
  for (const auto& [id, want] : unary) {
    ASSERT_EQ(streamed.count(id), 1u) << id;
    const inference::ModelInferResponse& got = streamed[id];
    EXPECT_EQ(got.SerializeAsString(), want.SerializeAsString()) << id;
    ASSERT_EQ(got.raw_output_contents_size(), 1) << id;
    EXPECT_GT(got.raw_output_contents(0).size(), 0u) << id;
  }
}

TEST_P(GrpcInferPathTest, HealthCheckAndWatchFollowTheModels) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());
  auto check = [&](const std::string& service, HealthCheckResponse* response) {
    grpc::ClientContext context;
    HealthCheckRequest request;
    request.set_service(service);
    return h.health->Check(&context, request, response);
  };
  HealthCheckResponse response;
  for (const char* service : {"", "liveness", "readiness", "cnn"}) {
    ASSERT_TRUE(check(service, &response).ok()) << service;
    EXPECT_EQ(response.status(), HealthCheckResponse::SERVING) << service;
  }
  EXPECT_EQ(check("nope", &response).error_code(), grpc::NOT_FOUND);

  grpc::ClientContext watch_context;
  HealthCheckRequest watch_request;
  watch_request.set_service("readiness");
  auto watch = h.health->Watch(&watch_context, watch_request);
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  grpc::ClientContext unknown_context;
  watch_request.set_service("nope");
  auto unknown = h.health->Watch(&unknown_context, watch_request);
  ASSERT_TRUE(unknown->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVICE_UNKNOWN);
  unknown_context.TryCancel();

  std::thread stop([&] { h.manager->Shutdown(absl::Now() + absl::Seconds(5)).IgnoreError(); });
  ASSERT_TRUE(watch->Read(&response));
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  stop.join();
  ASSERT_TRUE(check("readiness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::NOT_SERVING);
  ASSERT_TRUE(check("liveness", &response).ok());
  EXPECT_EQ(response.status(), HealthCheckResponse::SERVING);
  inference::ModelInferResponse infer;
  EXPECT_EQ(h.Infer(ImageRequest("cnn", 1, 32), &infer).error_code(), grpc::UNAVAILABLE);
  watch_context.TryCancel();
}

TEST_P(GrpcInferPathTest, ExplicitLoadAndUnload) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  ServerHarness h(repo, repository::ModelControlMode::kExplicit, &CpuDevice::Default(), GetParam());
  inference::ModelInferResponse infer;
  EXPECT_EQ(h.Infer(ImageRequest("cnn", 1, 32), &infer).error_code(), grpc::UNAVAILABLE);
  inference::RepositoryModelLoadRequest load;
  load.set_model_name("cnn");
  inference::RepositoryModelLoadResponse loaded;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->RepositoryModelLoad(c, load, &loaded); }).ok());
  EXPECT_TRUE(h.Infer(ImageRequest("cnn", 1, 32), &infer).ok());
  load.set_model_name("nope");
  EXPECT_EQ(Unary([&](auto* c) { return h.stub->RepositoryModelLoad(c, load, &loaded); }).error_code(),
            grpc::NOT_FOUND);
  inference::RepositoryModelUnloadRequest unload;
  unload.set_model_name("cnn");
  inference::RepositoryModelUnloadResponse unloaded;
  ASSERT_TRUE(Unary([&](auto* c) { return h.stub->RepositoryModelUnload(c, unload, &unloaded); }).ok());
  grpc::Status after = h.Infer(ImageRequest("cnn", 1, 32), &infer);
  EXPECT_EQ(after.error_code(), grpc::UNAVAILABLE);
  EXPECT_THAT(after.error_message(), HasSubstr("unloaded"));
}

TEST_P(GrpcInferPathTest, PollReloadDropsNoRequest) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  ServerHarness h(repo, repository::ModelControlMode::kPoll, &CpuDevice::Default(), GetParam());
  std::atomic<bool> stop{false};
  std::atomic<int> ok{0}, failed{0};
  std::vector<std::thread> clients;
  for (int t = 0; t < 3; ++t) {
    clients.emplace_back([&] {
      while (!stop) {
        inference::ModelInferResponse response;
        grpc::Status status = h.Infer(ImageRequest("cnn", 1, 32), &response);
        (status.ok() ? ok : failed)++;
        if (!status.ok()) ADD_FAILURE() << status.error_message();
      }
    });
  }
  for (int reload = 0; reload < 3; ++reload) {
    // Traffic between reloads: wait (on the counter, not a guessed time) until the clients got 10 more answers.
    const int before = ok.load() + failed.load();
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (ok.load() + failed.load() < before + 10 && absl::Now() < deadline) std::this_thread::yield();
    ASSERT_GE(ok.load() + failed.load(), before + 10) << "the clients stalled";
    repo.WriteConfig("cnn", SimpleCnnConfig("cnn", 4 + reload));
    ASSERT_TRUE(h.manager->Poll().ok());
    EXPECT_EQ(h.manager->GetServedModel("cnn", "").value()->config().max_batch_size, 4 + reload);
  }
  stop = true;
  for (std::thread& client : clients) client.join();
  EXPECT_GT(ok.load(), 10);
  EXPECT_EQ(failed.load(), 0);
}

// Waits (up to 30 s) until `ready` holds for the model's batcher counters; false on time-out.
bool WaitForBatcher(ServerHarness& h, const std::string& model,
                    const std::function<bool(const batching::BatcherStats&)>& ready) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    absl::StatusOr<std::shared_ptr<repository::ServedModel>> served = h.manager->GetServedModel(model, "");
    if (served.ok() && ready((*served)->batcher_stats())) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return false;
}

// A batch of 16 held at the gated device's gate keeps resnet_classifier's one instance busy while later requests
// wait in the queue, however fast or slow the machine. The test waits on the batcher's counters and the clients'
// answers, never on a guessed sleep.
TEST_P(GrpcInferPathTest, DeadlineExpiredInQueueNeverRunsAndFullQueueRejectsFast) {
  TestRepository repo;
  repo.AddResnet("resnet", ResnetConfig("resnet", "dynamic_batching:\n  max_queue_delay_microseconds: 100\n"
                                                  "  default_queue_policy:\n    max_queue_size: 2\n"));
  GatedCpuDevice device;
  ServerHarness h(repo, repository::ModelControlMode::kNone, &device, GetParam());
  absl::Cleanup open_gate = [&] { device.Open(); };  // before the harness shuts down, whatever fails
  device.Arm();
  auto batcher_stats = [&] { return h.manager->GetServedModel("resnet", "").value()->batcher_stats(); };
  std::atomic<bool> busy_done{false};
  std::thread busy([&] {
    inference::ModelInferResponse response;
    grpc::Status status = h.Infer(ImageRequest("resnet", 16, 224), &response, absl::Minutes(2));
    EXPECT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
    busy_done = true;
  });
  // The batch of 16 runs until the gate opens: the only instance is busy, so nothing leaves the queue.
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) {
    return s.running_batches == 1 && device.batches_held() == 1;
  })) << "the batch of 16 never reached the gate";
  // A request whose deadline passes while it waits in the queue. Its deadline is long enough for any machine to
  // receive and queue it first (a deadline already past on arrival is refused at the door and never queued, which is
  // another path); the test waits for it to be queued, then for the client to see the deadline pass. The gate holds
  // the instance for as long as that takes.
  grpc::Status expired;
  std::thread expiring([&] {
    inference::ModelInferResponse response;
    expired = h.Infer(ImageRequest("resnet", 1, 224), &response, absl::Seconds(2));
  });
  const bool queued =
      WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) { return s.pending_requests == 1; });
  expiring.join();
  ASSERT_TRUE(queued) << "the expiring request was never queued";
  EXPECT_EQ(expired.error_code(), grpc::DEADLINE_EXCEEDED) << expired.error_message();
  ASSERT_EQ(batcher_stats().pending_requests, 1) << "the expired request must still hold its queue slot";
  // The expired request holds one of the two queue slots until the instance next sweeps the queue (after the batch
  // of 16), so of six more requests one is admitted and five are refused at once: refused while the batch of 16
  // still runs, which is what "at once" means whatever the machine's speed.
  std::atomic<int> ok{0}, unavailable{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      inference::ModelInferResponse r;
      grpc::Status status = h.Infer(ImageRequest("resnet", 1, 224), &r, absl::Minutes(2));
      if (status.ok()) ++ok;
      if (status.error_code() == grpc::UNAVAILABLE) {
        EXPECT_FALSE(busy_done) << "a refusal waited for the running batch";
        EXPECT_THAT(status.error_message(), HasSubstr("queue is full (2 of 2 requests queued)"));
        ++unavailable;
      }
    });
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  while (unavailable.load() < 5 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(unavailable.load(), 5) << "the refusals did not come back while the batch of 16 was held";
  EXPECT_EQ(batcher_stats().running_batches, 1);
  EXPECT_EQ(batcher_stats().pending_requests, 2);  // the expired request and the admitted one
  EXPECT_FALSE(busy_done);
  device.Open();
  for (std::thread& client : clients) client.join();
  busy.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(unavailable.load(), 5);
  const repository::ModelStats stats = h.manager->GetServedModel("resnet", "").value()->stats();
  EXPECT_EQ(stats.inference_count, 17u);  // the batch of 16 and the admitted request; the expired one never ran
  EXPECT_EQ(device.batches_held(), 1);
}

// The first batch is held at the gated device's gate until the shutdown has begun, so every request is in the
// server (one batch running, the rest queued) when it starts, however fast or slow the machine.
TEST_P(GrpcInferPathTest, GracefulShutdownFinishesEveryAcceptedRequest) {
  TestRepository repo;
  repo.AddResnet("resnet", ResnetConfig("resnet", "dynamic_batching:\n  max_queue_delay_microseconds: 100\n"));
  GatedCpuDevice device;
  ServerHarness h(repo, repository::ModelControlMode::kNone, &device, GetParam());
  absl::Cleanup open_gate = [&] { device.Open(); };  // before the harness shuts down, whatever fails
  device.Arm();
  std::atomic<int> ok{0}, refused{0}, failed{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 6; ++i) {
    clients.emplace_back([&] {
      inference::ModelInferResponse r;
      grpc::Status status = h.Infer(ImageRequest("resnet", 4, 224), &r, absl::Minutes(2));
      if (status.ok()) {
        ++ok;
      } else if (status.error_code() == grpc::UNAVAILABLE && absl::StrContains(status.error_message(), "shutting")) {
        ++refused;  // arrived after shutdown began: refused, never dropped
      } else {
        ++failed;
        ADD_FAILURE() << status.error_message();
      }
    });
  }
  // Shut down once every request is in the server: the first batch held at the gate, the rest queued behind it.
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) {
    return s.pending_requests + s.dispatched_requests == 6 && s.pending_requests > 0 && device.batches_held() == 1;
  })) << "the six requests never were all in the server at once";
  absl::Status drained;
  std::thread shutdown([&] { drained = h.manager->Shutdown(absl::Now() + absl::Seconds(60)); });
  // The gate opens only once the shutdown has begun: the queued requests are then drained, not refused.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (!h.manager->shutting_down() && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_TRUE(h.manager->shutting_down());
  device.Open();
  shutdown.join();
  ASSERT_TRUE(drained.ok()) << drained;
  h.server->Shutdown(absl::Now() + absl::Seconds(20));
  for (std::thread& client : clients) client.join();
  // All six were accepted before the shutdown began: every one must succeed, none may be refused.
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(ok.load(), 6);
}

// Many clients at once, each request answered with its own result: the answers match those of the same requests
// sent one at a time.
TEST_P(GrpcInferPathTest, ConcurrentRequestsGetTheirOwnAnswers) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  ServerHarness h(repo, repository::ModelControlMode::kNone, &CpuDevice::Default(), GetParam());
  constexpr int kValues = 4;
  std::vector<std::string> expected(kValues);
  for (int v = 0; v < kValues; ++v) {
    inference::ModelInferResponse response;
    ASSERT_TRUE(h.Infer(ImageRequest("cnn", 1, 32, 0.25f * v), &response).ok());
    expected[v] = response.raw_output_contents(0);
  }
  ASSERT_NE(expected[0], expected[3]);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < 10; ++i) {
        const int v = (c + i) % kValues;
        inference::ModelInferRequest request = ImageRequest("cnn", 1, 32, 0.25f * v);
        request.set_id(absl::StrCat("c", c, "-", i));
        inference::ModelInferResponse response;
        grpc::Status status = h.Infer(request, &response);
        if (!status.ok()) {
          ADD_FAILURE() << status.error_message();
          continue;
        }
        EXPECT_EQ(response.id(), request.id());
        // Batched with others, the same image's scores may differ in the last bits (another batch size's kernels).
        const std::string& got = response.raw_output_contents(0);
        ASSERT_EQ(got.size(), expected[v].size()) << request.id();
        for (size_t k = 0; k < got.size() / 4; ++k) {
          float a, b;
          std::memcpy(&a, got.data() + 4 * k, 4);
          std::memcpy(&b, expected[v].data() + 4 * k, 4);
          EXPECT_NEAR(a, b, 1e-4f + 1e-3f * std::abs(b)) << request.id() << " score " << k;
        }
        ++ok;
      }
    });
  }
  for (std::thread& client : clients) client.join();
  EXPECT_EQ(ok.load(), 80);
}

// A client that cancels its queued request: the async path sees the cancellation, and the request leaves the
// queue without running.
TEST(GrpcServerTest, AsyncPathCancelledClientNeverRuns) {
  TestRepository repo;
  repo.AddResnet("resnet", ResnetConfig("resnet", "dynamic_batching:\n  max_queue_delay_microseconds: 100\n"));
  GatedCpuDevice device;
  ServerHarness h(repo, repository::ModelControlMode::kNone, &device, grpc_server::InferPath::kAsync);
  ASSERT_EQ(h.server->infer_path(), grpc_server::InferPath::kAsync);
  absl::Cleanup open_gate = [&] { device.Open(); };
  device.Arm();
  std::thread busy([&] {
    inference::ModelInferResponse response;
    grpc::Status status = h.Infer(ImageRequest("resnet", 4, 224), &response, absl::Minutes(2));
    EXPECT_TRUE(status.ok()) << status.error_message();
  });
  absl::Cleanup join_busy = [&] {  // whatever fails
    device.Open();
    if (busy.joinable()) busy.join();
  };
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) {
    return s.running_batches == 1 && device.batches_held() == 1;
  }));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Minutes(2)));
  grpc::Status cancelled;
  std::thread client([&] {
    inference::ModelInferResponse response;
    cancelled = h.stub->ModelInfer(&context, ImageRequest("resnet", 1, 224), &response);
  });
  const bool queued =
      WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) { return s.pending_requests == 1; });
  context.TryCancel();
  client.join();
  ASSERT_TRUE(queued) << "the request was never queued";
  EXPECT_EQ(cancelled.error_code(), grpc::CANCELLED) << cancelled.error_message();
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (h.server->cancelled_calls() < 1 && absl::Now() < give_up) absl::SleepFor(absl::Milliseconds(2));
  EXPECT_EQ(h.server->cancelled_calls(), 1);
  device.Open();
  busy.join();
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) {
    return s.pending_requests == 0 && s.running_batches == 0;
  }));
  EXPECT_EQ(h.manager->GetServedModel("resnet", "").value()->stats().inference_count, 4u);  // the busy batch only
}

// Streams at shutdown and on cancel, on both paths: a ModelStreamInfer stream whose client cancels it while its
// request waits in the queue ends CANCELLED and the request never runs; a stream left open with a request held at
// the gate and one queued, and a health Watch, are ended by the server's shutdown (with a short grace): each client
// gets its end, and the shutdown waits for the held batch.
TEST_P(GrpcInferPathTest, StreamsAndWatchesEndOnCancelAndAtShutdown) {
  TestRepository repo;
  repo.AddResnet("resnet", ResnetConfig("resnet", "dynamic_batching:\n  max_queue_delay_microseconds: 100\n"));
  GatedCpuDevice device;
  ServerHarness h(repo, repository::ModelControlMode::kNone, &device, GetParam());
  absl::Cleanup open_gate = [&] { device.Open(); };
  device.Arm();
  auto request = [](int64_t batch, const std::string& id) {
    inference::ModelInferRequest r = ImageRequest("resnet", batch, 224);
    r.set_id(id);
    return r;
  };
  grpc::ClientContext open_context;
  auto open = h.stub->ModelStreamInfer(&open_context);
  ASSERT_TRUE(open->Write(request(4, "held")));
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) {
    return s.running_batches == 1 && device.batches_held() == 1;
  })) << "the stream's first request never reached the gate";

  grpc::ClientContext cancelled_context;
  auto cancelled = h.stub->ModelStreamInfer(&cancelled_context);
  ASSERT_TRUE(cancelled->Write(request(1, "cancelled")));
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) { return s.pending_requests == 1; }))
      << "the request to cancel was never queued";
  cancelled_context.TryCancel();
  EXPECT_EQ(cancelled->Finish().error_code(), grpc::CANCELLED);

  grpc::ClientContext watch_context;
  HealthCheckRequest watch_request;
  watch_request.set_service("resnet");
  auto watch = h.health->Watch(&watch_context, watch_request);
  HealthCheckResponse health;
  ASSERT_TRUE(watch->Read(&health));
  EXPECT_EQ(health.status(), HealthCheckResponse::SERVING);

  ASSERT_TRUE(open->Write(request(2, "queued")));
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) { return s.pending_requests >= 1; }));
  const absl::Time grace = absl::Now() + absl::Milliseconds(100);
  std::thread shutdown([&] { h.server->Shutdown(grace); });
  absl::Cleanup join_shutdown = [&] {  // whatever fails
    device.Open();
    if (shutdown.joinable()) shutdown.join();
  };
  // The watch ends at the shutdown's start, before the gate opens.
  while (watch->Read(&health)) {
  }
  const grpc::Status watch_end = watch->Finish();
  EXPECT_TRUE(watch_end.ok()) << watch_end.error_code() << " " << watch_end.error_message();
  while (absl::Now() < grace + absl::Milliseconds(50)) absl::SleepFor(absl::Milliseconds(5));
  device.Open();
  shutdown.join();
  inference::ModelStreamInferResponse response;
  while (open->Read(&response)) {
    EXPECT_TRUE(response.infer_response().id() == "held" || response.infer_response().id() == "queued")
        << response.infer_response().id();
  }
  const grpc::Status open_end = open->Finish();
  // Cancelled by the server at the grace's end (UNAVAILABLE "Cancelling all calls"), or by the transport's close.
  EXPECT_TRUE(open_end.error_code() == grpc::UNAVAILABLE || open_end.error_code() == grpc::CANCELLED)
      << open_end.error_code() << " " << open_end.error_message();
  // The held batch of 4 ran; the queued 2 may have run or been cancelled at the grace's end; the cancelled 1 never.
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [](const batching::BatcherStats& s) {
    return s.pending_requests == 0 && s.running_batches == 0;
  }));
  const uint64_t ran = h.manager->GetServedModel("resnet", "").value()->stats().inference_count;
  EXPECT_TRUE(ran == 4u || ran == 6u) << ran;
  if (GetParam() == grpc_server::InferPath::kAsync) {
    EXPECT_GE(h.server->cancelled_calls(), 1);
  }
}

// The gRPC server shuts down (with a short grace) while one batch is held at the gate and more requests wait in the
// queue: the shutdown waits for them, every client gets an answer (its result, or the call cancelled), and nothing
// is left behind (the sanitizer builds check the calls are freed).
TEST_P(GrpcInferPathTest, ShutdownWithCallsInFlightAnswersEveryClient) {
  TestRepository repo;
  repo.AddResnet("resnet", ResnetConfig("resnet", "dynamic_batching:\n  max_queue_delay_microseconds: 100\n"));
  GatedCpuDevice device;
  ServerHarness h(repo, repository::ModelControlMode::kNone, &device, GetParam());
  absl::Cleanup open_gate = [&] { device.Open(); };
  device.Arm();
  std::atomic<int> answered{0};
  auto client = [&](int64_t batch) {
    inference::ModelInferResponse r;
    grpc::Status status = h.Infer(ImageRequest("resnet", batch, 224), &r, absl::Minutes(2));
    EXPECT_TRUE(status.ok() || status.error_code() == grpc::CANCELLED || status.error_code() == grpc::UNAVAILABLE)
        << status.error_code() << " " << status.error_message();
    ++answered;
  };
  // A batch of 16 held at the gate keeps the one instance busy; three more requests wait in the queue behind it.
  std::vector<std::thread> clients;
  absl::Cleanup join_clients = [&] {  // whatever fails
    device.Open();
    for (std::thread& t : clients) {
      if (t.joinable()) t.join();
    }
  };
  clients.emplace_back(client, 16);
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) {
    return s.running_batches == 1 && device.batches_held() == 1;
  })) << "the batch of 16 never reached the gate";
  for (int i = 0; i < 3; ++i) clients.emplace_back(client, 1);
  ASSERT_TRUE(WaitForBatcher(h, "resnet", [&](const batching::BatcherStats& s) { return s.pending_requests == 3; }))
      << "the three requests were never queued";
  const absl::Time grace = absl::Now() + absl::Milliseconds(100);
  std::thread shutdown([&] { h.server->Shutdown(grace); });
  // The shutdown has begun once a new call is refused; the gate opens after its grace ran out.
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (absl::Now() < give_up) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    inference::ServerLiveResponse live;
    if (!h.stub->ServerLive(&context, {}, &live).ok()) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  while (absl::Now() < grace + absl::Milliseconds(50)) absl::SleepFor(absl::Milliseconds(5));
  device.Open();
  shutdown.join();
  for (std::thread& t : clients) t.join();
  EXPECT_EQ(answered.load(), 4);
}

}  // namespace
}  // namespace convoy
