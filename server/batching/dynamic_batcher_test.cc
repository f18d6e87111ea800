// DynamicBatcher with a FakeClock: batch formation at max size, preferred size and queue delay, priorities,
// timeouts (REJECT and DELAY), full queues, cancellation, ordered delivery across two instances, merging and shape
// separation, executor failures and graceful drain; with the adaptive policy, execution measured on the injected
// clock and a lone client that never waits. Time moves only when a test (or the executor, for the time a batch
// takes) advances it; tests wait for the batcher's threads with notifications and FakeClock::BlockUntilSettled,
// never by sleeping. The adaptive policy's decisions themselves are tested in simulation (adaptive_batching_test).
#include "server/batching/dynamic_batcher.h"

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"  // absl::Condition
#include "kernels/common/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/batching/fake_clock.h"

namespace convoy::batching {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

struct IdPayload : BatchPayload {
  explicit IdPayload(int id) : id(id) {}
  int id;
};

int IdOf(const BatchRequest& request) { return request.payload_as<IdPayload>()->id; }

// Records every batch it runs. With holding on, each batch waits until the test releases it by the id of its first
// request. With a clock to advance, each batch takes the given time on it (the instance's execution time).
class RecordingExecutor : public BatchExecutor {
 public:
  struct Run {
    std::vector<int> ids;
    int instance;
    std::vector<absl::Duration> queue_times;  // per request, in batch order
  };

  absl::Status ExecuteBatch(Batch& batch, int instance) override {
    if (clock_ != nullptr) {
      int64_t elements = 0;
      for (const auto& request : batch) elements += request->batch_size();
      clock_->Advance(duration_(elements));
    }
    Run run{{}, instance, {}};
    {
      convoy::MutexLock lock(&mu_);
      for (const auto& request : batch) {
        run.ids.push_back(IdOf(*request));
        run.queue_times.push_back(request->dispatch_time() - request->enqueue_time());
        if (run.ids.back() == fail_alone_id_) request->SetExecutionStatus(absl::DataLossError("bad output"));
      }
      runs_.push_back(run);
    }  // unlocking wakes AwaitRuns (convoy::Mutex's Await below would not)
    convoy::MutexLock lock(&mu_);
    const int first_id = run.ids.front();
    const auto released = [this, first_id]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !hold_ || released_.count(first_id) > 0;
    };
    mu_.Await(absl::Condition(&released));
    return batch_status_;
  }

  void Hold() {
    convoy::MutexLock lock(&mu_);
    hold_ = true;
  }
  // Call before the batcher starts.
  void TakeTime(FakeClock* clock, std::function<absl::Duration(int64_t)> duration) {
    clock_ = clock;
    duration_ = std::move(duration);
  }
  void Release(int first_id) {
    convoy::MutexLock lock(&mu_);
    released_.insert(first_id);
  }
  void FailBatchesWith(absl::Status status) {
    convoy::MutexLock lock(&mu_);
    batch_status_ = std::move(status);
  }
  void FailAlone(int id) {
    convoy::MutexLock lock(&mu_);
    fail_alone_id_ = id;
  }
  // Blocks until `count` batches have started; returns all started so far.
  std::vector<Run> AwaitRuns(size_t count) {
    convoy::MutexLock lock(&mu_);
    const auto enough = [this, count]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return runs_.size() >= count; };
    mu_.Await(absl::Condition(&enough));
    return runs_;
  }
  std::vector<Run> runs() {
    convoy::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  convoy::Mutex mu_;
  std::vector<Run> runs_ ABSL_GUARDED_BY(mu_);
  bool hold_ ABSL_GUARDED_BY(mu_) = false;
  std::set<int> released_ ABSL_GUARDED_BY(mu_);
  absl::Status batch_status_ ABSL_GUARDED_BY(mu_);
  int fail_alone_id_ ABSL_GUARDED_BY(mu_) = -1;
  FakeClock* clock_ = nullptr;  // set before the batcher's threads start, read by them only
  std::function<absl::Duration(int64_t)> duration_;
};

