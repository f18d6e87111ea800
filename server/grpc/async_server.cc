#include "server/grpc/async_server.h"

#include <pthread.h>

#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "proto/health.pb.h"
#include "server/grpc/grpc_status_util.h"

namespace convoy::grpc_server {

RawAsyncService::RawAsyncService(const google::protobuf::ServiceDescriptor* descriptor) {
  for (int i = 0; i < descriptor->method_count(); ++i) {
    const google::protobuf::MethodDescriptor* method = descriptor->method(i);
    paths_.push_back(std::make_unique<std::string>("/" + descriptor->full_name() + "/" + method->name()));
    grpc::internal::RpcMethod::RpcType type = grpc::internal::RpcMethod::NORMAL_RPC;
    if (method->client_streaming() && method->server_streaming()) {
      type = grpc::internal::RpcMethod::BIDI_STREAMING;
    } else if (method->client_streaming()) {
      type = grpc::internal::RpcMethod::CLIENT_STREAMING;
    } else if (method->server_streaming()) {
      type = grpc::internal::RpcMethod::SERVER_STREAMING;
    }
    AddMethod(new grpc::internal::RpcServiceMethod(paths_.back()->c_str(), type, nullptr));
    MarkMethodRaw(i);
  }
}

// What every call shares: its context, the tags that reach the poller, and its lifetime. The call keeps itself
// alive (self_) until the tags it expects have come; whatever runs on other threads for it (an inference's
// completion) holds it too, so it outlives them whatever the order. Two tags reach every call that arrived: kDone
// (answered, cancelled, or its deadline passed) and kFinish (its last operation, started once); kRead and kWrite
// only a stream's.
class AsyncServer::Call : public std::enable_shared_from_this<Call> {
 public:
  enum class Kind { kRequest, kRead, kWrite, kDone, kFinish };
  struct Tag {
    Call* call;
    Kind kind;
  };

  explicit Call(AsyncServer* server) : server_(server) {}
  virtual ~Call() = default;

  // On the poller thread, for each tag.
  void OnTag(Kind kind, bool ok) {
    hand_offs_[static_cast<int>(kind)].Acquire();
    switch (kind) {
      case Kind::kRequest:
        if (!ok) {  // the server shuts down: no call came (and no kDone will)
          server_->Close();
          self_.reset();
          return;
        }
        expected_ = 2;  // kDone and kFinish
        OnArrived();
        break;
      case Kind::kRead:
        OnRead(ok);
        break;
      case Kind::kWrite:
        OnWrite(ok);
        break;
      case Kind::kDone:
        if (context_.IsCancelled()) {
          cancelled_.store(true, std::memory_order_release);
          server_->cancelled_calls_.fetch_add(1, std::memory_order_relaxed);
          OnCancelled();
        }
        Release();
        break;
      case Kind::kFinish:
        OnFinished(ok);
        Release();
        break;
    }
  }

 protected:
  // Before the call is asked for: takes the first reference and the kDone notification.
  static void Own(const std::shared_ptr<Call>& call) {
    call->self_ = call;
    call->context_.AsyncNotifyWhenDone(&call->done_tag_);
    call->Started(Kind::kRequest);  // the call as built here, before it is asked for
    call->Started(Kind::kDone);
  }
  // The call arrived (asks for the next call of its method first).
  virtual void OnArrived() = 0;
  virtual void OnRead(bool ok) {}
  virtual void OnWrite(bool ok) {}
  virtual void OnCancelled() {}
  virtual void OnFinished(bool ok) {}
  virtual void OnReleased() {}

  AsyncServer* const server_;
  grpc::ServerContext context_;
  // Right before an operation whose tag is `kind` starts, on whichever thread starts it; OnTag acquires that kind's
  // hand-off: the completion queue orders the two inside gRPC, where ThreadSanitizer cannot see it.
  void Started(Kind kind) { hand_offs_[static_cast<int>(kind)].Release(); }
  std::atomic<bool> cancelled_{false};
  Tag request_tag_{this, Kind::kRequest};
  Tag read_tag_{this, Kind::kRead};
  Tag write_tag_{this, Kind::kWrite};
  Tag done_tag_{this, Kind::kDone};
  Tag finish_tag_{this, Kind::kFinish};

 private:
  void Release() {
    if (--expected_ > 0) return;
    OnReleased();
    self_.reset();  // `this` may be gone
  }

  HandOff hand_offs_[5];       // one per Kind: a read's reaction is not ordered after a write's start
  int expected_ = 0;            // tags still to come; only the poller thread touches it
  std::shared_ptr<Call> self_;  // the poller's reference, until the last tag
};

// A unary call: its message arrives with it; the handler answers it once, from any thread.
class AsyncServer::UnaryCall final : public Call {
 public:
  UnaryCall(AsyncServer* server, const UnaryMethod* method) : Call(server), method_(method), responder_(&context_) {}

