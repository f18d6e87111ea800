// Whole plans on the device (see plan_check.h). Correctness: a graph with every op the planner maps
// (planner_test_graphs.h), planned in FP32, TF32 and FP16 NHWC, run by one executor step by step and by another that
// records a CUDA graph per batch size, on fresh random inputs against the reference interpreter (double precision per
// op). Tolerances (relative to the output's largest magnitude, plus absolute): FP32 1e-4 + 1e-5, TF32 and FP16
// 1e-2 + 1e-3. A QDQ graph (planner_test_graphs.h, QuantizedBlockGraph) planned on the device must run its folded
// convolutions (the residual add fused into one) as CUDA INT8 steps, both ways, every output within one quantization
// step of the reference (which simulates each quantization in FP32; the INT8 steps are exact, so they differ only at
// rounding ties).
// Timing: a chain of small convolutions, where launches dominate, run both ways.
#include "tests/gpu/plan_check.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/testing/test_tensors.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::gpu_check {
namespace {

using runtime::Executor;
using runtime::Graph;
using runtime::Precision;
using runtime::Tensor;

struct PrecisionCase {
  Precision precision;
  const char* name;
  testing::Tolerance tolerance;
};

absl::StatusOr<std::shared_ptr<const runtime::ExecutionPlan>> PlanOn(cuda::CudaDevice& device, const Graph& graph,
                                                                      Precision precision, int max_batch_size) {
  runtime::PlannerOptions options;
  options.device = &device;
  options.precision = precision;
  options.layout = Layout::kNHWC;
  options.max_batch_size = max_batch_size;
  return runtime::BuildExecutionPlan(graph, options);
}

// Runs `executor` on `x` and compares every graph output with `expected`, within `tolerance` or the output's own in
// `per_output`.
absl::Status RunAndCompare(Executor& executor, int batch, const Tensor& x,
                           const std::map<std::string, Tensor>& expected, const testing::Tolerance& tolerance,
                           const std::map<std::string, testing::Tolerance>& per_output = {}) {
  const runtime::ExecutionPlan& plan = executor.plan();
  std::vector<std::vector<float>> outputs(plan.outputs().size());
  std::vector<TensorView> out_views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    outputs[i].resize(expected.at(plan.outputs()[i].name).data.size());
    testing::PoisonWithNaN(outputs[i].data(), DataType::kFloat32, outputs[i].size());
    out_views.push_back(TensorView{executor.ExpectedOutputDesc(i, batch), outputs[i].data()});
  }
  CONVOY_RETURN_IF_ERROR(executor.Run(
      batch, {TensorView{executor.ExpectedInputDesc(0, batch), const_cast<float*>(x.data.data())}}, out_views));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = plan.outputs()[i].name;
    const auto own = per_output.find(name);
    if (absl::Status s = testing::CompareFloats(outputs[i], expected.at(name).data,
                                                own == per_output.end() ? tolerance : own->second);
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("output '", name, "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

void CheckEveryOpPlans(cuda::CudaDevice& device, bool quick, CaseRunner& cases) {
  const std::vector<PrecisionCase> precisions = {{Precision::kFp32, "fp32", {1e-4, 1e-5}},
                                                 {Precision::kTf32, "tf32", {1e-2, 1e-3}},
                                                 {Precision::kFp16, "fp16", {1e-2, 1e-3}}};
  const std::vector<int> batches = quick ? std::vector<int>{1, 2} : std::vector<int>{1, 4, 3};
  const int max_batch = *std::max_element(batches.begin(), batches.end());
  uint32_t seed = 4242;
  for (const PrecisionCase& p : precisions) {
    const std::string what = absl::StrCat("plan every_op ", p.name, " NHWC");
    absl::StatusOr<Graph> graph = runtime::testing::EveryOpGraph(seed++);
    if (!graph.ok()) {
      cases.Fail(what, absl::StrCat("graph: ", graph.status().message()));
      continue;
    }
    auto plan = PlanOn(device, *graph, p.precision, max_batch);
    if (!plan.ok()) {
      cases.Fail(what, absl::StrCat("planning: ", plan.status().message()));
      continue;
    }
    auto stepwise = Executor::Create({*plan, /*record_per_batch_size=*/false});
    auto graphs = Executor::Create({*plan, /*record_per_batch_size=*/true});
    if (!stepwise.ok() || !graphs.ok()) {
      cases.Fail(what, absl::StrCat("executor: ", (stepwise.ok() ? graphs.status() : stepwise.status()).message()));
      continue;
    }
    for (int batch : batches) {
      for (Executor* executor : {stepwise->get(), graphs->get()}) {
        const bool recorded = executor == graphs->get();
        const std::string label = absl::StrCat(what, " batch ", batch, recorded ? " [graph]" : " [steps]", " (",
                                               (*plan)->steps().size(), " steps)");
        const uint32_t input_seed = seed++;
        cases.Run(label, [&]() -> absl::Status {
          const Tensor x = runtime::testing::RandomTensor({batch, 3, 8, 8}, input_seed);
          CONVOY_ASSIGN_OR_RETURN(auto expected, runtime::RunReference(*graph, {{"x", x}}));
          // Twice: the first run of a batch size records its graph, the second replays it.
          for (int run = 0; run < (recorded ? 2 : 1); ++run) {
            CONVOY_RETURN_IF_ERROR(RunAndCompare(*executor, batch, x, expected, p.tolerance));
          }
          if (recorded && !executor->replays(batch)) {
            return absl::InternalError(
                absl::StrCat("no CUDA graph was recorded: ", executor->recording_error().message()));
          }
          return absl::OkStatus();
        });
      }
    }
  }
}

// The QDQ block graph as an INT8 plan on the device (4 INT8 convolutions, the residual add fused into the one that
// computes its operand, the rest FP32), steps and CUDA graphs, at batch 1 and 3, every output within one quantization
// step of the reference.
void CheckQuantizedPlan(cuda::CudaDevice& device, CaseRunner& cases) {
  const std::string what = "plan qdq_block int8 NHWC";
  const uint32_t seed = 20241207;
  absl::StatusOr<Graph> graph = runtime::testing::QuantizedBlockGraph(seed);
  if (!graph.ok()) {
    cases.Fail(what, absl::StrCat("graph: ", graph.status().message()));
    return;
  }
  auto plan = PlanOn(device, *graph, Precision::kFp32, 3);
  if (!plan.ok()) {
    cases.Fail(what, absl::StrCat("planning: ", plan.status().message()));
    return;
  }
  int int8_convs = 0, add_steps = 0, fused_adds = 0;
  std::string not_cuda;
  for (const auto& step : (*plan)->steps()) {
    int8_convs += step->op() == OpKind::kQuantizedConv2d;
    add_steps += step->op() == OpKind::kQuantizedAdd;
    fused_adds += step->ProblemString(1).find(" +add(conv=") != std::string::npos;
    if (step->AlgorithmName(1).rfind("cuda.", 0) != 0) not_cuda = std::string(step->AlgorithmName(1));
  }
  if (int8_convs != 4 || add_steps != 0 || fused_adds != 1 || !not_cuda.empty()) {
    cases.Fail(what, absl::StrCat(int8_convs, " INT8 convolutions, ", add_steps, " add steps, ", fused_adds,
                                  " fused adds (expected 4, 0, 1)", not_cuda.empty() ? "" : ", a step runs ", not_cuda,
                                  ": ", (*plan)->QuantizationSummary()));
    return;
  }
  // One quantization step of each output (absolute).
  const std::map<std::string, testing::Tolerance> one_step = {{"y", {0.0, 4.0 / 255 * 1.001}},
                                                               {"y2", {0.0, 12.0 / 255 * 1.001}}};
  for (const bool recorded : {false, true}) {
    auto executor = Executor::Create({*plan, recorded});
    if (!executor.ok()) {
      cases.Fail(what, absl::StrCat("executor: ", executor.status().message()));
      continue;
    }
    for (const int batch : {1, 3}) {
      cases.Run(absl::StrCat(what, " batch ", batch, recorded ? " [graph]" : " [steps]"), [&]() -> absl::Status {
        const Tensor x = runtime::testing::RandomTensor({batch, 16, 8, 8}, seed + batch);
        CONVOY_ASSIGN_OR_RETURN(auto expected, runtime::RunReference(*graph, {{"x", x}}));
        // Twice with a graph: the first run of a batch size records it, the second replays it.
        for (int run = 0; run < (recorded ? 2 : 1); ++run) {
          CONVOY_RETURN_IF_ERROR(RunAndCompare(**executor, batch, x, expected, {}, one_step));
        }
        if (recorded && !(*executor)->replays(batch)) {
          return absl::InternalError(
              absl::StrCat("no CUDA graph was recorded: ", (*executor)->recording_error().message()));
        }
        return absl::OkStatus();
      });
    }
  }
}

// Milliseconds per Run (median of `rounds` rounds of `runs` runs each), wall clock: Run waits for the device.
absl::StatusOr<double> TimeRuns(Executor& executor, const Tensor& x, std::vector<float>& y, int runs, int rounds) {
  const TensorView in{executor.ExpectedInputDesc(0, 1), const_cast<float*>(x.data.data())};
  const TensorView out{executor.ExpectedOutputDesc(0, 1), y.data()};
  for (int i = 0; i < 3; ++i) CONVOY_RETURN_IF_ERROR(executor.Run(1, {in}, {out}));  // warm-up, records the graph
  std::vector<double> per_run;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < runs; ++i) CONVOY_RETURN_IF_ERROR(executor.Run(1, {in}, {out}));
    per_run.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                      runs);
  }
  std::sort(per_run.begin(), per_run.end());
  return per_run[per_run.size() / 2];
}