// Records completions in the order they happen and checks each request completes once.
class Completions {
 public:
  BatchRequest::CompletionCallback For(int id) {
    return [this, id](absl::Status status) {
      convoy::MutexLock lock(&mu_);
      EXPECT_EQ(statuses_.count(id), 0u) << "request " << id << " completed twice";
      statuses_[id] = std::move(status);
      order_.push_back(id);
    };
  }
  // Blocks until `count` requests have completed; returns their ids in completion order.
  std::vector<int> Await(size_t count) {
    convoy::MutexLock lock(&mu_);
    const auto enough = [this, count]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return order_.size() >= count; };
    mu_.Await(absl::Condition(&enough));
    return order_;
  }
  absl::Status StatusOf(int id) {
    convoy::MutexLock lock(&mu_);
    return statuses_.count(id) ? statuses_[id] : absl::UnknownError("not completed");
  }
  std::vector<int> order() {
    convoy::MutexLock lock(&mu_);
    return order_;
  }

 private:
  convoy::Mutex mu_;
  std::map<int, absl::Status> statuses_ ABSL_GUARDED_BY(mu_);
  std::vector<int> order_ ABSL_GUARDED_BY(mu_);
};

struct RequestOptions {
  int64_t batch_size = 1;
  std::string key = "images:3x224x224";
  uint64_t priority = 0;
  absl::Duration timeout = absl::ZeroDuration();
  const std::atomic<bool>* cancelled = nullptr;
};

class DynamicBatcherTest : public ::testing::Test {
 protected:
  BatchingPolicy Policy(int64_t max_batch_size, absl::Duration delay) {
    BatchingPolicy policy;
    policy.model_name = "resnet";
    policy.max_batch_size = max_batch_size;
    policy.max_queue_delay = delay;
    return policy;
  }
  BatchingPolicy AdaptivePolicy(int64_t max_batch_size) {
    BatchingPolicy policy = Policy(max_batch_size, absl::InfiniteDuration());
    policy.formation = BatchFormation::kAdaptive;
    return policy;
  }


  void Start(const BatchingPolicy& policy, int instances = 1) {
    DynamicBatcher::Options options;
    options.policy = policy;
    options.instance_count = instances;
    options.executor = &executor_;
    options.clock = &clock_;
    CONVOY_ASSERT_OK_AND_ASSIGN(batcher_, DynamicBatcher::Create(options));
  }

  std::unique_ptr<BatchRequest> MakeRequest(int id, const RequestOptions& options = {}) {
    BatchRequest::Spec spec;
    spec.batch_size = options.batch_size;
    spec.shape_key = options.key;
    spec.priority = options.priority;
    spec.timeout = options.timeout;
    if (options.cancelled != nullptr) spec.is_cancelled = [flag = options.cancelled] { return flag->load(); };
    return std::make_unique<BatchRequest>(std::move(spec), std::make_unique<IdPayload>(id), completions_.For(id));
  }

  void Enqueue(int id, const RequestOptions& options = {}) {
    std::unique_ptr<BatchRequest> request = MakeRequest(id, options);
    ASSERT_THAT(batcher_->Enqueue(request), IsOk());
    ASSERT_EQ(request, nullptr);
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }

  std::mt19937 rng_{std::random_device{}()};
  FakeClock clock_;
  RecordingExecutor executor_;
  Completions completions_;
  std::unique_ptr<DynamicBatcher> batcher_;  // destroyed first: its threads use the members above
};

TEST_F(DynamicBatcherTest, FullBatchRunsWithoutWaitingForTheDelay) {
  const int max_batch = Uniform(2, 16);
  Start(Policy(max_batch, absl::Hours(1)));
  for (int i = 0; i < max_batch; ++i) Enqueue(i);
  const std::vector<RecordingExecutor::Run> runs = executor_.AwaitRuns(1);
  EXPECT_EQ(runs[0].ids.size(), static_cast<size_t>(max_batch));
  EXPECT_EQ(completions_.Await(max_batch).size(), static_cast<size_t>(max_batch));
  for (int i = 0; i < max_batch; ++i) EXPECT_THAT(completions_.StatusOf(i), IsOk());
}

