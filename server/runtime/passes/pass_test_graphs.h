// Test helpers for the passes: a builder of small random graphs (random weights, batch-norm statistics away from
// the identity) and a check that two graphs compute the same outputs on fresh random inputs.
#ifndef CONVOY_SERVER_RUNTIME_PASSES_PASS_TEST_GRAPHS_H_
#define CONVOY_SERVER_RUNTIME_PASSES_PASS_TEST_GRAPHS_H_

#include <random>
#include <string>

#include "server/runtime/graph.h"

namespace convoy::runtime::testing {

class RandomGraphBuilder {
 public:
  // The graph gets one input "x" of shape [N, channels, height, width].
  RandomGraphBuilder(int64_t channels, int64_t height, int64_t width);

  Graph& graph() { return graph_; }
  std::mt19937& rng() { return rng_; }
  Tensor RandomTensor(Shape shape, float low = -1.0f, float high = 1.0f);

  // Each adds one node (and its constants) and returns the output tensor name.
  std::string Conv(const std::string& in, int64_t out_channels, int64_t kernel, int64_t stride, int64_t pad,
                   int64_t groups = 1, bool bias = true);
  std::string BatchNorm(const std::string& in);
  std::string Act(const std::string& in, Activation activation);
  std::string Binary(BinaryKind kind, const std::string& a, const std::string& b);
  std::string Constant(Shape shape, float low = -1.0f, float high = 1.0f);
  std::string Identity(const std::string& in);
  std::string Node(NodeAttrs attrs, const std::vector<std::string>& inputs);

  int64_t ChannelsOf(const std::string& tensor);

 private:
  std::string Fresh(const std::string& stem);

  Graph graph_;
  std::mt19937 rng_;
  int counter_ = 0;
};

// Runs both graphs on the same fresh random input "x" (batch 2) and checks every output agrees:
// max |a - b| <= rel_tol * max |b| per output tensor.
void ExpectSameOutputs(const Graph& before, const Graph& after, double rel_tol = 1e-5);

int CountOps(const Graph& graph, OpKind op);

}  // namespace convoy::runtime::testing

#endif  // CONVOY_SERVER_RUNTIME_PASSES_PASS_TEST_GRAPHS_H_
