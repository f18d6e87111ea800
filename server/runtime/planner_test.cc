// Planner tests: plans of a graph using every mapped op, run by the executor on the CPU in NCHW and NHWC and in
// FP32/FP16/BF16, compared with the reference interpreter on fresh random inputs; plan structure (conversions,
// aliases, memory reuse); Transpose steps in NCHW and NHWC plans; tuning; and load failures that name the node and
// the numbers.
#include "server/runtime/planner.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/registry.h"
#include "kernels/registry/residual_in_output.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime {
namespace {

using ::convoy::runtime::testing::CountSteps;
using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::convoy::testing::Tolerance;
using ::testing::HasSubstr;

uint32_t FreshSeed() { return std::random_device{}(); }

// Runs `plan` at `batch_size` on random input(s) and checks every output against the reference interpreter.
void ExpectPlanMatchesReference(const Graph& graph, std::shared_ptr<const ExecutionPlan> plan, int batch_size,
                                const Tolerance& tolerance) {
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  std::map<std::string, Tensor> inputs;
  std::vector<TensorView> input_views;
  for (size_t i = 0; i < graph.inputs().size(); ++i) {
    const GraphInput& in = graph.inputs()[i];
    inputs[in.name] = testing::RandomTensor(ConcreteShape(in.shape, batch_size), FreshSeed());
    input_views.push_back({executor->ExpectedInputDesc(i, batch_size), inputs[in.name].data.data()});
  }
  std::vector<std::vector<float>> outputs(plan->outputs().size());
  std::vector<TensorView> output_views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc desc = executor->ExpectedOutputDesc(i, batch_size);
    outputs[i].resize(desc.num_elements());
    ::convoy::testing::PoisonWithNaN(outputs[i].data(), DataType::kFloat32, desc.num_elements());
    output_views.push_back({desc, outputs[i].data()});
  }
  ASSERT_THAT(executor->Run(batch_size, input_views, output_views), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(graph, inputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = plan->outputs()[i].name;
    EXPECT_THAT(::convoy::testing::CompareFloats(outputs[i], expected.at(name).data, tolerance), IsOk())
        << "output '" << name << "' at batch size " << batch_size << "\n" << plan->ToString(batch_size);
  }
}

PlannerOptions CpuOptions(Precision precision, Layout layout, int max_batch_size) {
  PlannerOptions options;
  options.device = &CpuDevice::Default();
  options.precision = precision;
  options.layout = layout;
  options.max_batch_size = max_batch_size;
  return options;
}

TEST(PlannerTest, Fp32NchwPlanMatchesReferenceAtEveryBatchSize) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, Layout::kNCHW, 3)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 0) << plan->ToString(1);
  for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
}

TEST(PlannerTest, NhwcPlanConvertsOnlyAtTheEdgesAndMatchesReference) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, Layout::kNHWC, 2)));
  // The input goes to NHWC and the spatial "features" output back to NCHW; the flatten reads a [N,C,1,1] tensor,
  // which lies the same in both layouts, so it needs no conversion.
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 2) << plan->ToString(1);
  for (const auto& step : plan->steps()) {
    if (step->op() == convoy::OpKind::kConv2d) {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("NHWC"));
    }
  }
  for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
}

// One step, every batch size of an 8-batch NHWC plan: a step packs its filter once per packed layout, because oneDNN's
// brgconv (AVX-512 CPUs) lays this filter out as Acdb32a at batch 1 and Acdb48a from batch 2 on (2 threads); a plan
// that packed it once, for batch 1, gave wrong results at every larger batch. Elsewhere (AVX2: one layout for all
// batches) the plan shares one packed filter, and the same check holds.
TEST(PlannerTest, NhwcPlanMatchesReferenceAtEveryBatchSizeWhereTheFilterLayoutFollowsTheBatch) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ProjectionGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, Layout::kNHWC, 8)));
  for (int batch = 1; batch <= 8; ++batch) {
    EXPECT_THAT(plan->ToString(batch), HasSubstr("onednn_nhwc"));
    ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-4});
  }
}

