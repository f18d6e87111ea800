// ModelManager over a throw-away repository: start-up loads with one broken model, readiness, explicit load and
// unload, and poll mode driven by a FakeClock (new version, changed config, removed model).
#include "server/repository/model_manager.h"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/mutex.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "server/batching/fake_clock.h"
#include "tests/integration/test_repository.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::SimpleCnnConfig;
using ::convoy::testing::StatusIs;
using ::convoy::testing::TestRepository;
using ::testing::HasSubstr;

MATCHER(IsTrue, "is OK and true") { return arg.ok() && *arg; }
MATCHER(IsFalseOk, "is OK and false") { return arg.ok() && !*arg; }

ModelManager::Options OptionsFor(const TestRepository& repo, ModelControlMode mode) {
  ModelManager::Options options;
  options.repository_path = repo.path();
  options.control_mode = mode;
  options.device = &CpuDevice::Default();
  options.start_poll_thread = false;
  return options;
}

ModelState StateOf(const ModelManager& manager, const std::string& model, int64_t version) {
  for (const ModelVersionStatus& s : manager.Index()) {
    if (s.model == model && s.version == version) return s.state;
  }
  return ModelState::kUnavailable;
}

TEST(ModelManagerTest, BrokenModelIsUnavailableWhileOthersServe) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  repo.AddBroken("broken");
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(OptionsFor(repo, ModelControlMode::kNone)));
  EXPECT_EQ(StateOf(*manager, "cnn", 1), ModelState::kReady);
  bool found = false;
  for (const ModelVersionStatus& s : manager->Index()) {
    if (s.model != "broken") continue;
    found = true;
    EXPECT_EQ(s.state, ModelState::kUnavailable);
    EXPECT_THAT(s.reason, HasSubstr("max_batch_size"));
  }
  EXPECT_TRUE(found);
  EXPECT_THAT(manager->GetServedModel("cnn", ""), IsOk());
  EXPECT_THAT(manager->GetServedModel("broken", ""), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("broken")));
  EXPECT_THAT(manager->GetServedModel("nope", ""), StatusIs(absl::StatusCode::kNotFound, HasSubstr("'nope'")));
  EXPECT_THAT(manager->GetServedModel("cnn", "7"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("version '7'")));
  EXPECT_FALSE(manager->IsReady());  // strict readiness: the broken model is expected too
}

TEST(ModelManagerTest, NonStrictReadinessNeedsOneReadyModel) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  repo.AddBroken("broken");
  ModelManager::Options options = OptionsFor(repo, ModelControlMode::kNone);
  options.strict_readiness = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(options));
  EXPECT_TRUE(manager->IsReady());
  CONVOY_EXPECT_OK(manager->Shutdown(absl::Now() + absl::Seconds(5)));
  EXPECT_FALSE(manager->IsReady());
}

// The first step of a graceful exit: readiness goes false (and listeners hear of it) while the models still serve;
// only Shutdown then refuses requests.
TEST(ModelManagerTest, WithdrawnReadinessKeepsServingUntilShutdown) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(OptionsFor(repo, ModelControlMode::kNone)));
  ASSERT_TRUE(manager->IsReady());
  ASSERT_THAT(manager->IsModelReady("cnn"), IsTrue());
  int changes = 0;
  bool ready_seen_by_listener = true;
  manager->AddListener([&] {
    ++changes;
    ready_seen_by_listener = manager->IsReady();
  });
  EXPECT_FALSE(manager->readiness_withdrawn());

  manager->WithdrawReadiness();
  EXPECT_TRUE(manager->readiness_withdrawn());
  EXPECT_EQ(changes, 1);
  EXPECT_FALSE(ready_seen_by_listener);  // a health Watch refreshed by the listener sends NOT_SERVING
  EXPECT_FALSE(manager->IsReady());
  EXPECT_THAT(manager->IsModelReady("cnn"), IsFalseOk());
  EXPECT_THAT(manager->IsModelReady("nope"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
  EXPECT_FALSE(manager->shutting_down());
  EXPECT_THAT(manager->GetServedModel("cnn", ""), IsOk());  // requests are still accepted
  EXPECT_EQ(StateOf(*manager, "cnn", 1), ModelState::kReady);
  EXPECT_EQ(manager->ServedModels().size(), 1u);

  manager->WithdrawReadiness();  // idempotent: no second notification
  EXPECT_EQ(changes, 1);

  CONVOY_EXPECT_OK(manager->Shutdown(absl::Now() + absl::Seconds(5)));
  EXPECT_THAT(manager->GetServedModel("cnn", ""),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
  EXPECT_FALSE(manager->IsReady());
}

TEST(ModelManagerTest, ExplicitLoadAndUnload) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  repo.AddSimpleCnn("other", SimpleCnnConfig("other"));
  ModelManager::Options options = OptionsFor(repo, ModelControlMode::kExplicit);
  options.startup_models = {"other"};
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(options));
  EXPECT_THAT(manager->IsModelReady("cnn"), IsFalseOk());
  EXPECT_THAT(manager->IsModelReady("other"), IsTrue());
  int changes = 0;
  manager->AddListener([&changes] { ++changes; });
  CONVOY_ASSERT_OK(manager->LoadModel("cnn"));
  EXPECT_THAT(manager->IsModelReady("cnn"), IsTrue());
  EXPECT_GT(changes, 0);
  CONVOY_ASSERT_OK(manager->UnloadModel("cnn"));
  EXPECT_THAT(manager->IsModelReady("cnn"), IsFalseOk());
  EXPECT_THAT(manager->LoadModel("missing"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("missing")));
}

