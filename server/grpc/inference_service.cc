#include "server/grpc/inference_service.h"

#include <chrono>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/proto_buffer_writer.h"
#include "kernels/common/status_macros.h"
#include "server/grpc/grpc_status_util.h"
#include "server/grpc/infer_codec.h"
#include "server/grpc/infer_request_wire.h"
#include "server/grpc/model_config_proto.h"
#include "server/inference/infer_dispatch.h"
#include "server/repository/model_names.h"

namespace convoy::grpc_server {
namespace {

using repository::InferencePayload;
using repository::ServedModel;
using Done = std::function<void(absl::Status)>;

// Parses the call's request, runs `handler(request, &response, done)` (which calls `done` exactly once, maybe later,
// on any thread), then serializes the response and finishes the call. Request and response live until then.
template <typename Request, typename Response, typename Handler>
void Serve(InferenceService::UnaryCall call, Handler handler) {
  auto state = std::make_shared<std::pair<Request, Response>>();
  absl::Status parsed = ParseMessage(*call.request, &state->first);
  if (!parsed.ok()) return call.finish(ToGrpcStatus(parsed), nullptr);
  handler(state->first, &state->second,
          [state, out = call.response, finish = std::move(call.finish)](absl::Status status) {
            if (status.ok()) status = SerializeMessage(state->second, out);
            finish(ToGrpcStatus(status), nullptr);
          });
}

// Serve for a handler that answers at once: `handler(request, &response)` returns the outcome.
template <typename Request, typename Response, typename Handler>
void ServeNow(InferenceService::UnaryCall call, Handler handler) {
  Serve<Request, Response>(std::move(call), [&handler](const Request& request, Response* response,
                                                       const Done& done) { done(handler(request, response)); });
}

void FillStatistics(const ServedModel& model, inference::ModelStatistics* out) {
  const repository::ModelStats s = model.stats();
  auto duration = [](const repository::DurationStat& d, inference::StatisticDuration* o) {
    o->set_count(d.count);
    o->set_ns(d.ns);
  };
  out->set_name(model.name());
  out->set_version(absl::StrCat(model.version()));
  out->set_last_inference(s.last_inference_ms);
  out->set_inference_count(s.inference_count);
  out->set_execution_count(s.execution_count);
  inference::InferStatistics* stats = out->mutable_inference_stats();
  duration(s.success, stats->mutable_success());
  duration(s.fail, stats->mutable_fail());
  duration(s.queue, stats->mutable_queue());
  duration(s.compute_input, stats->mutable_compute_input());
  duration(s.compute_infer, stats->mutable_compute_infer());
  duration(s.compute_output, stats->mutable_compute_output());
  for (const auto& [size, batch] : s.batch_stats) {
    inference::InferBatchStatistics* b = out->add_batch_stats();
    b->set_batch_size(static_cast<uint64_t>(size));
    duration(batch.compute_input, b->mutable_compute_input());
    duration(batch.compute_infer, b->mutable_compute_infer());
    duration(batch.compute_output, b->mutable_compute_output());
  }
}

// `infer_response` (a ModelInferResponse's wire bytes) as a ModelStreamInferResponse's: a slice with the
// infer_response field's tag and length, then the same slices (shared, not copied).
absl::Status WrapStreamResponse(const grpc::ByteBuffer& infer_response, grpc::ByteBuffer* out) {
  std::vector<grpc::Slice> slices;
  if (infer_response.Valid()) {
    grpc::Status dumped = infer_response.Dump(&slices);
    if (!dumped.ok()) {
      return absl::InternalError(absl::StrCat("cannot read the response's bytes: ", dumped.error_message()));
    }
  }
  char prefix[20];
  char* end = WriteVarint((inference::ModelStreamInferResponse::kInferResponseFieldNumber << 3) | 2, prefix);  // LEN
  end = WriteVarint(infer_response.Length(), end);
  slices.insert(slices.begin(), grpc::Slice(prefix, static_cast<size_t>(end - prefix)));
  grpc::ByteBuffer wrapped(slices.data(), slices.size());
  out->Swap(&wrapped);
  return absl::OkStatus();
}

// A unary reactor that times its response's send: from Finish to the call's completion (OnDone, once gRPC has
// written the response and the status), then calls `on_sent` with that time. Deletes itself when done.
class SendTimedReactor final : public grpc::ServerUnaryReactor {
 public:
  // `on_sent` (may be empty) runs on a gRPC thread after the call completed.
  void FinishTimed(const grpc::Status& status, std::function<void(absl::Duration)> on_sent) {
    send_timer_.Start(std::move(on_sent));
    Finish(status);  // `this` may be gone once this returns
  }
  void OnDone() override {
    send_timer_.Sent();
    delete this;
  }

