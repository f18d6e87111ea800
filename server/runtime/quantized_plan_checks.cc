// See quantized_plan_checks.h.
#include "server/runtime/quantized_plan_checks.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/runtime/executor.h"
#include "server/runtime/planner_test_graphs.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime::testing {

using ::convoy::testing::IsOk;

IdenticalShare::~IdenticalShare() {
  EXPECT_GT(total_, 0u);
  EXPECT_GE(identical_, total_ * 99 / 100) << identical_ << " of " << total_ << " outputs identical";
}

void ExpectWithinOneStep(const Graph& graph, std::shared_ptr<const ExecutionPlan> plan, int batch,
                         const std::map<std::string, float>& steps, IdenticalShare& share) {
  const uint32_t seed = std::random_device{}();
  SCOPED_TRACE(::testing::Message() << "batch " << batch << " seed " << seed);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto executor, Executor::Create({plan}));
  std::map<std::string, Tensor> inputs;
  inputs["x"] = RandomTensor(ConcreteShape(graph.inputs()[0].shape, batch), seed);
  std::vector<TensorView> input_views = {{executor->ExpectedInputDesc(0, batch), inputs["x"].data.data()}};
  std::vector<std::vector<float>> outputs(plan->outputs().size());
  std::vector<TensorView> output_views;
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorDesc desc = executor->ExpectedOutputDesc(i, batch);
    outputs[i].assign(desc.num_elements(), std::nanf(""));
    output_views.push_back({desc, outputs[i].data()});
  }
  ASSERT_THAT(executor->Run(batch, input_views, output_views), IsOk());
  CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(graph, inputs));
  for (size_t i = 0; i < outputs.size(); ++i) {
    const std::string& name = plan->outputs()[i].name;
    const std::vector<float>& want = expected.at(name).data;
    ASSERT_EQ(outputs[i].size(), want.size());
    const float step = steps.at(name);
    size_t identical = 0;
    for (size_t j = 0; j < want.size(); ++j) {
      const float diff = std::fabs(outputs[i][j] - want[j]);
      ASSERT_LE(diff, step * 1.001f) << "output '" << name << "' element " << j << ": " << outputs[i][j]
                                     << " vs reference " << want[j] << "\n" << plan->ToString(batch);
      identical += diff < step * 0.001f;
    }
    share.Add(identical, want.size());
  }
}

}  // namespace convoy::runtime::testing