TEST(ModelManagerTest, LoadAndUnloadAreRefusedOutsideExplicitMode) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(OptionsFor(repo, ModelControlMode::kNone)));
  EXPECT_THAT(manager->LoadModel("cnn"), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("explicit")));
  EXPECT_THAT(manager->UnloadModel("cnn"), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("explicit")));
}

// Waits, without polling in a sleep loop, until `done` holds: re-evaluates it whenever the manager reports a state
// change (the listener). `limit` (real time) only turns a hang into a failure; a passing run never waits on it.
class StateChangeWaiter {
 public:
  explicit StateChangeWaiter(ModelManager& manager) : state_(std::make_shared<State>()) {
    manager.AddListener([state = state_] {
      convoy::MutexLock lock(&state->mu);
      ++state->changes;
    });
  }

  bool WaitUntil(const std::function<bool()>& done, absl::Duration limit = absl::Seconds(120)) {
    const absl::Time deadline = absl::Now() + limit;
    while (true) {
      uint64_t seen;
      {
        convoy::MutexLock lock(&state_->mu);
        seen = state_->changes;
      }
      if (done()) return true;
      convoy::MutexLock lock(&state_->mu);
      const auto changed = [this, seen]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return state_->changes != seen; };
      if (!state_->mu.AwaitWithDeadline(absl::Condition(&changed), deadline)) return done();
    }
  }

 private:
  struct State {
    convoy::Mutex mu;
    uint64_t changes ABSL_GUARDED_BY(mu) = 0;
  };
  std::shared_ptr<State> state_;  // shared with the listener, which may outlive this waiter
};

// The poll thread polls at creation + k * poll_interval of the FakeClock: nothing can change before the test moves
// time, and each Advance by one interval causes exactly one poll, whether or not the thread was already waiting
// again. Each poll ends with a state notification, which the waiter follows.
TEST(ModelManagerTest, PollingFollowsTheRepositoryWhenTimeSteps) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  batching::FakeClock clock;
  ModelManager::Options options = OptionsFor(repo, ModelControlMode::kPoll);
  options.clock = &clock;
  options.poll_interval = absl::Seconds(10);
  options.start_poll_thread = true;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(options));
  StateChangeWaiter waiter(*manager);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto first, manager->GetServedModel("cnn", "1"));

  // A new model and a changed config: both picked up at the next poll, not before (time has not moved).
  repo.AddSimpleCnn("added", SimpleCnnConfig("added"));
  repo.WriteConfig("cnn", SimpleCnnConfig("cnn", 4));
  EXPECT_THAT(manager->IsModelReady("added"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("added")));
  clock.Advance(absl::Seconds(10));
  // The poll swaps the new cnn in, then drains the old one, then notifies once more.
  EXPECT_TRUE(waiter.WaitUntil([&] {
    auto cnn = manager->GetServedModel("cnn", "1");
    return manager->IsModelReady("added").value_or(false) && cnn.ok() && cnn->get() != first.get() &&
           first->draining();
  }));
  EXPECT_THAT(manager->IsModelReady("added"), IsTrue());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto reloaded, manager->GetServedModel("cnn", "1"));
  EXPECT_NE(reloaded.get(), first.get());
  EXPECT_EQ(reloaded->config().max_batch_size, 4);
  EXPECT_TRUE(first->draining());

  repo.Remove("added");
  clock.Advance(absl::Seconds(10));
  EXPECT_TRUE(waiter.WaitUntil([&] { return !manager->IsModelReady("added").ok(); }));
  EXPECT_THAT(manager->IsModelReady("added"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("added")));
}

// A new version number (with the default `latest: 1`) takes over without a gap: while it loads, the old version
// keeps answering GetServedModel; once it is READY the old one retires. A new version that fails to load leaves the
// old one serving.
TEST(ModelManagerTest, NewVersionTakesOverWithoutAGap) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(OptionsFor(repo, ModelControlMode::kExplicit)));
  CONVOY_ASSERT_OK(manager->LoadModel("cnn"));
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"), 2);
  std::atomic<bool> done{false};
  std::thread load([&] {
    EXPECT_THAT(manager->LoadModel("cnn"), IsOk());
    done = true;
  });
  // How many lookups fall within the load depends on the scheduler (on one busy core the load may even finish before
  // the first): every one of them, however many, must find a version serving.
  int failures = 0;
  do {
    absl::StatusOr<std::shared_ptr<ServedModel>> served = manager->GetServedModel("cnn", "");
    if (!served.ok()) {
      ++failures;
      ADD_FAILURE() << served.status();
    }
  } while (!done);
  load.join();
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(manager->GetServedModel("cnn", "").value()->version(), 2);
  EXPECT_THAT(manager->GetServedModel("cnn", "1"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("version '1'")));
  // Version 3 does not load (its graph is not a graph): version 2 keeps serving.
  const auto three = std::filesystem::path(repo.path()) / "cnn" / "3";
  std::filesystem::create_directories(three);
  std::ofstream(three / "model.yaml") << "this: is not a graph\n";
  EXPECT_THAT(manager->LoadModel("cnn"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("version 3")));
  EXPECT_EQ(manager->GetServedModel("cnn", "").value()->version(), 2);
}

}  // namespace
}  // namespace convoy::repository