TEST(PlannerTest, Fp16AndBf16PlansMatchReferenceWithinStatedTolerance) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  // FP16 keeps 11 significant bits (relative step 2^-11 ~ 5e-4) and BF16 8 (2^-8 ~ 4e-3); a dozen rounded layers
  // with values of order 1 stay within about ten steps.
  const struct {
    Precision precision;
    Tolerance tolerance;
  } cases[] = {{Precision::kFp16, {1e-2, 5e-3}}, {Precision::kBf16, {6e-2, 4e-2}}};
  for (const auto& c : cases) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(c.precision, Layout::kNCHW, 2)));
    // One conversion into the compute type at the input, one back to FP32 per output.
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 3) << plan->ToString(1);
    ExpectPlanMatchesReference(graph, plan, 2, c.tolerance);
  }
}

// The blocked plan reads the 3-channel image in place (the stem writes blocked from an NCHW input), keeps the
// squeeze-excitation multiply blocked (its [N,C,1,1] gate lies the same in every layout), and reorders only the
// spatial output back to NCHW.
// (The branch node by node, as on devices without a squeeze-excitation algorithm; the fused step is tested below.)
TEST(PlannerTest, BlockedPlanReordersOnlyAtTheOutputOfASqueezeExcitationBlock) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::SqueezeExcitationGraph(FreshSeed()));
  PlannerOptions options = CpuOptions(Precision::kFp32, Layout::kNCHW8c, 3);
  options.fuse_squeeze_excitation = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 0) << plan->ToString(1);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 1) << plan->ToString(1);
  for (const auto& step : plan->steps()) {
    if (step->name() == "stem" || step->name() == "se_mul") {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("NCHW8c")) << step->name();
    }
    if (step->name() == "stem") {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("c=3 k=16"));
    }
    if (step->name() == "se_reduce") {
      EXPECT_THAT(step->ProblemString(1), HasSubstr("FP32 NCHW ")) << "k=4 stays NCHW";
    }
  }
  // FP32 everywhere; oneDNN's kernels sum in a different order than the double reference.
  for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
}

// The squeeze-excitation branch (pool, 1x1 SiLU, 1x1 sigmoid, multiply) as one step in every layout, against the
// reference interpreter's node-by-node evaluation: the step replaces the pool, both convolutions and the multiply,
// takes the multiply's name, and keeps a blocked x blocked (one reorder, at the output, as unfused).
TEST(PlannerTest, SqueezeExcitationBranchIsOneStepInEveryLayoutAndMatchesTheReference) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::SqueezeExcitationGraph(FreshSeed()));
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, layout, 3)));
    SCOPED_TRACE(plan->ToString(1));
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 1);
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 0);
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kBinary), 0);
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConv2d), 3);  // stem, depthwise, projection
    for (const auto& step : plan->steps()) {
      if (step->op() != convoy::OpKind::kSqueezeExcitation) continue;
      EXPECT_EQ(step->name(), "se_mul");
      EXPECT_THAT(std::string(step->AlgorithmName(1)), HasSubstr("cpu.squeeze_excitation.direct"));
      EXPECT_THAT(step->ProblemString(2), HasSubstr(absl::StrCat("n=2 c=16 h=6 w=6 squeeze=4 hidden=silu+bias "
                                                                 "gate=sigmoid+bias FP32 ", LayoutName(layout))));
    }
    if (layout == Layout::kNCHW8c) {
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), 1);
    }
    for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
  }
}

