// Image-by-image prefixes: every prefix length of several test graphs, in every CPU layout, gives the outputs the
// whole batch gives (fresh random inputs, NaN-poisoned outputs); the batch buffers a prefix touches never overlap;
// the longest prefix stops where images mix; the choice from step times; the observer's view of a prefix.
#include "server/runtime/image_by_image.h"

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"

namespace convoy::runtime {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int kMaxBatch = 4;

uint32_t FreshSeed() { return std::random_device{}(); }

struct NamedGraph {
  std::string name;
  Graph graph;
};

std::vector<NamedGraph> TestGraphs() {
  std::vector<NamedGraph> graphs;
  auto add = [&graphs](const std::string& name, absl::StatusOr<Graph> graph) {
    EXPECT_THAT(graph.status(), IsOk()) << name;
    if (graph.ok()) graphs.push_back({name, std::move(*graph)});
  };
  add("every op", testing::EveryOpGraph(FreshSeed()));
  add("squeeze-excitation", testing::SqueezeExcitationGraph(FreshSeed()));
  add("conv chain", testing::ConvChainGraph(4, FreshSeed()));
  add("quantized block", testing::QuantizedBlockGraph(FreshSeed()));
  return graphs;
}

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> PlanOnCpu(const Graph& graph, Layout layout) {
  PlannerOptions options;
  options.device = &CpuDevice::Default();
  options.max_batch_size = kMaxBatch;
  options.layout = layout;
  return BuildExecutionPlan(graph, options);
}

// Fresh random inputs for `batch` images, in the plan's input descriptors.
struct Inputs {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<TensorView> views;
};

Inputs RandomInputs(const Executor& executor, int batch) {
  Inputs in;
  for (size_t i = 0; i < executor.plan().inputs().size(); ++i) {
    const TensorDesc desc = executor.ExpectedInputDesc(i, batch);
    in.buffers.emplace_back(desc.size_bytes());
    ::convoy::testing::FillUniform(in.buffers.back().data(), desc.dtype(), desc.num_elements(), FreshSeed());
  }
  for (size_t i = 0; i < in.buffers.size(); ++i) {
    in.views.push_back({executor.ExpectedInputDesc(i, batch), in.buffers[i].data()});
  }
  return in;
}

// Runs `executor` on `inputs` into fresh NaN-poisoned outputs; returns them as floats, output after output.
absl::StatusOr<std::vector<float>> RunPoisoned(Executor& executor, int batch, const Inputs& inputs) {
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<TensorView> views;
  for (size_t i = 0; i < executor.plan().outputs().size(); ++i) {
    const TensorDesc desc = executor.ExpectedOutputDesc(i, batch);
    buffers.emplace_back(desc.size_bytes());
    ::convoy::testing::PoisonWithNaN(buffers.back().data(), desc.dtype(), desc.num_elements());
  }
  for (size_t i = 0; i < buffers.size(); ++i) {
    views.push_back({executor.ExpectedOutputDesc(i, batch), buffers[i].data()});
  }
  CONVOY_RETURN_IF_ERROR(executor.Run(batch, inputs.views, views));
  std::vector<float> all;
  for (const TensorView& v : views) {
    const std::vector<float> values = ::convoy::testing::ToFloats(v.data, v.desc.dtype(), v.desc.num_elements());
    all.insert(all.end(), values.begin(), values.end());
  }
  return all;
}

TEST(ImageByImageTest, EveryPrefixGivesTheWholeBatchsOutputs) {
  for (const NamedGraph& g : TestGraphs()) {
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c}) {
      const std::string where = absl::StrCat(g.name, ", ", LayoutName(layout));
      CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(g.graph, layout));
      const int longest = LongestImageByImagePrefix(*plan);
      ASSERT_GT(longest, 0) << where;
      CONVOY_ASSERT_OK_AND_ASSIGN(auto whole, Executor::Create({plan}));
      for (int steps = 1; steps <= longest; ++steps) {
        Executor::Options options;
        options.plan = plan;
        options.image_by_image_steps.assign(kMaxBatch + 1, steps);
        options.image_by_image_steps[0] = options.image_by_image_steps[1] = 0;
        CONVOY_ASSERT_OK_AND_ASSIGN(auto split, Executor::Create(options));
        // Batch 3 for every prefix; 2 and 4 for the longest.
        for (int batch : steps == longest ? std::vector<int>{2, 3, 4} : std::vector<int>{3}) {
          ASSERT_EQ(split->image_by_image_steps(batch), steps);
          const Inputs inputs = RandomInputs(*whole, batch);
          CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> expected, RunPoisoned(*whole, batch, inputs));
          CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> actual, RunPoisoned(*split, batch, inputs));
          // The prefix runs the plan's batch-1 algorithms, which may round differently from the batch's.
          EXPECT_THAT(::convoy::testing::CompareFloats(actual, expected, {1e-4, 1e-5}), IsOk())
              << where << ": the first " << steps << " of " << plan->steps().size() << " steps image by image, batch "
              << batch;
        }
      }
    }
  }
}