TEST_F(DynamicBatcherTest, PartialBatchRunsExactlyAtTheQueueDelay) {
  const absl::Duration delay = absl::Microseconds(Uniform(2, 1000));
  const int count = Uniform(1, 7);
  Start(Policy(8, delay));
  for (int i = 0; i < count; ++i) Enqueue(i);
  clock_.BlockUntilSettled(1);
  clock_.Advance(delay - absl::Microseconds(1));
  clock_.BlockUntilSettled(1);
  EXPECT_TRUE(executor_.runs().empty()) << "ran before the queue delay";
  clock_.Advance(absl::Microseconds(1));
  EXPECT_EQ(executor_.AwaitRuns(1)[0].ids.size(), static_cast<size_t>(count));
  completions_.Await(count);
}

TEST_F(DynamicBatcherTest, PreferredBatchSizeRunsAtOnce) {
  BatchingPolicy policy = Policy(32, absl::Hours(1));
  const int preferred = Uniform(2, 8);
  policy.preferred_batch_sizes = {preferred};
  Start(policy);
  for (int i = 0; i < preferred; ++i) Enqueue(i);
  EXPECT_EQ(executor_.AwaitRuns(1)[0].ids.size(), static_cast<size_t>(preferred));
}

TEST_F(DynamicBatcherTest, HigherPriorityRunsFirstWhenTheInstanceFrees) {
  BatchingPolicy policy = Policy(1, absl::ZeroDuration());
  policy.priority_levels = 3;
  policy.default_priority_level = 3;
  Start(policy);
  executor_.Hold();
  Enqueue(0);
  executor_.AwaitRuns(1);  // the instance is busy with request 0
  Enqueue(1, {.priority = 3});
  Enqueue(2, {.priority = 1});
  Enqueue(3, {.priority = 2});
  Enqueue(4);  // default level 3, behind request 1
  for (int id = 0; id < 5; ++id) executor_.Release(id);
  const std::vector<RecordingExecutor::Run> runs = executor_.AwaitRuns(5);
  std::vector<int> order;
  for (const auto& run : runs) order.push_back(run.ids[0]);
  EXPECT_THAT(order, ElementsAre(0, 2, 3, 1, 4));
  completions_.Await(5);
}

TEST_F(DynamicBatcherTest, RejectTimeoutCompletesWithDeadlineExceededAndNeverRuns) {
  BatchingPolicy policy = Policy(8, absl::Hours(1));
  const absl::Duration timeout = absl::Microseconds(Uniform(1, 500));
  policy.default_queue_policy.default_timeout = timeout;
  Start(policy);
  Enqueue(0);
  clock_.BlockUntilSettled(1);
  clock_.Advance(timeout);
  completions_.Await(1);
  EXPECT_THAT(completions_.StatusOf(0), StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("timed out")));
  clock_.BlockUntilSettled(1);
  EXPECT_TRUE(executor_.runs().empty());
}

TEST_F(DynamicBatcherTest, DelayTimeoutRunsTheLateRequestAfterTheOnesInTime) {
  BatchingPolicy policy = Policy(1, absl::ZeroDuration());
  policy.default_queue_policy.timeout_action = TimeoutAction::kDelay;
  policy.default_queue_policy.default_timeout = absl::Microseconds(50);
  Start(policy);
  executor_.Hold();
  Enqueue(0);
  executor_.AwaitRuns(1);
  Enqueue(1);  // times out while the instance is busy
  clock_.Advance(absl::Microseconds(60));
  Enqueue(2);
  for (int id = 0; id < 3; ++id) executor_.Release(id);
  completions_.Await(3);
  std::vector<int> order;
  for (const auto& run : executor_.runs()) order.push_back(run.ids[0]);
  EXPECT_THAT(order, ElementsAre(0, 2, 1));
  EXPECT_THAT(completions_.StatusOf(1), IsOk()) << "DELAY never fails a request";
}