// The multiply's operands in the other order fuse the same; a gate that is also a graph output, an FP16 plan (no
// FP16 algorithm) and the option turned off leave the branch node by node; every plan matches the reference.
TEST(PlannerTest, SqueezeExcitationBranchFusesOnlyWhereNothingElseNeedsItsParts) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph swapped, testing::SqueezeExcitationGraph(FreshSeed()));
  for (Node& node : swapped.mutable_nodes()) {
    if (node.name == "se_mul") std::swap(node.inputs[0], node.inputs[1]);
  }
  ASSERT_THAT(swapped.Finalize(), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(swapped, CpuOptions(Precision::kFp32, Layout::kNHWC, 2)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 1) << plan->ToString(1);
  for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(swapped, plan, batch, {1e-4, 1e-5});

  CONVOY_ASSERT_OK_AND_ASSIGN(Graph gate_out, testing::SqueezeExcitationGraph(FreshSeed()));
  ASSERT_THAT(gate_out.AddOutput("gate"), IsOk());
  ASSERT_THAT(gate_out.Finalize(), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(plan, BuildExecutionPlan(gate_out, CpuOptions(Precision::kFp32, Layout::kNHWC, 2)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 0) << plan->ToString(1);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kBinary), 1);
  for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(gate_out, plan, batch, {1e-4, 1e-5});

  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::SqueezeExcitationGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp16, Layout::kNHWC, 2)));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 0) << plan->ToString(1);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPool2d), 1);
  for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-2, 5e-3});

  PlannerOptions off = CpuOptions(Precision::kFp32, Layout::kNHWC, 2);
  off.fuse_squeeze_excitation = false;
  CONVOY_ASSERT_OK_AND_ASSIGN(plan, BuildExecutionPlan(graph, off));
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kSqueezeExcitation), 0) << plan->ToString(1);
  EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConv2d), 5);
  for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
}

TEST(PlannerTest, FlattenIsAnAliasAndTheChainReusesMemory) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::EveryOpGraph(FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, Layout::kNCHW, 4)));
  const PlanTensor* flat = nullptr;
  for (const PlanTensor& t : plan->tensors()) {
    if (t.name == "flat") flat = &t;
  }
  ASSERT_NE(flat, nullptr);
  EXPECT_EQ(plan->tensors()[flat->alias_of].name, "pooled");
  EXPECT_EQ(plan->steps().size(), graph.nodes().size() - 1);  // every node but the flatten is one step

  CONVOY_ASSERT_OK_AND_ASSIGN(Graph chain, testing::ConvChainGraph(6, FreshSeed()));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto chain_plan,
                              BuildExecutionPlan(chain, CpuOptions(Precision::kFp32, Layout::kNCHW, 4)));
  for (int batch = 1; batch <= 4; ++batch) {
    const MemoryPlan& memory = chain_plan->memory_plan(batch);
    // Five intermediates of [batch,4,6,6] FP32 (576 bytes per image, 256-aligned); the output is the caller's.
    const size_t intermediate = (batch * 576 + 255) / 256 * 256;
    EXPECT_EQ(memory.no_reuse_bytes, 5 * intermediate);
    EXPECT_EQ(memory.arena_bytes, 2 * intermediate) << DescribeMemoryPlan(memory);
  }
  ExpectPlanMatchesReference(chain, chain_plan, 4, {1e-4, 1e-5});
}

// A TF-converted model: NHWC input -> Transpose to NCHW -> conv -> Transpose back to NHWC, plus an H <-> W swap of
// the conv's output as a second output. In an NHWC plan the two NHWC <-> NCHW transposes are views of the same bytes
// (the NHWC input is the conv's NHWC image; the conv's NHWC output is the NHWC-order result), and the H <-> W swap
// reads the conv's output converted to NCHW; the plan matches the reference at every batch size, in FP32 and FP16,
// in both plan layouts.
absl::StatusOr<Graph> NhwcConvGraph(uint32_t seed) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("image_nhwc", {kBatch, 6, 5, 3}));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("w", testing::RandomTensor({8, 3, 3, 3}, seed)));
  CONVOY_RETURN_IF_ERROR(g.AddConstant("b", testing::RandomTensor({8}, seed + 1)));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("to_nchw", TransposeAttrs{{0, 3, 1, 2}}, {"image_nhwc"}, {"image"})));
  Conv2dAttrs conv;
  conv.window = Window2d{3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  conv.has_bias = true;
  conv.activation = Activation::Relu();
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("conv", conv, {"image", "w", "b"}, {"features"})));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("to_nhwc", TransposeAttrs{{0, 2, 3, 1}}, {"features"}, {"out_nhwc"})));
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("swap_hw", TransposeAttrs{{0, 1, 3, 2}}, {"features"}, {"out_whc"})));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("out_nhwc"));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("out_whc"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

TEST(PlannerTest, TransposeIsAStepOnLogicalDimsInNchwAndNhwcPlans) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, NhwcConvGraph(FreshSeed()));
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    SCOPED_TRACE(LayoutName(layout));
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, layout, 3)));
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kTranspose), layout == Layout::kNHWC ? 1 : 3) << plan->ToString(1);
    // NCHW: no conversion at all. NHWC: the conv's output to NCHW for the H <-> W swap.
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kConvert), layout == Layout::kNHWC ? 1 : 0) << plan->ToString(1);
    for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
    CONVOY_ASSERT_OK_AND_ASSIGN(auto fp16, BuildExecutionPlan(graph, CpuOptions(Precision::kFp16, layout, 3)));
    ExpectPlanMatchesReference(graph, fp16, 3, {1e-2, 2e-2});
  }
}