 private:
  SendTimer send_timer_;
};

// ModelStreamInfer on the callback API.
class StreamInferReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>,
                                 public StreamInferCall {
 public:
  StreamInferReactor(InferenceService* service, grpc::CallbackServerContext* context)
      : StreamInferCall(service), context_(context) {
    StartRead(read_buffer());
  }

  void OnReadDone(bool ok) override {
    read_hand_off_.Acquire();
    StreamInferCall::OnReadDone(ok);
  }
  void OnWriteDone(bool ok) override {
    write_hand_off_.Acquire();
    StreamInferCall::OnWriteDone(ok);
  }
  void OnDone() override {  // after every operation's reaction
    read_hand_off_.Acquire();
    write_hand_off_.Acquire();
    finish_hand_off_.Acquire();
    delete this;
  }

 private:
  void StartRead(grpc::ByteBuffer* bytes) override {
    read_hand_off_.Release();
    ServerBidiReactor::StartRead(bytes);
  }
  void StartWrite(const grpc::ByteBuffer* bytes) override {
    write_hand_off_.Release();
    ServerBidiReactor::StartWrite(bytes);
  }
  void Finish(const grpc::Status& status) override {
    finish_hand_off_.Release();
    ServerBidiReactor::Finish(status);
  }
  absl::Time deadline() const override { return DeadlineOf(*context_); }
  bool cancelled() const override { return context_->IsCancelled(); }

  grpc::CallbackServerContext* const context_;
  // Each operation started here happens before the reaction to it, on gRPC's threads; reads and writes apart (one of
  // each may be in flight at once, and gRPC does not order one's start before the other's reaction).
  HandOff read_hand_off_;
  HandOff write_hand_off_;
  HandOff finish_hand_off_;
};

// The response's wire bytes written straight from the output buffers into one slice (infer_codec.h).
absl::Status WriteResponseBytes(const ServedModel& model, const std::vector<RequestedOutput>& outputs,
                                const std::string& request_id, const InferencePayload& payload,
                                grpc::ByteBuffer* out) {
  CONVOY_ASSIGN_OR_RETURN(std::vector<infer::ResponseTensor> tensors,
                          infer::ResponseTensors(model, outputs, payload));
  std::optional<grpc::Slice> slice;
  CONVOY_RETURN_IF_ERROR(WriteInferResponse(model.name(), model.version(), request_id, tensors, [&](size_t size) {
    slice.emplace(size);  // uninitialized bytes of gRPC's, filled by the writer
    return const_cast<char*>(reinterpret_cast<const char*>(slice->begin()));
  }));
  grpc::ByteBuffer bytes(&*slice, 1);
  out->Swap(&bytes);
  return absl::OkStatus();
}

}  // namespace

absl::Status SerializeMessage(const google::protobuf::Message& message, grpc::ByteBuffer* bytes) {
  bool own_buffer = false;
  grpc::Status status = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, bytes, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize the ", message.GetDescriptor()->full_name(), ": ",
                                          status.error_message()));
}

absl::Status ParseMessage(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  grpc::ByteBuffer shared(bytes);  // shares the slices; the reader needs a mutable buffer
  grpc::ProtoBufferReader reader(&shared);
  if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("malformed request: the ", bytes.Length(),
                                                 " bytes received are not a valid ",
                                                 message->GetDescriptor()->full_name()));
}