void TimeLaunchBoundPlan(cuda::CudaDevice& device, bool quick, CaseRunner& cases) {
  const int length = quick ? 4 : 32;
  cases.Run(absl::StrFormat("time conv_chain of %d layers, steps vs CUDA graph", length), [&]() -> absl::Status {
    CONVOY_ASSIGN_OR_RETURN(Graph graph, runtime::testing::ConvChainGraph(length, 99));
    CONVOY_ASSIGN_OR_RETURN(auto plan, PlanOn(device, graph, Precision::kFp32, 1));
    const Tensor x = runtime::testing::RandomTensor({1, 4, 6, 6}, 7);
    std::vector<float> y(4 * 6 * 6);
    double ms[2] = {0, 0};
    for (int recorded = 0; recorded < 2; ++recorded) {
      CONVOY_ASSIGN_OR_RETURN(auto executor, Executor::Create({plan, recorded == 1}));
      CONVOY_ASSIGN_OR_RETURN(ms[recorded], TimeRuns(*executor, x, y, quick ? 2 : 200, quick ? 1 : 5));
    }
    Say(absl::StrFormat("conv chain of %d layers (%d steps, batch 1, launch-bound): %.4f ms step by step, "
                        "%.4f ms as a CUDA graph: %.2fx",
                        length, plan->steps().size(), ms[0], ms[1], ms[0] / std::max(ms[1], 1e-9)));
    return absl::OkStatus();
  });
}

}  // namespace

void CheckPlans(cuda::CudaDevice& device, bool quick, CaseRunner& cases) {
  Say("== Whole plans (planner + executor, the server's GPU path): step by step and as CUDA graphs ==");
  CheckEveryOpPlans(device, quick, cases);
  CheckQuantizedPlan(device, cases);
  TimeLaunchBoundPlan(device, quick, cases);
}

}  // namespace convoy::gpu_check