TEST(ImageByImageTest, BatchBuffersThePrefixTouchesNeverOverlap) {
  for (const NamedGraph& g : TestGraphs()) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(g.graph, Layout::kNHWC));
    const int longest = LongestImageByImagePrefix(*plan);
    for (int steps = 1; steps <= longest; ++steps) {
      for (int batch = 2; batch <= kMaxBatch; ++batch) {
        CONVOY_ASSERT_OK_AND_ASSIGN(ImageByImageLayout layout, MakeImageByImageLayout(*plan, batch, steps));
        const std::string where = absl::StrCat(g.name, ": ", steps, " steps, batch ", batch);
        // Every root the prefix touches, with its storage.
        std::vector<int> batch_roots, scratch_roots;
        for (int s = 0; s < steps; ++s) {
          for (const std::vector<int>* ids : {&plan->steps()[s]->inputs(), &plan->steps()[s]->outputs()}) {
            for (int id : *ids) {
              const int root = layout.batch_memory.roots[id];
              if (layout.storage[id] == ImageByImageLayout::Storage::kScratch) {
                scratch_roots.push_back(root);
              } else if (layout.batch_memory.offsets[root] >= 0) {
                batch_roots.push_back(root);
              }
            }
          }
        }
        for (std::vector<int>* roots : {&batch_roots, &scratch_roots}) {
          std::sort(roots->begin(), roots->end());
          roots->erase(std::unique(roots->begin(), roots->end()), roots->end());
        }
        // Live through the whole prefix: no two may share bytes.
        for (size_t a = 0; a < batch_roots.size(); ++a) {
          for (size_t b = a + 1; b < batch_roots.size(); ++b) {
            const int64_t a0 = layout.batch_memory.offsets[batch_roots[a]];
            const int64_t b0 = layout.batch_memory.offsets[batch_roots[b]];
            const int64_t a1 = a0 + plan->tensors()[batch_roots[a]].Bytes(batch);
            const int64_t b1 = b0 + plan->tensors()[batch_roots[b]].Bytes(batch);
            EXPECT_TRUE(a1 <= b0 || b1 <= a0) << where << ": tensors '" << plan->tensors()[batch_roots[a]].name
                                              << "' and '" << plan->tensors()[batch_roots[b]].name << "' overlap";
          }
        }
        // Scratch lies above the batch's buffers and inside the arena.
        for (int root : scratch_roots) {
          EXPECT_GE(layout.scratch_offset[root], static_cast<int64_t>(layout.batch_memory.arena_bytes)) << where;
          EXPECT_LE(layout.scratch_offset[root] + static_cast<int64_t>(plan->tensors()[root].Bytes(1)),
                    static_cast<int64_t>(layout.arena_bytes))
              << where;
        }
      }
    }
  }
}