TEST_F(DynamicBatcherTest, FullQueueRejectsAtOnceAndTheCallerKeepsTheRequest) {
  BatchingPolicy policy = Policy(8, absl::Hours(1));
  const int limit = Uniform(1, 6);
  policy.default_queue_policy.max_queue_size = limit;
  Start(policy);
  for (int i = 0; i < limit; ++i) Enqueue(i);
  std::unique_ptr<BatchRequest> rejected = MakeRequest(100);
  EXPECT_THAT(batcher_->Enqueue(rejected),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr(absl::StrCat("model 'resnet': priority 1 queue is full (", limit, " of ", limit))));
  ASSERT_NE(rejected, nullptr);
  EXPECT_EQ(batcher_->stats().pending_requests, limit);
  EXPECT_THAT(completions_.StatusOf(100), StatusIs(absl::StatusCode::kUnknown, HasSubstr("not completed")));
}

TEST_F(DynamicBatcherTest, CancelledRequestCompletesWithCancelledAndNeverRuns) {
  Start(Policy(1, absl::ZeroDuration()));
  executor_.Hold();
  Enqueue(0);
  executor_.AwaitRuns(1);
  std::atomic<bool> cancelled{false};
  Enqueue(1, {.cancelled = &cancelled});
  Enqueue(2);
  cancelled = true;
  executor_.Release(0);
  executor_.Release(2);
  completions_.Await(3);
  EXPECT_THAT(completions_.StatusOf(1), StatusIs(absl::StatusCode::kCancelled, HasSubstr("cancelled")));
  const std::vector<RecordingExecutor::Run> runs = executor_.runs();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_THAT(runs[1].ids, ElementsAre(2));
}

TEST_F(DynamicBatcherTest, PreserveOrderingHoldsALaterBatchUntilEarlierOnesComplete) {
  BatchingPolicy policy = Policy(1, absl::ZeroDuration());
  policy.preserve_ordering = true;
  Start(policy, /*instances=*/2);
  executor_.Hold();
  Enqueue(0);
  Enqueue(1);
  const std::vector<RecordingExecutor::Run> runs = executor_.AwaitRuns(2);
  EXPECT_NE(runs[0].instance, runs[1].instance) << "both instances run at once";
  executor_.Release(1);
  clock_.BlockUntilSettled(1);  // the second instance finished and went back to waiting
  EXPECT_TRUE(completions_.order().empty()) << "batch 1 completed before batch 0";
  executor_.Release(0);
  EXPECT_THAT(completions_.Await(2), ElementsAre(0, 1));
}

TEST_F(DynamicBatcherTest, WithoutPreserveOrderingBatchesCompleteAsTheyFinish) {
  Start(Policy(1, absl::ZeroDuration()), /*instances=*/2);
  executor_.Hold();
  Enqueue(0);
  Enqueue(1);
  executor_.AwaitRuns(2);
  executor_.Release(1);
  EXPECT_THAT(completions_.Await(1), ElementsAre(1));
  executor_.Release(0);
  EXPECT_THAT(completions_.Await(2), ElementsAre(1, 0));
}