absl::Time DeadlineOf(const grpc::ServerContextBase& context) {
  const auto deadline = context.deadline();
  if (deadline >= std::chrono::system_clock::time_point::max() - std::chrono::hours(24 * 365)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

InferenceService::InferenceService(const Options& options) : options_(options), manager_(options.manager) {
  admin_thread_ = std::thread([this] { AdminLoop(); });
}

InferenceService::~InferenceService() {
  {
    convoy::MutexLock lock(&admin_mu_);
    admin_stop_ = true;
  }
  admin_thread_.join();
}

InferenceService::UnaryHandler InferenceService::UnaryHandlerOf(int index) const {
  static const auto* const handlers = [] {
    const std::pair<const char*, UnaryHandler> by_name[] = {
        {"ServerLive", &InferenceService::HandleServerLive},
        {"ServerReady", &InferenceService::HandleServerReady},
        {"ModelReady", &InferenceService::HandleModelReady},
        {"ServerMetadata", &InferenceService::HandleServerMetadata},
        {"ModelMetadata", &InferenceService::HandleModelMetadata},
        {"ModelInfer", &InferenceService::HandleModelInfer},
        {"ModelConfig", &InferenceService::HandleModelConfig},
        {"ModelStatistics", &InferenceService::HandleModelStatistics},
        {"RepositoryIndex", &InferenceService::HandleRepositoryIndex},
        {"RepositoryModelLoad", &InferenceService::HandleRepositoryModelLoad},
        {"RepositoryModelUnload", &InferenceService::HandleRepositoryModelUnload},
    };
    const google::protobuf::ServiceDescriptor* service =
        inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService");
    auto* table = new std::vector<UnaryHandler>(service->method_count(), &InferenceService::HandleUnimplemented);
    (*table)[service->FindMethodByName("ModelStreamInfer")->index()] = nullptr;
    for (const auto& [name, handler] : by_name) (*table)[service->FindMethodByName(name)->index()] = handler;
    return table;
  }();
  return index >= 0 && index < static_cast<int>(handlers->size()) ? (*handlers)[index] : nullptr;
}

void InferenceService::RecordInferSend(const std::string& model, const std::string& version, absl::Duration send) {
  absl::StatusOr<std::shared_ptr<ServedModel>> served = manager_->GetServedModel(model, version);
  if (served.ok()) (*served)->RecordEdgeSend(metrics::EdgeProtocol::kGrpc, send);
}

void InferenceService::RunOnAdminThread(std::function<void()> task) {
  convoy::MutexLock lock(&admin_mu_);
  admin_tasks_.push_back(std::move(task));
}

void InferenceService::AdminLoop() {
  while (true) {
    std::function<void()> task;
    {
      convoy::MutexLock lock(&admin_mu_);
      admin_mu_.Await(absl::Condition(
          +[](InferenceService* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->admin_stop_ || !s->admin_tasks_.empty(); },
          this));
      if (admin_tasks_.empty()) return;
      task = std::move(admin_tasks_.front());
      admin_tasks_.pop_front();
    }
    task();
  }
}

// The neutral path (server/inference/infer_dispatch.h) on a view of the request; the gRPC-only check of
// raw_input_contents against the input count comes first.
void InferenceService::StartInfer(const inference::ModelInferRequest& request, absl::Time received,
                                  absl::Time deadline, std::function<bool()> cancelled,
                                  inference::ModelInferResponse* response, std::function<void(absl::Status)> done,
                                  const std::vector<infer::RawBytes>* raw, grpc::ByteBuffer* response_bytes) {
  const int raw_count = raw != nullptr ? static_cast<int>(raw->size()) : request.raw_input_contents_size();
  if (raw_count > 0 && raw_count != request.inputs_size()) {
    absl::Status status = absl::InvalidArgumentError(absl::StrCat(
        "expected one raw_input_contents entry per input: the request has ", request.inputs_size(),
        " inputs and ", raw_count, " raw_input_contents"));
    absl::StatusOr<std::shared_ptr<ServedModel>> served =
        manager_->GetServedModel(request.model_name(), request.model_version());
    if (!served.ok()) return done(served.status());
    (*served)->RecordRejectedRequest(status);
    return done(status);
  }
  infer::StartInfer(*manager_, ViewOf(request, raw), deadline, std::move(cancelled),
                    [id = request.id(), response, response_bytes, received, done = std::move(done)](
                        absl::Status status, const ServedModel* model, const std::vector<RequestedOutput>& outputs,
                        const InferencePayload* payload) {
                      if (status.ok()) {
                        const absl::Time encoding = absl::Now();
                        if (response_bytes != nullptr) {
                          status = WriteResponseBytes(*model, outputs, id, *payload, response_bytes);
                          response->set_model_name(model->name());
                          response->set_model_version(absl::StrCat(model->version()));
                        } else {
                          status = EncodeInferResponse(*model, outputs, id, *payload, response);
                        }
                        if (status.ok()) {
                          metrics::EdgeTimes times;
                          times.decode = payload->queued_at - received;
                          times.encode = absl::Now() - encoding;
                          model->RecordEdge(metrics::EdgeProtocol::kGrpc, times);
                        }
                      }
                      done(status);
                    });
}

using inference::ServerLiveRequest;
using inference::ServerLiveResponse;
using inference::ServerReadyRequest;
using inference::ServerReadyResponse;
using inference::ModelReadyRequest;
using inference::ModelReadyResponse;
using inference::ServerMetadataRequest;
using inference::ServerMetadataResponse;
using inference::ModelMetadataRequest;
using inference::ModelMetadataResponse;
using inference::ModelInferRequest;
using inference::ModelInferResponse;
using inference::ModelConfigRequest;
using inference::ModelConfigResponse;
using inference::ModelStatisticsRequest;
using inference::ModelStatisticsResponse;
using inference::RepositoryIndexRequest;
using inference::RepositoryIndexResponse;
using inference::RepositoryModelLoadRequest;
using inference::RepositoryModelLoadResponse;
using inference::RepositoryModelUnloadRequest;
using inference::RepositoryModelUnloadResponse;

void InferenceService::HandleServerLive(UnaryCall call) {
  ServeNow<ServerLiveRequest, ServerLiveResponse>(std::move(call),
                                                  [](const ServerLiveRequest&, ServerLiveResponse* response) {
                                                           response->set_live(true);
                                                           return absl::OkStatus();
                                                         });
}

void InferenceService::HandleServerReady(UnaryCall call) {
  ServeNow<ServerReadyRequest, ServerReadyResponse>(
      std::move(call), [this](const ServerReadyRequest&, ServerReadyResponse* response) {
        response->set_ready(manager_->IsReady());
        return absl::OkStatus();
      });
}

// ModelReady is false, not an error, for an unknown model or version (as Triton).
void InferenceService::HandleModelReady(UnaryCall call) {
  ServeNow<ModelReadyRequest, ModelReadyResponse>(
      std::move(call), [this](const ModelReadyRequest& request, ModelReadyResponse* response) {
        response->set_ready(manager_->GetServedModel(request.name(), request.version()).ok());
        return absl::OkStatus();
      });
}

void InferenceService::HandleServerMetadata(UnaryCall call) {
  ServeNow<ServerMetadataRequest, ServerMetadataResponse>(
      std::move(call), [this](const ServerMetadataRequest&, ServerMetadataResponse* response) {
        response->set_name("convoy");
        response->set_version(options_.server_version);
        for (const char* extension : {"classification", "model_configuration", "model_repository",
                                      "schedule_policy", "statistics"}) {
          response->add_extensions(extension);
        }
        return absl::OkStatus();
      });
}

absl::Status InferenceService::ModelMetadataOf(const ModelMetadataRequest& request, ModelMetadataResponse* response) {
  absl::StatusOr<std::shared_ptr<ServedModel>> served = manager_->GetServedModel(request.name(), request.version());
  if (!served.ok()) return served.status();
  const ServedModel& model = **served;
  response->set_name(model.name());
  for (const auto& other : manager_->ServedModels()) {
    if (other->name() == model.name()) response->add_versions(absl::StrCat(other->version()));
  }
  response->set_platform(PlatformName(model.config()));
  auto fill = [](const runtime::TensorMetadata& t, ModelMetadataResponse::TensorMetadata* tensor) {
    tensor->set_name(t.name);
    tensor->set_datatype(std::string(DataTypeName(t.datatype)));
    for (int64_t d : t.dims) tensor->add_shape(d);
  };
  for (const auto& t : model.signature().inputs) fill(t, response->add_inputs());
  for (const auto& t : model.signature().outputs) fill(t, response->add_outputs());
  return absl::OkStatus();
}

void InferenceService::HandleModelMetadata(UnaryCall call) {
  ServeNow<ModelMetadataRequest, ModelMetadataResponse>(
      std::move(call), [this](const ModelMetadataRequest& request, ModelMetadataResponse* response) {
        return ModelMetadataOf(request, response);
      });
}

// ModelInfer reads the request from gRPC's slices itself (infer_request_wire.h), so each raw_input_contents goes
// from the slices straight into the batch's input buffer, and writes the response's bytes itself, each output
// straight from its output buffer into the response's slice (WriteInferResponse).
void InferenceService::HandleModelInfer(UnaryCall call) {
  struct State {
    WireInferRequest request;
    ModelInferResponse response;
  };
  auto state = std::make_shared<State>();
  absl::Status parsed = ParseWireInferRequest(*call.request, &state->request);
  if (!parsed.ok()) return call.finish(ToGrpcStatus(parsed), nullptr);
  StartInfer(
      state->request.message, call.received, call.deadline, std::move(call.cancelled), &state->response,
      [this, state, finish = std::move(call.finish)](absl::Status status) {
        if (!status.ok()) return finish(ToGrpcStatus(status), nullptr);
        // The send phase goes to the version that answered, if it is still served when the send completes.
        finish(grpc::Status::OK, [this, state](absl::Duration send) {
          RecordInferSend(state->response.model_name(), state->response.model_version(), send);
        });
      },
      &state->request.raw_input_contents, call.response);
}

void InferenceService::HandleModelConfig(UnaryCall call) {
  ServeNow<ModelConfigRequest, ModelConfigResponse>(
      std::move(call), [this](const ModelConfigRequest& request, ModelConfigResponse* response) {
        absl::StatusOr<std::shared_ptr<ServedModel>> served =
            manager_->GetServedModel(request.name(), request.version());
        if (!served.ok()) return served.status();
        *response->mutable_config() = ToModelConfigProto(**served, options_.on_gpu);
        return absl::OkStatus();
      });
}

// An empty name asks for every model (a version then needs a name); a name asks for that model's READY versions.
absl::Status InferenceService::StatisticsOf(const ModelStatisticsRequest& request,
                                            ModelStatisticsResponse* response) {
  if (request.name().empty() && !request.version().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("statistics for version '", request.version(),
                                                   "' need a model name"));
  }
  if (!request.name().empty()) {
    absl::StatusOr<std::shared_ptr<ServedModel>> served =
        manager_->GetServedModel(request.name(), request.version());
    if (!served.ok()) return served.status();
  }
  for (const auto& model : manager_->ServedModels()) {
    if (!request.name().empty() && model->name() != request.name()) continue;
    if (!request.version().empty() && absl::StrCat(model->version()) != request.version()) continue;
    FillStatistics(*model, response->add_model_stats());
  }
  return absl::OkStatus();
}

void InferenceService::HandleModelStatistics(UnaryCall call) {
  ServeNow<ModelStatisticsRequest, ModelStatisticsResponse>(
      std::move(call), [this](const ModelStatisticsRequest& request, ModelStatisticsResponse* response) {
        return StatisticsOf(request, response);
      });
}

void InferenceService::HandleRepositoryIndex(UnaryCall call) {
  ServeNow<RepositoryIndexRequest, RepositoryIndexResponse>(
      std::move(call), [this](const RepositoryIndexRequest& request, RepositoryIndexResponse* response) {
        for (const repository::ModelVersionStatus& status : manager_->Index()) {
          if (request.ready() && status.state != repository::ModelState::kReady) continue;
          auto* entry = response->add_models();
          entry->set_name(status.model);
          entry->set_version(status.version > 0 ? absl::StrCat(status.version) : "");
          entry->set_state(repository::ModelStateName(status.state));
          entry->set_reason(status.reason);
        }
        return absl::OkStatus();
      });
}

void InferenceService::HandleRepositoryModelLoad(UnaryCall call) {
  Serve<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      std::move(call), [this](const RepositoryModelLoadRequest& request, RepositoryModelLoadResponse*, Done done) {
        if (!request.parameters().empty()) {  // Triton's config and file overrides
          return done(absl::InvalidArgumentError(absl::StrCat(
              "load of model ", repository::QuoteClientString(request.model_name()),
              ": load parameters are not supported (got ",
              repository::QuoteClientString(request.parameters().begin()->first),
              "); Convoy loads the model's config.yaml and files as the repository holds them")));
        }
        RunOnAdminThread([this, done, model = request.model_name()] { done(manager_->LoadModel(model)); });
      });
}

