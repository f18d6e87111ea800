// ModelManager over a throw-away repository: start-up loads with one broken model, readiness, explicit load and
// unload, and poll mode driven by a FakeClock (new version, changed config, removed model).
#include "server/repository/model_manager.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
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

TEST(ModelManagerTest, PollingFollowsTheRepositoryWhenTimeSteps) {
  TestRepository repo;
  repo.AddSimpleCnn("cnn", SimpleCnnConfig("cnn"));
  batching::FakeClock clock;
  ModelManager::Options options = OptionsFor(repo, ModelControlMode::kPoll);
  options.clock = &clock;
  options.poll_interval = absl::Seconds(10);
  options.start_poll_thread = true;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto manager, ModelManager::Create(options));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto first, manager->GetServedModel("cnn", "1"));

  // A new model and a changed config: both picked up at the next poll, not before.
  repo.AddSimpleCnn("added", SimpleCnnConfig("added"));
  repo.WriteConfig("cnn", SimpleCnnConfig("cnn", 4));
  clock.BlockUntilSettled(1);
  EXPECT_THAT(manager->IsModelReady("added"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("added")));
  clock.Advance(absl::Seconds(10));
  auto reload_done = [&] {
    auto cnn = manager->GetServedModel("cnn", "1");
    return manager->IsModelReady("added").value_or(false) && cnn.ok() && cnn->get() != first.get();
  };
  for (int i = 0; i < 2000 && !reload_done(); ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_THAT(manager->IsModelReady("added"), IsTrue());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto reloaded, manager->GetServedModel("cnn", "1"));
  EXPECT_NE(reloaded.get(), first.get());
  EXPECT_EQ(reloaded->config().max_batch_size, 4);
  for (int i = 0; i < 200 && !first->draining(); ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_TRUE(first->draining());

  repo.Remove("added");
  clock.Advance(absl::Seconds(10));
  for (int i = 0; i < 2000 && manager->IsModelReady("added").ok(); ++i) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_THAT(manager->IsModelReady("added"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("added")));
}

}  // namespace
}  // namespace convoy::repository
