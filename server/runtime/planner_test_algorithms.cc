// Test-only CPU "algorithms" that wrap the reference ops, so planner and executor tests can run graphs with every op
// before (and independently of) the fast CPU algorithms. They score far below any real algorithm, so the heuristic
// never prefers them when one exists. Never linked into the server or the CLI.
#include <memory>
#include <string>

#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/registry.h"

namespace convoy::runtime {
namespace {

template <typename Op>
class ReferenceAlgorithm final : public Op::AlgorithmType {
 public:
  using Problem = typename Op::Problem;
  using Args = typename Op::Args;
  explicit ReferenceAlgorithm(std::string name) : name_(std::move(name)) {}
  absl::string_view name() const override { return name_; }
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Problem& problem) const override { return problem.Validate(); }
  absl::Status Run(const Problem& problem, const Args& args, Workspace, const ExecutionContext&) const override {
    return reference::Run(problem, args);
  }
  int HeuristicScore(const Problem&) const override { return -1000; }

 private:
  std::string name_;
};

template <typename Op>
bool RegisterReference(const char* op) {
  OpRegistry<Op>::Global().Register(std::make_unique<ReferenceAlgorithm<Op>>(std::string("test.reference.") + op));
  return true;
}

const bool registered = RegisterReference<Conv2dOp>("conv2d") && RegisterReference<Pool2dOp>("pool2d") &&
                        RegisterReference<GemmOp>("gemm") && RegisterReference<BatchNormOp>("batch_norm") &&
                        RegisterReference<ActivationOp>("activation") &&
                        RegisterReference<BinaryElementwiseOp>("binary") && RegisterReference<ConcatOp>("concat") &&
                        RegisterReference<SplitOp>("split") &&
                        RegisterReference<ChannelShuffleOp>("channel_shuffle") &&
                        RegisterReference<SoftmaxOp>("softmax") && RegisterReference<PadOp>("pad") &&
                        RegisterReference<ConvertOp>("convert") && RegisterReference<PreprocessOp>("preprocess");

}  // namespace
}  // namespace convoy::runtime