TEST(PlannerTest, TuningTimesLayersLogsThemAndFillsTheCache) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(2, FreshSeed()));
  AlgorithmCache cache;
  std::vector<std::string> log;
  PlannerOptions options = CpuOptions(Precision::kFp32, Layout::kNCHW, 3);
  options.selection = AlgorithmSelection::kTune;
  options.tuned_batch_sizes = {1, 3};
  options.tuning.warmup_runs = 1;
  options.tuning.timed_runs = 2;
  options.cache = &cache;
  options.log = [&log](const std::string& line) { log.push_back(line); };
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  // Two layers tuned at two batch sizes; batch 2 is chosen by heuristic and logs nothing.
  ASSERT_EQ(log.size(), 4u) << ::testing::PrintToString(log);
  EXPECT_THAT(log[0], HasSubstr("tune conv0 batch 1: "));
  EXPECT_THAT(log[1], HasSubstr("tune conv0 batch 3: "));
  // conv1 solves the same problem as conv0, so its choice comes from the cache instead of a second timing.
  EXPECT_THAT(log[2], HasSubstr("tune conv1 batch 1: "));
  EXPECT_THAT(log[2], HasSubstr("[cache]"));
  EXPECT_GT(plan->steps()[0]->TunedMilliseconds(1), 0.0);
  EXPECT_EQ(plan->steps()[0]->TunedMilliseconds(2), 0.0);
  EXPECT_EQ(cache.stats().tunings, 2);
  ExpectPlanMatchesReference(graph, plan, 3, {1e-4, 1e-5});
}

// Long plans (a large model on the emulated GPU verifies every conv at every batch size) say how far they are.
TEST(PlannerTest, ProgressLinesCountThePlannedNodes) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::ConvChainGraph(3, FreshSeed()));
  const size_t nodes = graph.nodes().size();
  ASSERT_GE(nodes, 3u);
  std::vector<std::string> log;
  PlannerOptions options = CpuOptions(Precision::kFp32, Layout::kNCHW, 3);
  options.log = [&log](const std::string& line) { log.push_back(line); };
  options.progress_interval_seconds = 0;  // a line after every node but the last
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  ASSERT_EQ(log.size(), nodes - 1) << ::testing::PrintToString(log);
  for (size_t i = 0; i < log.size(); ++i) {
    EXPECT_THAT(log[i], HasSubstr(absl::StrCat("planning: ", i + 1, " of ", nodes, " nodes after ")));
    EXPECT_THAT(log[i], HasSubstr(absl::StrCat("last '", graph.nodes()[i].name, "'")));
    // The CPU backend does not verify its choices (VerificationOptions::on_cpu).
    EXPECT_THAT(log[i], HasSubstr("every conv/GEMM is chosen for batch sizes 1..3)"));
  }
  // A plan that takes less than the default interval logs no progress.
  log.clear();
  options.progress_interval_seconds = PlannerOptions().progress_interval_seconds;
  ASSERT_THAT(BuildExecutionPlan(graph, options).status(), IsOk());
  EXPECT_THAT(log, ::testing::IsEmpty());
  ExpectPlanMatchesReference(graph, plan, 2, {1e-4, 1e-5});
}