TEST_F(DynamicBatcherTest, RequestsWithBatchDimensionsMergeAndShapesStaySeparate) {
  const int max_batch = 8;
  Start(Policy(max_batch, absl::ZeroDuration()));
  executor_.Hold();
  Enqueue(0, {.key = "warmup"});
  executor_.AwaitRuns(1);
  // While the instance is busy: A-shaped requests of sizes 3, 4, 2 (the 2 does not fit beside 3 + 4) and
  // B-shaped ones in between.
  Enqueue(1, {.batch_size = 3, .key = "A"});
  Enqueue(2, {.batch_size = Uniform(1, 3), .key = "B"});  // 4..6 with request 4: never 7
  Enqueue(3, {.batch_size = 4, .key = "A"});
  Enqueue(4, {.batch_size = 3, .key = "B"});
  Enqueue(5, {.batch_size = 2, .key = "A"});
  for (int id : {0, 1, 2, 5}) executor_.Release(id);
  const std::vector<RecordingExecutor::Run> runs = executor_.AwaitRuns(4);
  EXPECT_THAT(runs[1].ids, ElementsAre(1, 3));
  EXPECT_THAT(runs[2].ids, ElementsAre(2, 4));
  EXPECT_THAT(runs[3].ids, ElementsAre(5));
  completions_.Await(6);
  const BatcherStats stats = batcher_->stats();
  EXPECT_EQ(stats.batches_by_size.at(7), 1);
  EXPECT_EQ(stats.dispatched_requests, 6);
}

TEST_F(DynamicBatcherTest, ExecutorFailuresReachEveryRequestOrJustTheOneThatFailed) {
  Start(Policy(4, absl::ZeroDuration()));
  executor_.Hold();
  Enqueue(0);
  executor_.AwaitRuns(1);
  executor_.FailAlone(2);
  Enqueue(1);
  Enqueue(2);
  executor_.Release(0);
  executor_.Release(1);
  completions_.Await(3);
  EXPECT_THAT(completions_.StatusOf(1), IsOk());
  EXPECT_THAT(completions_.StatusOf(2), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("bad output")));

  executor_.FailBatchesWith(absl::InternalError("device lost"));
  Enqueue(3);
  Enqueue(4);
  executor_.Release(3);
  executor_.Release(4);  // 3 and 4 may form one batch or two, depending on when the instance looks
  completions_.Await(5);
  EXPECT_THAT(completions_.StatusOf(3), StatusIs(absl::StatusCode::kInternal, HasSubstr("device lost")));
  EXPECT_THAT(completions_.StatusOf(4), StatusIs(absl::StatusCode::kInternal, HasSubstr("device lost")));
}

TEST_F(DynamicBatcherTest, ShutdownDrainsQueuedRequestsWithoutWaitingForTheDelay) {
  Start(Policy(8, absl::Hours(1)));
  const int count = Uniform(1, 7);
  for (int i = 0; i < count; ++i) Enqueue(i);
  EXPECT_THAT(batcher_->Shutdown(clock_.Now() + absl::Seconds(1)), IsOk());
  EXPECT_EQ(completions_.order().size(), static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) EXPECT_THAT(completions_.StatusOf(i), IsOk());
  std::unique_ptr<BatchRequest> late = MakeRequest(99);
  EXPECT_THAT(batcher_->Enqueue(late),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("model 'resnet' is shutting down")));
  EXPECT_NE(late, nullptr);
}

