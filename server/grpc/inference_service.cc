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

absl::Status SerializeMessage(const google::protobuf::Message& message, grpc::ByteBuffer* bytes) {
  bool own_buffer = false;
  grpc::Status status = grpc::GenericSerialize<grpc::ProtoBufferWriter, google::protobuf::Message>(
      message, bytes, &own_buffer);
  if (status.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("cannot serialize the ", message.GetDescriptor()->full_name(), ": ",
                                          status.error_message()));
}

// Parses the request, runs `handler(request, &response, done)` (which calls `done` exactly once, maybe later, on
// any thread), then serializes the response and finishes the call. Request and response live until then.
template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* Serve(grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
                                grpc::ByteBuffer* out, Handler handler) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto call = std::make_shared<std::pair<Request, Response>>();
  absl::Status parsed = ParseMessage(*in, &call->first);
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  handler(call->first, &call->second, [reactor, out, call](absl::Status status) {
    if (status.ok()) status = SerializeMessage(call->second, out);
    reactor->Finish(ToGrpcStatus(status));
  });
  return reactor;
}

// Serve for a handler that answers at once: `handler(request, &response)` returns the outcome.
template <typename Request, typename Response, typename Handler>
grpc::ServerUnaryReactor* ServeNow(grpc::CallbackServerContext* context, const grpc::ByteBuffer* in,
                                   grpc::ByteBuffer* out, Handler handler) {
  return Serve<Request, Response>(context, in, out, [&handler](const Request& request, Response* response,
                                                               const Done& done) { done(handler(request, response)); });
}

grpc::ServerUnaryReactor* Unimplemented(grpc::CallbackServerContext* context, const char* rpc) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(absl::UnimplementedError(
      absl::StrCat(rpc, " is not implemented by Convoy (no shared memory, trace or log settings)"))));
  return reactor;
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
    on_sent_ = std::move(on_sent);
    finished_at_ = absl::Now();
    Finish(status);  // `this` may be gone once this returns
  }
  void OnDone() override {
    if (on_sent_) on_sent_(absl::Now() - finished_at_);
    delete this;
  }

 private:
  std::function<void(absl::Duration)> on_sent_;
  absl::Time finished_at_;
};

