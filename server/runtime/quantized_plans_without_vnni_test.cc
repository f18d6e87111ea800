// QDQ plans on a CPU without VNNI, on every machine: before anything else in the process queries it, oneDNN's ISA is
// lowered to AVX2 (dnnl::set_max_cpu_isa, what ONEDNN_MAX_CPU_ISA=AVX2 does), where oneDNN 2.6's INT8 convolutions sum
// pairs of u8 x s8 products into saturating 16-bit sums and are not exact. Checked: cpu.quantized_conv2d.onednn*
// declines every problem of the shared INT8 list, naming the ISA and why; a QDQ block's plan runs its convolutions in
// INT8 on the own exact kernels instead (cpu.quantized_conv2d.gemm_nhwc*, quantized_conv2d_gemm.h), and its outputs
// are the reference interpreter's simulation of the QDQ graph within one quantization step (quantized_plan_checks.h:
// fresh random inputs, outputs poisoned with NaN, at least 99 % identical over the runs).
#include <map>
#include <random>
#include <string>
#include <vector>

#include "dnnl.hpp"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/cpu/quantized_conv2d_onednn.h"
#include "kernels/testing/quantized_conv2d_cases.h"
#include "server/runtime/planner.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/quantized_plan_checks.h"

namespace convoy::runtime {
namespace {

using ::convoy::runtime::testing::CountSteps;
using ::testing::HasSubstr;

// Runs during static initialization, before any test (or registration) can ask oneDNN for its ISA.
const dnnl::status kLowered = dnnl::set_max_cpu_isa(dnnl::cpu_isa::avx2);

TEST(QuantizedPlansWithoutVnniTest, TheIsaWasLoweredBeforeOneDnnChoseOne) {
  ASSERT_EQ(kLowered, dnnl::status::success);
  const absl::Status exact = cpu::onednn::CheckExactInt8Products();
  EXPECT_TRUE(absl::IsUnimplemented(exact)) << exact;
  EXPECT_THAT(exact.message(), HasSubstr("ISA avx2"));
  EXPECT_THAT(exact.message(), HasSubstr("need VNNI"));
}

TEST(QuantizedPlansWithoutVnniTest, TheInt8ConvolutionsDeclineEveryProblem) {
  ASSERT_EQ(kLowered, dnnl::status::success);
  const cpu::QuantizedConv2dOnednnNhwc first_choice;
  const cpu::QuantizedConv2dOnednnNhwcJit jit;
  for (const QuantizedConv2dProblem& p : ::convoy::testing::QuantizedConv2dTestProblems(Layout::kNHWC)) {
    for (const QuantizedConv2dAlgorithm* algorithm :
         std::vector<const QuantizedConv2dAlgorithm*>{&first_choice, &jit}) {
      const absl::Status can = algorithm->CanImplement(p);
      EXPECT_TRUE(absl::IsUnimplemented(can)) << algorithm->name() << " " << p.ToString() << ": " << can;
      EXPECT_THAT(can.message(), HasSubstr("saturating 16-bit sums")) << algorithm->name();
    }
  }
}

TEST(QuantizedPlansWithoutVnniTest, PlansRunTheConvolutionsInInt8OnTheOwnKernelsAndMatchTheSimulationWithinOneStep) {
  ASSERT_EQ(kLowered, dnnl::status::success);
  const uint32_t graph_seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "graph seed " << graph_seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(Graph graph, testing::QuantizedBlockGraph(graph_seed));
  const std::map<std::string, float> steps = {{"y", 4.0f / 255}, {"y2", 12.0f / 255}};
  testing::IdenticalShare share;
  for (Layout layout : {Layout::kNHWC, Layout::kNCHW8c}) {
    SCOPED_TRACE(LayoutName(layout));
    PlannerOptions options;
    options.device = &CpuDevice::Default();
    options.precision = Precision::kFp32;
    options.layout = layout;
    options.max_batch_size = 2;
    CONVOY_ASSERT_OK_AND_ASSIGN(auto plan, BuildExecutionPlan(graph, options));
    const std::string text = plan->ToString(1);
    // conv_d keeps FP32 for its sigmoid, as on any CPU; the other four run INT8, none of them on oneDNN.
    EXPECT_EQ(CountSteps(*plan, convoy::OpKind::kQuantizedConv2d), 4) << text;
    EXPECT_THAT(plan->QuantizationSummary(), HasSubstr("4 of 5 quantized convolutions")) << plan->QuantizationSummary();
    EXPECT_THAT(text, HasSubstr("algorithm cpu.quantized_conv2d.gemm_nhwc"));
    EXPECT_THAT(text, ::testing::Not(HasSubstr("algorithm cpu.quantized_conv2d.onednn")));
    for (int batch = 1; batch <= 2; ++batch) testing::ExpectWithinOneStep(graph, plan, batch, steps, share);
  }
}

}  // namespace
}  // namespace convoy::runtime
