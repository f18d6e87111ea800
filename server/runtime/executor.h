// The executor: runs an ExecutionPlan for one batch at a time on one execution context. One executor per model
// instance; several executors of one plan may run concurrently from different threads.
//
//   CONVOY_ASSIGN_OR_RETURN(auto executor, Executor::Create({plan}));
//   CONVOY_RETURN_IF_ERROR(executor->Run(batch_size, {images_view}, {logits_view}));
//
// Memory: the activation arena (sized for the largest batch's memory plan) and the workspace (the largest step
// workspace) are allocated once in Create; Run allocates nothing on the device.
// Inputs and outputs are host TensorViews in the order of plan.inputs() / plan.outputs(), with exactly the
// descriptors the plan expects for the batch (ExpectedInputDesc / ExpectedOutputDesc). On the CPU, inputs are read in
// place and outputs are written in place where the plan allows (zero copy); on other devices they are copied through
// Device::CopyToDevice / CopyToHost.
//
// Thread safety: thread-compatible (one Run at a time per executor); the plan is shared read-only.
#ifndef CONVOY_SERVER_RUNTIME_EXECUTOR_H_
#define CONVOY_SERVER_RUNTIME_EXECUTOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/common/tensor.h"
#include "kernels/registry/device.h"
#include "server/runtime/plan.h"

namespace convoy::runtime {

class Executor {
 public:
  // Called after each step with its index and wall time in milliseconds (the device is synchronized first, so the
  // time is the step's own). Setting one makes runs slower: use it for `inspect` and profiling, not serving.
  using StepObserver = std::function<void(int step_index, const PlanStep& step, double milliseconds)>;

  struct Options {
    std::shared_ptr<const ExecutionPlan> plan;  // required
    // The context kernels run on; default: plan->device().context() (its thread pool, or its default stream).
    // TODO(cuda): each CUDA executor should own a stream here and, where enabled, capture one CUDA graph per batch
    // size on its first run and replay it afterwards (the steps are fixed per batch size and Run allocates nothing,
    // which is what capture needs); the CUDA backend adds that when it lands.
    std::optional<ExecutionContext> context;
  };
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Options& options);

  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  const ExecutionPlan& plan() const { return *plan_; }
  TensorDesc ExpectedInputDesc(size_t index, int batch_size) const;
  TensorDesc ExpectedOutputDesc(size_t index, int batch_size) const;

  // Runs the plan on `batch_size` images. Fails (naming the tensor and the numbers) when batch_size is out of
  // [1, max_batch_size], a view count differs, a descriptor differs, or a pointer is null; returns a step's error
  // prefixed with the step's name.
  absl::Status Run(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  void set_step_observer(StepObserver observer) { observer_ = std::move(observer); }

 private:
  Executor(std::shared_ptr<const ExecutionPlan> plan, ExecutionContext context)
      : plan_(std::move(plan)), context_(context) {}
  absl::Status Validate(int batch_size, absl::Span<const TensorView> inputs,
                        absl::Span<const TensorView> outputs) const;
  absl::Status BindTensors(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);
  absl::Status RunSteps(int batch_size);
  absl::Status CopyOutputs(int batch_size, absl::Span<const TensorView> outputs);

  std::shared_ptr<const ExecutionPlan> plan_;
  ExecutionContext context_;
  DeviceAllocation arena_;
  DeviceAllocation workspace_;
  std::vector<void*> pointers_;  // per plan tensor, for the current run
  StepObserver observer_;
};

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_EXECUTOR_H_