// ---- the output in the residual's storage ------------------------------------------------------------------------

constexpr char kAccumulating[] = "test.cpu.conv2d.accumulate_onto_output";

// A conv that adds the residual onto what the output buffer holds (as oneDNN's sum post-op does), for NCHW FP32
// problems of 13 channels with a residual (the graph below; no other test has such a problem), with the heuristic's
// highest score there: it makes the planner's choice the same on every CPU. It reads the residual before writing
// anything (a copy into the workspace, then the reference conv), so it is right with y == residual and with two
// buffers alike; what the planner must get right is that nothing reads the residual after it was overwritten.
class AccumulatingConv2d final : public Conv2dAlgorithm, public ResidualInOutput {
 public:
  absl::string_view name() const override { return kAccumulating; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& p) const override {
    if (p.c != 13 || p.k != 13 || p.groups != 1 || p.layout != Layout::kNCHW || p.dtype != DataType::kFloat32 ||
        p.epilogue.residual == ResidualMode::kNone) {
      return absl::UnimplementedError("not the residual test problem");
    }
    return absl::OkStatus();
  }
  size_t WorkspaceBytes(const Conv2dProblem& p) const override {
    return static_cast<size_t>(p.output_desc().num_elements()) * sizeof(float);
  }
  absl::Status Run(const Conv2dProblem& p, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext&) const override {
    std::memcpy(workspace.data, args.residual, WorkspaceBytes(p));
    Conv2dArgs from_copy = args;
    from_copy.residual = workspace.data;
    return reference::Conv2d(p, from_copy);
  }
  bool AccumulatesOntoOutput(const Conv2dProblem&) const override { return true; }
  int HeuristicScore(const Conv2dProblem&) const override { return 1000; }
};

CONVOY_REGISTER_ALGORITHM(Conv2dOp, AccumulatingConv2d);

