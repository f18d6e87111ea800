// Executor tests: concurrent executors of one plan (run under ThreadSanitizer), input validation messages, the step
// observer, and a graph whose output is its input.
#include "server/runtime/executor.h"

#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

uint32_t FreshSeed() { return std::random_device{}(); }

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> PlanOnCpu(const Graph& graph, int max_batch_size) {
  PlannerOptions options;
  options.device = &CpuDevice::Default();
  options.max_batch_size = max_batch_size;
  return BuildExecutionPlan(graph, options);
}

struct Case {
  int batch_size = 1;
  Tensor input;
  Tensor expected;  // "y"
};

TEST(ExecutorTest, ExecutorsOfOnePlanRunConcurrently) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(3, FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, 4));
  constexpr int kThreads = 4, kRunsPerThread = 3;
  std::vector<std::vector<Case>> cases(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int r = 0; r < kRunsPerThread; ++r) {
      Case c;
      c.batch_size = 1 + (t + r) % 4;
      c.input = testing::RandomTensor({c.batch_size, 4, 6, 6}, FreshSeed());
      CONVOY_ASSERT_OK_AND_ASSIGN(auto out, RunReference(graph, {{"x", c.input}}));
      c.expected = out.at("y");
      cases[t].push_back(std::move(c));
    }
  }
  std::vector<absl::Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto executor = Executor::Create({plan});
      if (!executor.ok()) {
        results[t] = executor.status();
        return;
      }
      for (const Case& c : cases[t]) {
        std::vector<float> y(c.expected.data.size());
        ::convoy::testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
        TensorView in{(*executor)->ExpectedInputDesc(0, c.batch_size), const_cast<float*>(c.input.data.data())};
        TensorView out{(*executor)->ExpectedOutputDesc(0, c.batch_size), y.data()};
        absl::Status s = (*executor)->Run(c.batch_size, {in}, {out});
        if (s.ok()) s = ::convoy::testing::CompareFloats(y, c.expected.data, {1e-4, 1e-5});
        if (!s.ok()) {
          results[t] = s;
          return;
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_THAT(results[t], IsOk()) << "thread " << t;
}

TEST(ExecutorTest, RejectsMismatchedViewsWithTheNumbers) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(1, FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, 2));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  std::vector<float> x(2 * 4 * 6 * 6), y(2 * 4 * 6 * 6);
  TensorView good_in{TensorDesc(DataType::kFloat32, {2, 4, 6, 6}), x.data()};
  TensorView good_out{TensorDesc(DataType::kFloat32, {2, 4, 6, 6}), y.data()};
  TensorView short_in{TensorDesc(DataType::kFloat32, {2, 4, 6, 5}), x.data()};
  TensorView half_in{TensorDesc(DataType::kFloat16, {2, 4, 6, 6}), x.data()};
  EXPECT_THAT(executor->Run(2, {short_in}, {good_out}),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("input 'x': expected [2,4,6,6] FP32 (1152 bytes), got [2,4,6,5] FP32 (960 bytes)")));
  EXPECT_THAT(executor->Run(2, {half_in}, {good_out}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got [2,4,6,6] FP16 (576 bytes)")));
  EXPECT_THAT(executor->Run(3, {good_in}, {good_out}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch size 3 is outside [1, 2]")));
  EXPECT_THAT(executor->Run(2, {}, {good_out}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 1 inputs and 1 outputs, got 0 and 1")));
  EXPECT_THAT(executor->Run(2, {good_in}, {TensorView{good_out.desc, nullptr}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("output 'y': data pointer is null")));
}

TEST(ExecutorTest, StepObserverSeesEveryStepInOrder) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, 1));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  std::vector<int> seen;
  executor->set_step_observer([&](int index, const PlanStep& step, double ms) {
    EXPECT_EQ(&step, plan->steps()[index].get());
    EXPECT_GE(ms, 0.0);
    seen.push_back(index);
  });
  Tensor x = testing::RandomTensor({1, 3, 8, 8}, FreshSeed());
  std::vector<float> probs(10), features(8 * 4 * 4);
  ASSERT_THAT(executor->Run(1, {TensorView{executor->ExpectedInputDesc(0, 1), x.data.data()}},
                            {TensorView{executor->ExpectedOutputDesc(0, 1), probs.data()},
                             TensorView{executor->ExpectedOutputDesc(1, 1), features.data()}}),
              IsOk());
  ASSERT_EQ(seen.size(), plan->steps().size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], static_cast<int>(i));
}

TEST(ExecutorTest, OutputThatIsTheInputIsCopied) {
  Graph graph;
  ASSERT_THAT(graph.AddInput("x", {kBatch, 5}), IsOk());
  ASSERT_THAT(graph.AddNode(MakeNode("same", IdentityAttrs{}, {"x"}, {"y"})), IsOk());
  ASSERT_THAT(graph.AddOutput("y"), IsOk());
  ASSERT_THAT(graph.Finalize(), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, 3));
  EXPECT_TRUE(plan->steps().empty());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  Tensor x = testing::RandomTensor({3, 5}, FreshSeed());
  std::vector<float> y(15);
  ::convoy::testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
  ASSERT_THAT(executor->Run(3, {TensorView{executor->ExpectedInputDesc(0, 3), x.data.data()}},
                            {TensorView{executor->ExpectedOutputDesc(0, 3), y.data()}}),
              IsOk());
  EXPECT_EQ(y, x.data);
}

}  // namespace
}  // namespace convoy::runtime
