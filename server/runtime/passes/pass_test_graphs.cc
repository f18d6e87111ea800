// See pass_test_graphs.h.
#include "server/runtime/passes/pass_test_graphs.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "server/runtime/reference_interpreter.h"

namespace convoy::runtime::testing {

RandomGraphBuilder::RandomGraphBuilder(int64_t channels, int64_t height, int64_t width)
    : rng_(std::random_device{}()) {
  EXPECT_TRUE(graph_.AddInput("x", {kBatch, channels, height, width}).ok());
}

Tensor RandomGraphBuilder::RandomTensor(Shape shape, float low, float high) {
  Tensor t = Tensor::Zeros(std::move(shape));
  std::uniform_real_distribution<float> dist(low, high);
  for (float& v : t.data) v = dist(rng_);
  return t;
}

std::string RandomGraphBuilder::Fresh(const std::string& stem) { return absl::StrCat(stem, "_", ++counter_); }

int64_t RandomGraphBuilder::ChannelsOf(const std::string& tensor) {
  EXPECT_TRUE(graph_.Finalize().ok());
  return graph_.ShapeOf(tensor).value()[1];
}

std::string RandomGraphBuilder::Constant(Shape shape, float low, float high) {
  std::string name = Fresh("const");
  EXPECT_TRUE(graph_.AddConstant(name, RandomTensor(std::move(shape), low, high)).ok());
  return name;
}

std::string RandomGraphBuilder::Node(NodeAttrs attrs, const std::vector<std::string>& inputs) {
  std::string out = Fresh("t");
  EXPECT_TRUE(graph_.AddNode(MakeNode(Fresh("node"), std::move(attrs), inputs, {out})).ok());
  return out;
}

std::string RandomGraphBuilder::Conv(const std::string& in, int64_t out_channels, int64_t kernel, int64_t stride,
                                     int64_t pad, int64_t groups, bool bias) {
  int64_t in_channels = ChannelsOf(in);
  Conv2dAttrs a;
  a.window = Window2d{kernel, kernel, stride, stride, pad, pad, pad, pad, 1, 1};
  a.groups = groups;
  a.has_bias = bias;
  float bound = 1.0f / std::sqrt(static_cast<float>(in_channels / groups * kernel * kernel));
  std::vector<std::string> inputs = {in, Constant({out_channels, in_channels / groups, kernel, kernel}, -bound, bound)};
  if (bias) inputs.push_back(Constant({out_channels}));
  return Node(a, inputs);
}

std::string RandomGraphBuilder::BatchNorm(const std::string& in) {
  int64_t c = ChannelsOf(in);
  return Node(BatchNormAttrs{1e-3f},
              {in, Constant({c}, 0.5f, 1.5f), Constant({c}), Constant({c}, -0.5f, 0.5f), Constant({c}, 0.2f, 2.0f)});
}

std::string RandomGraphBuilder::Act(const std::string& in, Activation activation) {
  return Node(ActivationAttrs{activation}, {in});
}

std::string RandomGraphBuilder::Binary(BinaryKind kind, const std::string& a, const std::string& b) {
  return Node(BinaryAttrs{kind}, {a, b});
}

std::string RandomGraphBuilder::Identity(const std::string& in) { return Node(IdentityAttrs{}, {in}); }

void ExpectSameOutputs(const Graph& before, const Graph& after, double rel_tol) {
  ASSERT_EQ(before.inputs().size(), 1u);
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor x = Tensor::Zeros(ConcreteShape(before.inputs()[0].shape, 2));
  for (float& v : x.data) v = dist(rng);
  CONVOY_ASSERT_OK_AND_ASSIGN(auto expected, RunReference(before, {{before.inputs()[0].name, x}}));
  CONVOY_ASSERT_OK_AND_ASSIGN(auto actual, RunReference(after, {{after.inputs()[0].name, x}}));
  ASSERT_EQ(expected.size(), actual.size());
  for (const auto& [name, want] : expected) {
    ASSERT_TRUE(actual.count(name)) << "output '" << name << "' missing after the pass";
    const Tensor& got = actual.at(name);
    ASSERT_EQ(got.shape, want.shape) << name;
    double max_ref = 0.0, max_diff = 0.0;
    for (size_t i = 0; i < want.data.size(); ++i) {
      max_ref = std::max(max_ref, std::abs(static_cast<double>(want.data[i])));
      max_diff = std::max(max_diff, std::abs(static_cast<double>(want.data[i]) - got.data[i]));
    }
    EXPECT_GT(max_ref, 0.0) << name << ": reference output is all zeros, the comparison would prove nothing";
    EXPECT_LE(max_diff, rel_tol * max_ref) << name << ": max diff " << max_diff << ", max |ref| " << max_ref;
  }
}

int CountOps(const Graph& graph, OpKind op) {
  return static_cast<int>(std::count_if(graph.nodes().begin(), graph.nodes().end(),
                                        [op](const runtime::Node& n) { return n.op() == op; }));
}

}  // namespace convoy::runtime::testing