void InferenceService::HandleRepositoryModelUnload(UnaryCall call) {
  Serve<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      std::move(call),
      [this](const RepositoryModelUnloadRequest& request, RepositoryModelUnloadResponse*, Done done) {
        RunOnAdminThread([this, done, model = request.model_name()] { done(manager_->UnloadModel(model)); });
      });
}

void InferenceService::HandleUnimplemented(UnaryCall call) {
  call.finish(ToGrpcStatus(absl::UnimplementedError(absl::StrCat(
                  call.rpc, " is not implemented by Convoy (no shared memory, trace or log settings)"))),
              nullptr);
}

grpc::ServerUnaryReactor* InferenceService::ServeCallback(Context* context, const Bytes* request, Bytes* response,
                                                          UnaryHandler handler, absl::string_view rpc) {
  auto* reactor = new SendTimedReactor();
  UnaryCall call;
  call.rpc = rpc;
  call.request = request;
  call.response = response;
  call.received = absl::Now();  // gRPC hands a unary call over with its whole message read
  call.deadline = DeadlineOf(*context);
  call.cancelled = [context] { return context->IsCancelled(); };
  call.finish = [reactor](const grpc::Status& status, std::function<void(absl::Duration)> on_sent) {
    reactor->FinishTimed(status, std::move(on_sent));
  };
  (this->*handler)(std::move(call));
  return reactor;
}