// Input "x" [N,C,5,5]; every conv has C output channels and a bias, the residual ones are 1x1:
//   a = relu(conv3x3(x))            b = relu(conv3x3(a))            (b is also an output)
//   c = relu(conv(b) + a)           a is read again by d: c must not overwrite it
//   d = relu(conv(c) + a)           d's last reader of a: d may take a's storage
//   e = conv(d) + d                 the residual is the conv's own input: no
//   g = relu(conv(e) + b)           b is a graph output: no
//   h = relu(conv(g) + d)           d lies in a's storage, and nothing later reads d or a: h may take it too
//   y = relu(conv(h)) + c           c's last reader, and y the graph output: y may take c's storage (the caller's)
absl::StatusOr<Graph> ResidualChainGraph(int channels, uint32_t seed) {
  Graph g;
  const int64_t c = channels;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", {kBatch, c, 5, 5}));
  int constants = 0;
  auto conv = [&](const std::string& name, const std::string& in, const std::string& residual_in,
                  ResidualPosition position, Activation activation, const std::string& out) {
    const int64_t kernel = residual_in.empty() ? 3 : 1;
    Conv2dAttrs a;
    a.window = Window2d{kernel, kernel, 1, 1, kernel / 2, kernel / 2, kernel / 2, kernel / 2, 1, 1};
    a.has_bias = true;
    a.activation = activation;
    a.residual = position;
    const std::string w = absl::StrCat(name, "_w"), b = absl::StrCat(name, "_b");
    (void)g.AddConstant(w, testing::RandomTensor({c, c, kernel, kernel}, seed + constants++, -0.3f, 0.3f));
    (void)g.AddConstant(b, testing::RandomTensor({c}, seed + constants++));
    std::vector<std::string> inputs = {in, w, b};
    if (!residual_in.empty()) inputs.push_back(residual_in);
    return g.AddNode(MakeNode(name, a, inputs, {out}));
  };
  const Activation relu = Activation::Relu(), none{};
  CONVOY_RETURN_IF_ERROR(conv("conv_a", "x", "", ResidualPosition::kNone, relu, "a"));
  CONVOY_RETURN_IF_ERROR(conv("conv_b", "a", "", ResidualPosition::kNone, relu, "b"));
  CONVOY_RETURN_IF_ERROR(conv("conv_c", "b", "a", ResidualPosition::kBeforeActivation, relu, "c"));
  CONVOY_RETURN_IF_ERROR(conv("conv_d", "c", "a", ResidualPosition::kBeforeActivation, relu, "d"));
  CONVOY_RETURN_IF_ERROR(conv("conv_e", "d", "d", ResidualPosition::kBeforeActivation, none, "e"));
  CONVOY_RETURN_IF_ERROR(conv("conv_g", "e", "b", ResidualPosition::kBeforeActivation, relu, "g"));
  CONVOY_RETURN_IF_ERROR(conv("conv_h", "g", "d", ResidualPosition::kBeforeActivation, relu, "h"));
  CONVOY_RETURN_IF_ERROR(conv("conv_y", "h", "c", ResidualPosition::kAfterActivation, relu, "y"));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("b"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return g;
}

// The view each plan tensor of `plan` is, by name: "d" -> "a" when d lies in a's storage, "" when it owns its own.
std::map<std::string, std::string> ViewsByName(const ExecutionPlan& plan) {
  std::map<std::string, std::string> views;
  for (const PlanTensor& t : plan.tensors()) views[t.name] = t.alias_of >= 0 ? plan.tensors()[t.alias_of].name : "";
  return views;
}

TEST(PlannerTest, OutputTakesTheResidualsStorageOnlyWhereNothingReadsTheResidualLater) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, ResidualChainGraph(13, FreshSeed()));
  AlgorithmCache cache;
  PlannerOptions options = CpuOptions(Precision::kFp32, Layout::kNCHW, 3);
  options.cache = &cache;
  CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
  for (const auto& step : plan->steps()) {
    if (step->name() != "conv_a" && step->name() != "conv_b") {
      EXPECT_EQ(step->AlgorithmName(1), kAccumulating) << step->name();
    }
  }
  const std::map<std::string, std::string> views = ViewsByName(*plan);
  EXPECT_EQ(views.at("c"), "") << "a is read again by conv_d";
  EXPECT_EQ(views.at("d"), "a");
  EXPECT_EQ(views.at("e"), "") << "conv_e's input is its residual";
  EXPECT_EQ(views.at("g"), "") << "b is a graph output";
  EXPECT_EQ(views.at("h"), "a") << "d, the residual, is a view of a";
  EXPECT_EQ(views.at("y"), "c");
  // A wrong overwrite (c over a, g over b, e over d) would change the outputs: checked at every batch size.
  // Without the accumulating algorithm (another layout) the same graph's outputs own their storage.
  for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
}

// The same graph with 16 channels in NHWC and blocked plans, where oneDNN runs the residual convs: with the sum
// post-op on AVX-512 CPUs (d and y then lie in a's and c's storage), with binary_add elsewhere; right either way.
TEST(PlannerTest, ResidualChainMatchesReferenceInNhwcAndBlockedPlans) {
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, ResidualChainGraph(16, FreshSeed()));
  for (Layout layout : {Layout::kNHWC, Layout::kNCHW8c}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, CpuOptions(Precision::kFp32, layout, 3)));
    const std::map<std::string, std::string> views = ViewsByName(*plan);
    for (const char* never : {"c", "e", "g"}) EXPECT_EQ(views.at(never), "") << never;
    std::printf("%s plan: d %s, y %s\n", std::string(LayoutName(layout)).c_str(),
                views.at("d").empty() ? "in its own buffer" : "in a's storage",
                views.at("y").empty() ? "in its own buffer" : "in c's storage");
    for (int batch = 1; batch <= 3; ++batch) ExpectPlanMatchesReference(graph, plan, batch, {1e-4, 1e-5});
  }
}

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> PlanSingleNode(NodeAttrs attrs, Shape input, Shape other,
                                                                    bool other_constant) {
  Graph g;
  CONVOY_RETURN_IF_ERROR(g.AddInput("x", input));
  if (other_constant) {
    CONVOY_RETURN_IF_ERROR(g.AddConstant("b", testing::RandomTensor(other, FreshSeed())));
  } else {
    CONVOY_RETURN_IF_ERROR(g.AddInput("b", other));
  }
  CONVOY_RETURN_IF_ERROR(g.AddNode(MakeNode("the_node", std::move(attrs), {"x", "b"}, {"y"})));
  CONVOY_RETURN_IF_ERROR(g.AddOutput("y"));
  CONVOY_RETURN_IF_ERROR(g.Finalize());
  return BuildExecutionPlan(g, CpuOptions(Precision::kFp32, Layout::kNCHW, 2));
}