TEST(ImageByImageTest, LongestPrefixStopsWhereImagesMix) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, Layout::kNHWC));
  const int longest = LongestImageByImagePrefix(*plan);
  ASSERT_GT(longest, 0);
  ASSERT_LT(longest, static_cast<int>(plan->steps().size()));
  // The classifier's Gemm takes every image's row in one product: the first step that may not go image by image.
  EXPECT_EQ(plan->steps()[longest]->op(), convoy::OpKind::kGemm) << plan->steps()[longest]->name();

  PlannerOptions one;
  one.device = &CpuDevice::Default();
  one.max_batch_size = 1;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto unbatched, BuildExecutionPlan(graph, one));
  EXPECT_EQ(LongestImageByImagePrefix(*unbatched), 0);

  EXPECT_THAT(MakeImageByImageLayout(*plan, 2, 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(absl::StrCat("expected 1..", longest))));
  EXPECT_THAT(MakeImageByImageLayout(*plan, 2, longest + 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(absl::StrCat("got ", longest + 1))));
  EXPECT_THAT(MakeImageByImageLayout(*plan, 1, 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch size: expected 2..4, got 1")));
  Executor::Options options;
  options.plan = plan;
  options.image_by_image_steps = {0, 0, longest + 1};
  EXPECT_THAT(Executor::Create(options).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("image-by-image steps")));
}

TEST(ImageByImageTest, ChoosesThePrefixTheStepTimesFavour) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(4, FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, Layout::kNHWC));
  const size_t n = plan->steps().size();
  ASSERT_GE(n, 4u);
  ASSERT_EQ(LongestImageByImagePrefix(*plan), static_cast<int>(n));
  // At batch 4: the first two steps take 10 ms at the batch and 1 ms per image (gain 6 each); the third loses 7.
  std::vector<double> at_one(n, 1.0), at_batch(n, 4.0);
  at_batch[0] = at_batch[1] = 10.0;
  at_batch[2] = 1.0;  // 4 x 1 - 1 = 3 lost
  ImageByImageChoice choice = ChooseImageByImageSteps(*plan, 4, at_one, at_batch);
  EXPECT_EQ(choice.steps, 2);
  EXPECT_DOUBLE_EQ(choice.batch_milliseconds, 20.0);
  EXPECT_DOUBLE_EQ(choice.image_by_image_milliseconds, 8.0);
  // The shortest prefix within 10 % of the best gain: step 0 alone saves 11.5, steps 0-1 save 12.
  std::vector<double> front(n, 4.0);
  front[0] = 15.5;
  front[1] = 4.5;
  EXPECT_EQ(ChooseImageByImageSteps(*plan, 4, at_one, front).steps, 1);
  // A gain under the threshold keeps the batch whole.
  std::vector<double> flat(n, 4.0);
  flat[0] = 4.1;
  EXPECT_EQ(ChooseImageByImageSteps(*plan, 4, at_one, flat).steps, 0);
  // Missing or mismatched times, or batch 1, choose nothing.
  EXPECT_EQ(ChooseImageByImageSteps(*plan, 4, {}, at_batch).steps, 0);
  EXPECT_EQ(ChooseImageByImageSteps(*plan, 1, at_one, at_batch).steps, 0);
}

TEST(ImageByImageTest, ObserverSeesEachPrefixStepOnceWithItsImagesTime) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(3, FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, PlanOnCpu(graph, Layout::kNHWC));
  Executor::Options options;
  options.plan = plan;
  options.image_by_image_steps = {0, 0, 0, 2};
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create(options));
  std::vector<int> seen;
  executor->set_step_observer([&seen](int index, const PlanStep&, double milliseconds) {
    EXPECT_GE(milliseconds, 0.0);
    seen.push_back(index);
  });
  const Inputs inputs = RandomInputs(*executor, 3);
  CONVOY_ASSERT_OK_AND_ASSIGN(std::vector<float> out, RunPoisoned(*executor, 3, inputs));
  std::vector<int> expected(plan->steps().size());
  for (size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<int>(i);
  EXPECT_EQ(seen, expected);
  EXPECT_EQ(executor->image_by_image_steps(2), 0);
  EXPECT_EQ(executor->image_by_image_steps(3), 2);
}

}  // namespace
}  // namespace convoy::runtime