#define CONVOY_CALLBACK_RPC(rpc, handler)                                                  \
  grpc::ServerUnaryReactor* InferenceService::rpc(Context* context, const Bytes* in, Bytes* out) { \
    return ServeCallback(context, in, out, &InferenceService::handler, #rpc);               \
  }
CONVOY_CALLBACK_RPC(ServerLive, HandleServerLive)
CONVOY_CALLBACK_RPC(ServerReady, HandleServerReady)
CONVOY_CALLBACK_RPC(ModelReady, HandleModelReady)
CONVOY_CALLBACK_RPC(ServerMetadata, HandleServerMetadata)
CONVOY_CALLBACK_RPC(ModelMetadata, HandleModelMetadata)
CONVOY_CALLBACK_RPC(ModelInfer, HandleModelInfer)
CONVOY_CALLBACK_RPC(ModelConfig, HandleModelConfig)
CONVOY_CALLBACK_RPC(ModelStatistics, HandleModelStatistics)
CONVOY_CALLBACK_RPC(RepositoryIndex, HandleRepositoryIndex)
CONVOY_CALLBACK_RPC(RepositoryModelLoad, HandleRepositoryModelLoad)
CONVOY_CALLBACK_RPC(RepositoryModelUnload, HandleRepositoryModelUnload)
CONVOY_CALLBACK_RPC(SystemSharedMemoryStatus, HandleUnimplemented)
CONVOY_CALLBACK_RPC(SystemSharedMemoryRegister, HandleUnimplemented)
CONVOY_CALLBACK_RPC(SystemSharedMemoryUnregister, HandleUnimplemented)
CONVOY_CALLBACK_RPC(CudaSharedMemoryStatus, HandleUnimplemented)
CONVOY_CALLBACK_RPC(CudaSharedMemoryRegister, HandleUnimplemented)
CONVOY_CALLBACK_RPC(CudaSharedMemoryUnregister, HandleUnimplemented)
CONVOY_CALLBACK_RPC(TraceSetting, HandleUnimplemented)
CONVOY_CALLBACK_RPC(LogSettings, HandleUnimplemented)
#undef CONVOY_CALLBACK_RPC

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(Context* context) {
  return new StreamInferReactor(this, context);
}

struct StreamInferCall::Answer {
  inference::ModelInferResponse response;  // only the model's name and version
  grpc::ByteBuffer response_bytes;         // the ModelInferResponse's wire bytes
};

void StreamInferCall::OnReadDone(bool ok) {
  if (!ok) {
    {
      convoy::MutexLock lock(&mu_);
      reads_done_ = true;
    }
    MaybeFinish();
    return;
  }
  {
    convoy::MutexLock lock(&mu_);
    ++pending_;
  }
  ++received_;
  const absl::Time received = absl::Now();
  auto answer = std::make_shared<Answer>();
  // The request is decoded (its tensors copied into the batch's input buffers) before StartInfer returns, so one
  // WireInferRequest serves every read; it holds references to this read's slices until the next one.
  absl::Status parsed = ParseWireInferRequest(read_buffer_, &request_);
  read_buffer_.Clear();
  if (!parsed.ok()) {
    Complete(answer, "", "",
             absl::InvalidArgumentError(absl::StrCat("request ", received_, " on this stream: ", parsed.message())));
  } else {
    const inference::ModelInferRequest& request = request_.message;
    service_->StartInfer(request, received, deadline(), [this] { return cancelled(); }, &answer->response,
                         [this, answer, id = request.id(), model = request.model_name()](absl::Status status) {
                           Complete(answer, id, model, status);
                         },
                         &request_.raw_input_contents, &answer->response_bytes);
  }
  StartRead(&read_buffer_);
}

void StreamInferCall::OnWriteDone(bool ok) {
  std::shared_ptr<grpc::ByteBuffer> next;
  {
    convoy::MutexLock lock(&mu_);
    writes_.pop_front();
    if (!ok) writes_.clear();  // the client is gone: drop what it can no longer read
    if (!writes_.empty()) {
      next = writes_.front();
    } else {
      writing_ = false;
    }
  }
  if (next != nullptr) {
    StartWrite(next.get());
  } else {
    MaybeFinish();
  }
}

// Turns the outcome of one request into its response on the stream and queues it for writing.
void StreamInferCall::Complete(const std::shared_ptr<Answer>& answer, const std::string& id,
                               const std::string& model, absl::Status status) {
  auto bytes = std::make_shared<grpc::ByteBuffer>();
  if (status.ok()) status = WrapStreamResponse(answer->response_bytes, bytes.get());
  if (!status.ok()) {
    inference::ModelStreamInferResponse error;
    error.set_error_message(std::string(status.message()));
    error.mutable_infer_response()->set_id(id);
    error.mutable_infer_response()->set_model_name(model);
    absl::Status serialized = SerializeMessage(error, bytes.get());
    if (!serialized.ok()) {
      error.set_error_message(std::string(serialized.message()));
      SerializeMessage(error, bytes.get()).IgnoreError();
    }
  }
  QueueWrite(std::move(bytes));
}

void StreamInferCall::QueueWrite(std::shared_ptr<grpc::ByteBuffer> bytes) {
  bool start = false;
  {
    convoy::MutexLock lock(&mu_);
    --pending_;
    writes_.push_back(bytes);
    if (!writing_) writing_ = start = true;
  }
  if (start) StartWrite(bytes.get());
}

void StreamInferCall::MaybeFinish() {
  {
    convoy::MutexLock lock(&mu_);
    if (!reads_done_ || pending_ > 0 || writing_ || finished_) return;
    finished_ = true;
  }
  Finish(grpc::Status::OK);
}

}  // namespace convoy::grpc_server