TEST(PlannerTest, LoadFailuresNameTheNodeAndTheShapes) {
  // Axes 1 and 3 but not 2: no view of the output has the operand as one block.
  EXPECT_THAT(PlanSingleNode(BinaryAttrs{BinaryKind::kAdd}, {kBatch, 4, 5, 5}, {1, 4, 1, 5}, true),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'the_node' (Binary): cannot broadcast [1,4,1,5] onto [N,4,5,5]")));
  EXPECT_THAT(PlanSingleNode(BinaryAttrs{BinaryKind::kSub}, {1, 4, 1, 1}, {kBatch, 4, 5, 5}, false),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 'the_node' (Binary): the first operand")));
  Conv2dAttrs conv;
  conv.window = Window2d{3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  EXPECT_THAT(PlanSingleNode(conv, {kBatch, 4, 5, 5}, {4, 4, 3, 3}, false),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'the_node' (Conv2d): input 1 'b' must be a constant")));
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 1, 2, 1, 2, 1, 2}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("rank7", TransposeAttrs{{0, 2, 1, 3, 4, 5, 6}}, {"x"}, {"y"})), IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  EXPECT_THAT(BuildExecutionPlan(g, CpuOptions(Precision::kFp32, Layout::kNCHW, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'rank7' (Transpose): the kernel transposes ranks 1..6; got [N,1,2,1,2,1,2]")));
  Graph moves_batch;
  ASSERT_THAT(moves_batch.AddInput("x", {kBatch, 12}), IsOk());
  ASSERT_THAT(moves_batch.AddNode(MakeNode("t", TransposeAttrs{{1, 0}}, {"x"}, {"y"})), IsOk());
  ASSERT_THAT(moves_batch.AddOutput("y"), IsOk());
  ASSERT_THAT(moves_batch.Finalize(), IsOk());
  EXPECT_THAT(BuildExecutionPlan(moves_batch, CpuOptions(Precision::kFp32, Layout::kNCHW, 2)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 't' (Transpose): perm [1,0] moves the dynamic batch axis 0 of [N,12]")));
  EXPECT_THAT(BuildExecutionPlan(g, PlannerOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("device is required")));
}

// Gemm's transA (a Transpose step before the GEMM) and a bias varying along M ([M,N] or [M,1]: the epilogue's
// residual), with alpha, beta and a fused relu, against the reference in NCHW and NHWC plans.
TEST(PlannerTest, GemmTransposesAAndAddsABiasThatVariesAlongM) {
  for (bool transpose_a : {false, true}) {
    for (const Shape& c_shape : {Shape{3, 5}, Shape{3, 1}, Shape{1, 5}, Shape{5}}) {
      SCOPED_TRACE(::testing::Message() << "transA " << transpose_a << ", C " << ShapeToString(c_shape));
      Graph g;
      ASSERT_THAT(g.AddInput("x", transpose_a ? Shape{4, 3} : Shape{3, 4}), IsOk());  // M = 3 static rows, K = 4
      ASSERT_THAT(g.AddConstant("w", testing::RandomTensor({5, 4}, FreshSeed())), IsOk());
      ASSERT_THAT(g.AddConstant("c", testing::RandomTensor(c_shape, FreshSeed())), IsOk());
      GemmAttrs gemm;
      gemm.alpha = 0.25f, gemm.beta = 0.35f, gemm.transpose_a = transpose_a, gemm.transpose_b = true;
      gemm.has_bias = true, gemm.activation = Activation::Relu();
      ASSERT_THAT(g.AddNode(MakeNode("gemm", gemm, {"x", "w", "c"}, {"y"})), IsOk());
      ASSERT_THAT(g.AddOutput("y"), IsOk());
      ASSERT_THAT(g.Finalize(), IsOk());
      for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
        CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(g, CpuOptions(Precision::kFp32, layout, 1)));
        EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kTranspose), transpose_a ? 1 : 0) << plan->ToString(1);
        EXPECT_THAT(plan->ToString(1), HasSubstr(c_shape.size() == 2 && c_shape[0] == 3 ? "residual" : "bias"));
        ExpectPlanMatchesReference(g, plan, 1, {1e-5, 1e-5});
      }
    }
  }
}

// A Pad of any rank runs as the kernel's pad of H and W: an image's H and W in the plan's layout, else one padded
// axis (whole rows of the axes after it) or the last two axes of the row-major tensor; other axis sets name the axes.
TEST(PlannerTest, PadOfAnyRankPadsOneAxisOrTheLastTwo) {
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
    PadMode mode;
  };
  const Case cases[] = {
      {{kBatch, 5, 6}, {0, 1, 2, 0, 2, -1}, PadMode::kConstant},          // [C,H,W]-like: the last two axes
      {{kBatch, 7}, {0, 2, 0, 3}, PadMode::kReflect},                      // rank 2
      {{kBatch, 2, 3, 4, 5}, {0, 0, 1, 0, 0, 0, 0, 2, 0, 0}, PadMode::kEdge},  // rank 5, the depth axis
      {{kBatch, 4, 3, 3}, {0, 1, 0, 0, 0, 2, 0, 0}, PadMode::kConstant},  // an image's channels
      {{kBatch, 4, 3, 3}, {0, 0, 1, 2, 0, 0, 2, 1}, PadMode::kReflect},   // an image's H and W
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(::testing::Message() << ShapeToString(c.x) << " pads " << absl::StrJoin(c.pads, ","));
    Graph g;
    ASSERT_THAT(g.AddInput("x", c.x), IsOk());
    ASSERT_THAT(g.AddNode(MakeNode("pad", PadAttrs{c.mode, c.pads, 0.5f}, {"x"}, {"y"})), IsOk());
    ASSERT_THAT(g.AddOutput("y"), IsOk());
    ASSERT_THAT(g.Finalize(), IsOk());
    for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
      CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(g, CpuOptions(Precision::kFp32, layout, 2)));
      EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kPad), 1) << plan->ToString(1);
      for (int batch = 1; batch <= 2; ++batch) ExpectPlanMatchesReference(g, plan, batch, {0, 0});
    }
  }
  Graph g;
  ASSERT_THAT(g.AddInput("x", {kBatch, 2, 3, 4, 5}), IsOk());
  ASSERT_THAT(g.AddNode(MakeNode("pad3d", PadAttrs{PadMode::kConstant, {0, 0, 1, 1, 1, 0, 0, 1, 1, 1}, 0.0f}, {"x"},
                                 {"y"})),
              IsOk());
  ASSERT_THAT(g.AddOutput("y"), IsOk());
  ASSERT_THAT(g.Finalize(), IsOk());
  EXPECT_THAT(BuildExecutionPlan(g, CpuOptions(Precision::kFp32, Layout::kNCHW, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'pad3d' (Pad): pads axes [2,3,4] of the rank-5 input [N,2,3,4,5]; the kernel "
                                 "pads one axis, or the last two")));
}

TEST(PlannerTest, PrecisionNamesRoundTrip) {
  for (Precision p : {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kTf32}) {
    CONVOY_ASSERT_OK_AND_ASSIGN(Precision parsed, ParsePrecision(PrecisionName(p)));
    EXPECT_EQ(parsed, p);
  }
  EXPECT_THAT(ParsePrecision("fp8"), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'fp8'")));
}

}  // namespace
}  // namespace convoy::runtime