  // Asks gRPC for the next call of `method`, unless the server shuts down.
  static void Arm(AsyncServer* server, const UnaryMethod* method) {
    if (!server->Open()) return;
    auto call = std::make_shared<UnaryCall>(server, method);
    Own(call);
    method->service->RequestUnary(method->index, &call->context_, &call->request_, &call->responder_,
                                  server->cq_.get(), &call->request_tag_);
  }

 private:
  void OnArrived() override {
    const absl::Time received = absl::Now();  // the whole message was read when the call arrived
    Arm(server_, method_);                    // the next call can arrive while this one runs
    std::shared_ptr<UnaryCall> self = std::static_pointer_cast<UnaryCall>(shared_from_this());
    InferenceService::UnaryCall call;
    call.rpc = method_->name;
    call.request = &request_;
    call.response = &response_;
    call.received = received;
    call.deadline = DeadlineOf(context_);
    call.cancelled = [self] { return self->cancelled_.load(std::memory_order_acquire); };
    call.finish = [self](const grpc::Status& status, std::function<void(absl::Duration)> on_sent) {
      self->FinishWith(status, std::move(on_sent));
    };
    method_->handle(std::move(call));
  }

  // On any thread, once; closes the call (the queue may shut down once this returns).
  void FinishWith(const grpc::Status& status, std::function<void(absl::Duration)> on_sent) {
    send_timer_.Start(status.ok() ? std::move(on_sent) : nullptr);
    Started(Kind::kFinish);
    if (status.ok()) {
      responder_.Finish(response_, status, &finish_tag_);
    } else {
      responder_.FinishWithError(status, &finish_tag_);
    }
    server_->Close();
  }

  void OnFinished(bool ok) override {
    if (ok) send_timer_.Sent();
  }

  const UnaryMethod* const method_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_;
  grpc::ByteBuffer request_;
  grpc::ByteBuffer response_;
  SendTimer send_timer_;  // started before Finish (any thread), read after its tag (the poller)
};

// ModelStreamInfer: StreamInferCall's reads and writes on the completion queue. StreamInferCall is the first base,
// so its calls to StartRead, StartWrite and Finish reach these overrides directly rather than through a compiler
// thunk, which has no line table: ThreadSanitizer's reports then show (and its suppressions match) gRPC's frames.
class AsyncServer::StreamCall final : public StreamInferCall, public Call {
 public:
  StreamCall(AsyncServer* server) : StreamInferCall(server->inference_), Call(server), stream_(&context_) {}

  static void Arm(AsyncServer* server) {
    if (!server->Open()) return;
    auto call = std::make_shared<StreamCall>(server);
    Own(call);
    server->inference_service_.RequestBidi(server->stream_infer_index_, &call->context_, &call->stream_,
                                           server->cq_.get(), &call->request_tag_);
  }

 private:
  void OnArrived() override {
    Arm(server_);
    StartRead(read_buffer());
  }
  void OnRead(bool ok) override { OnReadDone(ok); }
  void OnWrite(bool ok) override { OnWriteDone(ok); }

  void StartRead(grpc::ByteBuffer* bytes) override {
    Started(Kind::kRead);
    stream_.Read(bytes, &read_tag_);
  }
  void StartWrite(const grpc::ByteBuffer* bytes) override {
    Started(Kind::kWrite);
    stream_.Write(*bytes, &write_tag_);
  }
  void Finish(const grpc::Status& status) override {
    Started(Kind::kFinish);
    stream_.Finish(status, &finish_tag_);
    server_->Close();
  }
  absl::Time deadline() const override { return DeadlineOf(context_); }
  bool cancelled() const override { return cancelled_.load(std::memory_order_acquire); }

  grpc::ServerAsyncReaderWriter<grpc::ByteBuffer, grpc::ByteBuffer> stream_;
};

// Health Watch: a HealthWatch writing on the completion queue; a cancelled call ends it. HealthWatch is the first
// base for the reason StreamCall's StreamInferCall is.
class AsyncServer::WatchCall final : public HealthWatch, public Call {
 public:
  WatchCall(AsyncServer* server) : HealthWatch(""), Call(server), writer_(&context_) {}

  static void Arm(AsyncServer* server) {
    if (!server->Open()) return;
    auto call = std::make_shared<WatchCall>(server);
    Own(call);
    server->health_service_.RequestServerStream(server->watch_index_, &call->context_, &call->request_bytes_,
                                                &call->writer_, server->cq_.get(), &call->request_tag_);
  }

