#include "server/grpc/async_infer.h"

#include <pthread.h>

#include <utility>

#include "absl/time/clock.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/async_unary_call.h"
#include "server/grpc/grpc_status_util.h"
#include "server/grpc/infer_request_wire.h"

namespace convoy::grpc_server {

// One ModelInfer call, from the request for it to its last completion. Three tags reach the poller: the call's
// arrival (kRequest), its end (kDone: answered, cancelled, or its deadline passed; only for a call that arrived),
// and the send of its answer (kFinish). The call keeps itself alive (self_) until the tags it expects have come;
// the inference's callbacks hold it too, so it outlives them whatever the order.
class AsyncInferPoller::Call : public std::enable_shared_from_this<Call> {
 public:
  enum class Kind { kRequest, kDone, kFinish };
  struct Tag {
    Call* call;
    Kind kind;
  };

  explicit Call(AsyncInferPoller* poller) : poller_(poller), responder_(&context_) {}

  // Asks gRPC for the next ModelInfer call, unless the poller shuts down.
  static void Arm(AsyncInferPoller* poller) {
    if (!poller->Open()) return;
    auto call = std::make_shared<Call>(poller);
    call->self_ = call;
    call->context_.AsyncNotifyWhenDone(&call->done_tag_);
    poller->service_->RequestModelInfer(&call->context_, &call->request_bytes_, &call->responder_, poller->cq_.get(),
                                        &call->request_tag_);
  }

  // On the poller thread, for each tag.
  void OnTag(Kind kind, bool ok) {
    switch (kind) {
      case Kind::kRequest:
        if (!ok) {  // the server shuts down: no call came (and no kDone will)
          poller_->Close();
          self_.reset();
          return;
        }
        expected_ = 2;  // kDone and kFinish
        Arm(poller_);   // the next call can arrive while this one runs
        Start();        // this call stays open until it was finished
        break;
      case Kind::kDone:
        if (context_.IsCancelled()) {
          cancelled_.store(true, std::memory_order_release);
          poller_->cancelled_calls_.fetch_add(1, std::memory_order_relaxed);
        }
        Release();
        break;
      case Kind::kFinish:
        // The acquire pairs with FinishWith's release: what the finishing thread wrote is visible here (gRPC's own
        // hand-over of the tag does that too, where ThreadSanitizer cannot see it).
        if (ok && finished_.load(std::memory_order_acquire) && sent_ok_) {
          poller_->service_->RecordInferSend(response_.model_name(), response_.model_version(),
                                             absl::Now() - finished_at_);
        }
        Release();
        break;
    }
  }

 private:
  void Release() {
    if (--expected_ == 0) self_.reset();  // `this` may be gone
  }

  void Start() {
    const absl::Time received = absl::Now();  // the whole message was read when the call arrived
    absl::Status parsed = ParseWireInferRequest(request_bytes_, &request_);
    if (!parsed.ok()) {
      FinishWith(ToGrpcStatus(parsed));
      return;
    }
    std::shared_ptr<Call> self = shared_from_this();
    poller_->service_->StartInfer(
        request_.message, received, DeadlineOf(context_),
        [self] { return self->cancelled_.load(std::memory_order_acquire); }, &response_,
        [self](absl::Status status) { self->FinishWith(ToGrpcStatus(status)); }, &request_.raw_input_contents,
        &response_bytes_);
  }

  // On any thread, once; closes the call (the queue may shut down once this returns).
  void FinishWith(const grpc::Status& status) {
    sent_ok_ = status.ok();
    finished_at_ = absl::Now();
    finished_.store(true, std::memory_order_release);
    if (status.ok()) {
      responder_.Finish(response_bytes_, status, &finish_tag_);
    } else {
      responder_.FinishWithError(status, &finish_tag_);
    }
    poller_->Close();
  }

  AsyncInferPoller* const poller_;
  grpc::ServerContext context_;
  grpc::ServerAsyncResponseWriter<grpc::ByteBuffer> responder_;
  grpc::ByteBuffer request_bytes_;
  WireInferRequest request_;
  inference::ModelInferResponse response_;  // the model's name and version (the bytes are in response_bytes_)
  grpc::ByteBuffer response_bytes_;
  std::atomic<bool> cancelled_{false};
  std::atomic<bool> finished_{false};
  bool sent_ok_ = false;        // written before Finish, read after its tag
  absl::Time finished_at_;      // likewise
  int expected_ = 0;            // tags still to come; only the poller thread touches it
  std::shared_ptr<Call> self_;  // the poller's reference, until the last tag
  Tag request_tag_{this, Kind::kRequest};
  Tag done_tag_{this, Kind::kDone};
  Tag finish_tag_{this, Kind::kFinish};
};

namespace {
constexpr int kArmedCalls = 4;  // calls asked for at once: concurrent arrivals need not wait for the poller
}  // namespace

AsyncInferPoller::AsyncInferPoller(InferenceService* service, std::unique_ptr<grpc::ServerCompletionQueue> cq)
    : service_(service), cq_(std::move(cq)) {
  for (int i = 0; i < kArmedCalls; ++i) Call::Arm(this);
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "grpc_infer_cq");  // as /proc/PID/task/*/comm and top show it
    Loop();
  });
}

AsyncInferPoller::~AsyncInferPoller() { Shutdown(); }

bool AsyncInferPoller::Open() {
  convoy::MutexLock lock(&mu_);
  if (stopping_) return false;
  ++open_calls_;
  return true;
}

void AsyncInferPoller::Close() {
  convoy::MutexLock lock(&mu_);
  --open_calls_;
}

void AsyncInferPoller::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  {
    convoy::MutexLock lock(&mu_);
    stopping_ = true;
    mu_.Await(absl::Condition(
        +[](AsyncInferPoller* p) ABSL_NO_THREAD_SAFETY_ANALYSIS { return p->open_calls_ == 0; }, this));
  }
  cq_->Shutdown();
  thread_.join();
}

void AsyncInferPoller::Loop() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<Call::Tag*>(tag);
    t->call->OnTag(t->kind, ok);
  }
}

}  // namespace convoy::grpc_server