// ModelStreamInfer: reads requests one after another and writes each response when its request completes
// (errors, a malformed message included, in error_message with the request's id). The call finishes once the
// client half-closed and every response was written; a client that goes away cancels the queued requests (their
// cancellation check sees the call cancelled) and the responses it can no longer read are dropped.
//
// The bytes travel as in ModelInfer: each request is read from gRPC's slices by the wire reader
// (infer_request_wire.h), its raw_input_contents copied once, into the batch's input buffer; each response's
// ModelInferResponse is written straight from the output buffers (WriteResponseBytes) and sent behind a small
// slice holding the ModelStreamInferResponse field's tag and length, so it is not copied again.
class StreamInferReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamInferReactor(InferenceService* service, grpc::CallbackServerContext* context)
      : service_(service), context_(context) {
    StartRead(&read_buffer_);
  }

  void OnReadDone(bool ok) override {
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
      grpc::CallbackServerContext* context = context_;
      const inference::ModelInferRequest& request = request_.message;
      service_->StartInfer(request, received, DeadlineOf(*context), [context] { return context->IsCancelled(); },
                           &answer->response,
                           [this, answer, id = request.id(), model = request.model_name()](absl::Status status) {
                             Complete(answer, id, model, status);
                           },
                           &request_.raw_input_contents, &answer->response_bytes);
    }
    StartRead(&read_buffer_);
  }

  void OnWriteDone(bool ok) override {
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

  void OnDone() override { delete this; }

 private:
  // One request's outcome: on success its ModelInferResponse's wire bytes (and, in `response`, only the model's
  // name and version).
  struct Answer {
    inference::ModelInferResponse response;
    grpc::ByteBuffer response_bytes;
  };

  // Turns the outcome of one request into its response on the stream and queues it for writing.
  void Complete(const std::shared_ptr<Answer>& answer, const std::string& id, const std::string& model,
                absl::Status status) {
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

  void QueueWrite(std::shared_ptr<grpc::ByteBuffer> bytes) {
    bool start = false;
    {
      convoy::MutexLock lock(&mu_);
      --pending_;
      writes_.push_back(bytes);
      if (!writing_) writing_ = start = true;
    }
    if (start) StartWrite(bytes.get());
  }

  void MaybeFinish() {
    {
      convoy::MutexLock lock(&mu_);
      if (!reads_done_ || pending_ > 0 || writing_ || finished_) return;
      finished_ = true;
    }
    Finish(grpc::Status::OK);
  }

  InferenceService* const service_;
  grpc::CallbackServerContext* const context_;
  grpc::ByteBuffer read_buffer_;
  WireInferRequest request_;  // reused by each read; decoding copies what it needs
  int64_t received_ = 0;                  // messages read (only the reaction to a read touches it)
  convoy::Mutex mu_;
  int pending_ ABSL_GUARDED_BY(mu_) = 0;  // requests read, responses not yet queued
  bool reads_done_ ABSL_GUARDED_BY(mu_) = false;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<std::shared_ptr<grpc::ByteBuffer>> writes_ ABSL_GUARDED_BY(mu_);
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

namespace {
// ModelInfer's index among the service's methods, as the generated service registers them (in the proto's order).
int ModelInferMethodIndex() {
  static const int index = inference::ModelInferRequest::descriptor()
                               ->file()
                               ->FindServiceByName("GRPCInferenceService")
                               ->FindMethodByName("ModelInfer")
                               ->index();
  return index;
}
}  // namespace

InferenceService::InferenceService(const Options& options) : options_(options), manager_(options.manager) {
  if (options.async_infer) {
    // As WithRawMethod_ModelInfer would mark it: no handler (gRPC then serves it asynchronously), raw bytes.
    MarkMethodRawCallback(ModelInferMethodIndex(), nullptr);
    MarkMethodRaw(ModelInferMethodIndex());
  }
  admin_thread_ = std::thread([this] { AdminLoop(); });
}

InferenceService::~InferenceService() {
  {
    convoy::MutexLock lock(&admin_mu_);
    admin_stop_ = true;
  }
  admin_thread_.join();
}

void InferenceService::RequestModelInfer(grpc::ServerContext* context, grpc::ByteBuffer* request,
                                         grpc::ServerAsyncResponseWriter<grpc::ByteBuffer>* responder,
                                         grpc::ServerCompletionQueue* cq, void* tag) {
  RequestAsyncUnary(ModelInferMethodIndex(), context, request, responder, cq, cq, tag);
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

grpc::ServerUnaryReactor* InferenceService::ServerLive(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ServerLiveRequest, ServerLiveResponse>(context, in, out,
                                                         [](const ServerLiveRequest&, ServerLiveResponse* response) {
                                                           response->set_live(true);
                                                           return absl::OkStatus();
                                                         });
}

grpc::ServerUnaryReactor* InferenceService::ServerReady(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ServerReadyRequest, ServerReadyResponse>(
      context, in, out, [this](const ServerReadyRequest&, ServerReadyResponse* response) {
        response->set_ready(manager_->IsReady());
        return absl::OkStatus();
      });
}

// ModelReady is false, not an error, for an unknown model or version (as Triton).
grpc::ServerUnaryReactor* InferenceService::ModelReady(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ModelReadyRequest, ModelReadyResponse>(
      context, in, out, [this](const ModelReadyRequest& request, ModelReadyResponse* response) {
        response->set_ready(manager_->GetServedModel(request.name(), request.version()).ok());
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* InferenceService::ServerMetadata(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ServerMetadataRequest, ServerMetadataResponse>(
      context, in, out, [this](const ServerMetadataRequest&, ServerMetadataResponse* response) {
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

grpc::ServerUnaryReactor* InferenceService::ModelMetadata(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ModelMetadataRequest, ModelMetadataResponse>(
      context, in, out, [this](const ModelMetadataRequest& request, ModelMetadataResponse* response) {
        return ModelMetadataOf(request, response);
      });
}

// ModelInfer reads the request from gRPC's slices itself (infer_request_wire.h), so each raw_input_contents goes
// from the slices straight into the batch's input buffer, and writes the response's bytes itself, each output
// straight from its output buffer into the response's slice (WriteInferResponse).
grpc::ServerUnaryReactor* InferenceService::ModelInfer(Context* context, const Bytes* in, Bytes* out) {
  const absl::Time received = absl::Now();  // gRPC hands a unary call over with its whole message read
  auto* reactor = new SendTimedReactor();
  struct Call {
    WireInferRequest request;
    ModelInferResponse response;
  };
  auto call = std::make_shared<Call>();
  absl::Status parsed = ParseWireInferRequest(*in, &call->request);
  if (!parsed.ok()) {
    reactor->FinishTimed(ToGrpcStatus(parsed), nullptr);
    return reactor;
  }
  StartInfer(
      call->request.message, received, DeadlineOf(*context), [context] { return context->IsCancelled(); },
      &call->response,
      [this, reactor, call](absl::Status status) {
        if (!status.ok()) return reactor->FinishTimed(ToGrpcStatus(status), nullptr);
        // The send phase goes to the version that answered, if it is still served when the send completes.
        reactor->FinishTimed(grpc::Status::OK, [this, call](absl::Duration send) {
          RecordInferSend(call->response.model_name(), call->response.model_version(), send);
        });
      },
      &call->request.raw_input_contents, out);
  return reactor;
}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* InferenceService::ModelStreamInfer(Context* context) {
  return new StreamInferReactor(this, context);
}

grpc::ServerUnaryReactor* InferenceService::ModelConfig(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ModelConfigRequest, ModelConfigResponse>(
      context, in, out, [this](const ModelConfigRequest& request, ModelConfigResponse* response) {
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

grpc::ServerUnaryReactor* InferenceService::ModelStatistics(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<ModelStatisticsRequest, ModelStatisticsResponse>(
      context, in, out, [this](const ModelStatisticsRequest& request, ModelStatisticsResponse* response) {
        return StatisticsOf(request, response);
      });
}

grpc::ServerUnaryReactor* InferenceService::RepositoryIndex(Context* context, const Bytes* in, Bytes* out) {
  return ServeNow<RepositoryIndexRequest, RepositoryIndexResponse>(
      context, in, out, [this](const RepositoryIndexRequest& request, RepositoryIndexResponse* response) {
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

grpc::ServerUnaryReactor* InferenceService::RepositoryModelLoad(Context* context, const Bytes* in, Bytes* out) {
  return Serve<RepositoryModelLoadRequest, RepositoryModelLoadResponse>(
      context, in, out, [this](const RepositoryModelLoadRequest& request, RepositoryModelLoadResponse*, Done done) {
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

grpc::ServerUnaryReactor* InferenceService::RepositoryModelUnload(Context* context, const Bytes* in, Bytes* out) {
  return Serve<RepositoryModelUnloadRequest, RepositoryModelUnloadResponse>(
      context, in, out,
      [this](const RepositoryModelUnloadRequest& request, RepositoryModelUnloadResponse*, Done done) {
        RunOnAdminThread([this, done, model = request.model_name()] { done(manager_->UnloadModel(model)); });
      });
}

#define CONVOY_UNIMPLEMENTED_RPC(rpc)                                                                       \
  grpc::ServerUnaryReactor* InferenceService::rpc(Context* context, const Bytes*, Bytes*) {                  \
    return Unimplemented(context, #rpc);                                                                    \
  }
CONVOY_UNIMPLEMENTED_RPC(SystemSharedMemoryStatus)
CONVOY_UNIMPLEMENTED_RPC(SystemSharedMemoryRegister)
CONVOY_UNIMPLEMENTED_RPC(SystemSharedMemoryUnregister)
CONVOY_UNIMPLEMENTED_RPC(CudaSharedMemoryStatus)
CONVOY_UNIMPLEMENTED_RPC(CudaSharedMemoryRegister)
CONVOY_UNIMPLEMENTED_RPC(CudaSharedMemoryUnregister)
CONVOY_UNIMPLEMENTED_RPC(TraceSetting)
CONVOY_UNIMPLEMENTED_RPC(LogSettings)
#undef CONVOY_UNIMPLEMENTED_RPC

}  // namespace convoy::grpc_server