 private:
  void OnArrived() override {
    Arm(server_);
    grpc::health::v1::HealthCheckRequest request;
    absl::Status parsed = ParseMessage(request_bytes_, &request);
    if (!parsed.ok()) return Finish(ToGrpcStatus(parsed));
    set_name(request.service());
    added_ = true;
    server_->health_->AddWatch(this);
  }
  void OnWrite(bool ok) override { OnWriteDone(ok); }
  void OnCancelled() override {
    if (added_) End();
  }
  void OnReleased() override {
    if (added_) server_->health_->RemoveWatch(this);
  }

  void StartWrite(const grpc::health::v1::HealthCheckResponse* response) override {
    absl::Status serialized = SerializeMessage(*response, &response_bytes_);
    (void)serialized;  // a one-field message always serializes
    Started(Kind::kWrite);
    writer_.Write(response_bytes_, &write_tag_);
  }
  void Finish(const grpc::Status& status) override {
    Started(Kind::kFinish);
    writer_.Finish(status, &finish_tag_);
    server_->Close();
  }

  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_;
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;  // the write in flight
  bool added_ = false;               // only the poller thread touches it
};

namespace {
constexpr int kArmedInferCalls = 4;  // ModelInfer calls asked for at once: concurrent arrivals need not wait

const google::protobuf::ServiceDescriptor* InferenceDescriptor() {
  return inference::ModelInferRequest::descriptor()->file()->FindServiceByName("GRPCInferenceService");
}
const google::protobuf::ServiceDescriptor* HealthDescriptor() {
  return grpc::health::v1::HealthCheckRequest::descriptor()->file()->FindServiceByName("Health");
}
}  // namespace

AsyncServer::AsyncServer(InferenceService* inference, HealthService* health, grpc::ServerBuilder* builder)
    : inference_(inference),
      health_(health),
      inference_service_(InferenceDescriptor()),
      health_service_(HealthDescriptor()) {
  const google::protobuf::ServiceDescriptor* descriptor = InferenceDescriptor();
  unary_methods_.reserve(descriptor->method_count() + 1);  // pointers to the entries stay valid
  for (int i = 0; i < descriptor->method_count(); ++i) {
    InferenceService::UnaryHandler handler = inference->UnaryHandlerOf(i);
    if (handler == nullptr) {
      stream_infer_index_ = i;
      continue;
    }
    unary_methods_.push_back({&inference_service_, i, descriptor->method(i)->name(),
                              [inference, handler](InferenceService::UnaryCall call) {
                                (inference->*handler)(std::move(call));
                              }});
  }
  const google::protobuf::ServiceDescriptor* health_descriptor = HealthDescriptor();
  watch_index_ = health_descriptor->FindMethodByName("Watch")->index();
  unary_methods_.push_back(
      {&health_service_, health_descriptor->FindMethodByName("Check")->index(), "Check",
       [health](InferenceService::UnaryCall call) {
         grpc::health::v1::HealthCheckRequest request;
         absl::Status status = ParseMessage(*call.request, &request);
         if (status.ok()) {
           absl::StatusOr<ServingStatus> serving = health->StatusOf(request.service());
           status = serving.status();
           grpc::health::v1::HealthCheckResponse response;
           if (status.ok()) response.set_status(*serving);
           if (status.ok()) status = SerializeMessage(response, call.response);
         }
         call.finish(ToGrpcStatus(status), nullptr);
       }});
  builder->RegisterService(&inference_service_);
  builder->RegisterService(&health_service_);
  cq_ = builder->AddCompletionQueue();
}

AsyncServer::~AsyncServer() { Shutdown(); }

void AsyncServer::Start() {
  for (const UnaryMethod& method : unary_methods_) {
    const int armed = method.service == &inference_service_ && method.name == "ModelInfer" ? kArmedInferCalls : 1;
    for (int i = 0; i < armed; ++i) UnaryCall::Arm(this, &method);
  }
  StreamCall::Arm(this);
  WatchCall::Arm(this);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "grpc_cq");  // as /proc/PID/task/*/comm and top show it
    Loop();
  });
}

bool AsyncServer::Open() {
  convoy::MutexLock lock(&mu_);
  if (stopping_) return false;
  ++open_calls_;
  return true;
}

void AsyncServer::Close() {
  convoy::MutexLock lock(&mu_);
  --open_calls_;
}

void AsyncServer::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    convoy::MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await(absl::Condition(
        +[](AsyncServer* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->open_calls_ == 0; }, this));
  }
  cq_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {  // never started: drain here
    void* tag = nullptr;
    bool ok = false;
    while (cq_->Next(&tag, &ok)) {
    }
  }
}

void AsyncServer::Loop() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Call::Tag*>(tag);
    t->call->OnTag(t->kind, ok);
  }
}

}  // namespace convoy::grpc_server