TEST_F(DynamicBatcherTest, ShutdownFailsWhatIsStillQueuedAtTheDeadline) {
  Start(Policy(1, absl::ZeroDuration()));
  executor_.Hold();
  Enqueue(0);
  executor_.AwaitRuns(1);
  Enqueue(1);
  Enqueue(2);
  absl::Status shutdown;
  std::thread drain([&] { shutdown = batcher_->Shutdown(clock_.Now() + absl::Milliseconds(10)); });
  clock_.BlockUntilSettled(1);  // Shutdown waits; the instance is stuck in request 0
  clock_.Advance(absl::Milliseconds(10));
  drain.join();
  EXPECT_THAT(shutdown, StatusIs(absl::StatusCode::kDeadlineExceeded,
                                 HasSubstr("2 requests still queued (failed with UNAVAILABLE) and 1 batches")));
  EXPECT_THAT(completions_.StatusOf(1), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_THAT(completions_.StatusOf(2), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  executor_.Release(0);  // the running batch still finishes normally
  completions_.Await(3);
  EXPECT_THAT(completions_.StatusOf(0), IsOk());
}

TEST_F(DynamicBatcherTest, DestroyingWithoutShutdownFailsQueuedRequests) {
  Start(Policy(8, absl::Hours(1)));
  Enqueue(0);
  Enqueue(1);
  clock_.BlockUntilSettled(1);
  batcher_.reset();
  EXPECT_THAT(completions_.order(), UnorderedElementsAre(0, 1));
  EXPECT_THAT(completions_.StatusOf(0), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shut down")));
  EXPECT_TRUE(executor_.runs().empty());
}

TEST_F(DynamicBatcherTest, AdaptivePolicyMeasuresInstancesOnTheClockAndNeverHoldsALoneClient) {
  // A batch of b takes 5 + b ms on the fake clock: batching pays, but a lone client has nobody to wait for.
  executor_.TakeTime(&clock_, [](int64_t b) { return absl::Milliseconds(5 + b); });
  Start(AdaptivePolicy(8));
  const int rounds = Uniform(4, 12);
  for (int id = 0; id < rounds; ++id) {
    Enqueue(id);
    completions_.Await(id + 1);
    clock_.BlockUntilSettled(1);  // the instance came back for work: it reported the batch to the estimator
  }
  for (const RecordingExecutor::Run& run : executor_.runs()) {
    EXPECT_EQ(run.ids.size(), 1u);
    EXPECT_EQ(run.queue_times[0], absl::ZeroDuration()) << "request " << run.ids[0] << " waited";
  }
  const BatcherStats stats = batcher_->stats();
  EXPECT_EQ(stats.total_queue_time, absl::ZeroDuration());
  EXPECT_THAT(stats.estimates.execution_time, ElementsAre(::testing::Pair(1, absl::Milliseconds(6))));
  EXPECT_NEAR(stats.estimates.arrivals_per_second, 1000.0 / 6, 1e-6);  // one arrival per 6 ms batch
  EXPECT_EQ(stats.estimates.clients, 1);  // the lone client, out and expected back
  EXPECT_EQ(stats.estimates.last_wait, absl::ZeroDuration());
}

TEST_F(DynamicBatcherTest, AdaptivePolicyKnowsAClientThatSendsFromItsResponseIsBackAtOnce) {
  // A client that sends its next request the moment its response arrives: from inside the completion callback,
  // i.e. before the instance thread has come back for work. The batcher must already count that client as out
  // when the response goes, so the next request is a return after zero time (not a new arrival, which would leave
  // a phantom client expected back one round later that the policy could hold a batch for).
  executor_.TakeTime(&clock_, [](int64_t b) { return absl::Milliseconds(5 + b); });
  Start(AdaptivePolicy(8));
  const size_t rounds = static_cast<size_t>(Uniform(8, 16));
  std::function<void(int)> send = [&](int id) {
    BatchRequest::Spec spec;
    spec.batch_size = 1;
    spec.shape_key = "images:3x224x224";
    auto request = std::make_unique<BatchRequest>(
        std::move(spec), std::make_unique<IdPayload>(id),
        [&send, &rounds, id, record = completions_.For(id)](absl::Status status) {
          record(std::move(status));
          if (static_cast<size_t>(id) + 1 < rounds) send(id + 1);
        });
    ASSERT_THAT(batcher_->Enqueue(request), IsOk());
  };
  send(0);
  clock_.BlockUntilSettled(1);
  const size_t done_without_waiting = completions_.order().size();
  while (completions_.order().size() < rounds) {  // let a hold run out, so the chain ends either way
    clock_.Advance(absl::Milliseconds(10));
    clock_.BlockUntilSettled(1);
  }
  EXPECT_EQ(done_without_waiting, rounds) << "a request was held for company that could not come";
  for (const RecordingExecutor::Run& run : executor_.runs()) {
    EXPECT_EQ(run.ids.size(), 1u);
    EXPECT_EQ(run.queue_times[0], absl::ZeroDuration()) << "request " << run.ids[0] << " waited";
  }
  const BatcherStats stats = batcher_->stats();
  ASSERT_TRUE(stats.estimates.return_time.has_value()) << "the client was never recognized as returning";
  EXPECT_EQ(*stats.estimates.return_time, absl::ZeroDuration());
  EXPECT_EQ(stats.estimates.clients, 1);
  EXPECT_EQ(stats.estimates.last_wait, absl::ZeroDuration());
}

class CountingObserver : public BatchObserver {
 public:
  void OnPendingCountChanged(int64_t pending) override { last_pending = pending; }
  void OnRunningCountChanged(int64_t running) override {
    last_running = running;
    max_running = std::max<int64_t>(max_running, running);
  }
  void OnEnqueueRejected(const BatchRequest&, const absl::Status&) override { ++rejected; }
  void OnBatchStarted(const Batch& batch, int) override {
    for (const auto& request : batch) queue_time_us += absl::ToInt64Microseconds(request->dispatch_time() -
                                                                                 request->enqueue_time());
    ++batches;
  }
  void OnRequestCompleted(const BatchRequest&, const absl::Status& status) override {
    ++(status.ok() ? succeeded : failed);
  }
  std::atomic<int64_t> last_pending{-1}, rejected{0}, batches{0}, queue_time_us{0}, succeeded{0}, failed{0};
  std::atomic<int64_t> last_running{-1}, max_running{0};
};

TEST_F(DynamicBatcherTest, ObserverSeesPendingAndRunningCountsBatchesQueueTimesAndOutcomes) {
  CountingObserver observer;
  DynamicBatcher::Options options;
  // The batcher must go before the observer it reports to.
  struct ResetFirst {
    std::unique_ptr<DynamicBatcher>& batcher;
    ~ResetFirst() { batcher.reset(); }
  } reset_first{batcher_};
  options.policy = Policy(4, absl::Microseconds(100));
  options.policy.default_queue_policy.max_queue_size = 3;
  options.executor = &executor_;
  options.clock = &clock_;
  options.observer = &observer;
  CONVOY_ASSERT_OK_AND_ASSIGN(batcher_, DynamicBatcher::Create(options));
  for (int i = 0; i < 3; ++i) Enqueue(i);
  EXPECT_EQ(observer.last_pending, 3);
  std::unique_ptr<BatchRequest> rejected = MakeRequest(3);
  EXPECT_FALSE(batcher_->Enqueue(rejected).ok());
  EXPECT_EQ(observer.rejected, 1);
  clock_.BlockUntilSettled(1);
  const int waited_us = Uniform(100, 300);
  clock_.Advance(absl::Microseconds(waited_us));
  completions_.Await(3);
  clock_.BlockUntilSettled(1);  // the instance is back waiting for work: its batch is done
  EXPECT_EQ(observer.last_pending, 0);
  EXPECT_EQ(observer.max_running, 3);  // the three requests ran as one batch
  EXPECT_EQ(observer.last_running, 0);
  EXPECT_EQ(batcher_->stats().running_requests, 0);
  EXPECT_EQ(observer.batches, 1);
  EXPECT_EQ(observer.queue_time_us, 3 * waited_us);
  EXPECT_EQ(observer.succeeded, 3);
  EXPECT_EQ(observer.failed, 0);
  EXPECT_EQ(batcher_->stats().total_queue_time, absl::Microseconds(3 * waited_us));
}

TEST_F(DynamicBatcherTest, CreateRejectsMissingExecutorAndBadInstanceCount) {
  DynamicBatcher::Options options;
  options.policy = Policy(4, absl::ZeroDuration());
  EXPECT_THAT(DynamicBatcher::Create(options), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("executor")));
  options.executor = &executor_;
  options.instance_count = 0;
  EXPECT_THAT(DynamicBatcher::Create(options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("instance_count must be >= 1, got 0")));
}

}  // namespace
}  // namespace convoy::batching
