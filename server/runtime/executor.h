// The executor: runs an ExecutionPlan for one batch at a time on one execution context. One executor per model
// instance; several executors of one plan may run concurrently from different threads.
//
//   CONVOY_ASSIGN_OR_RETURN(auto executor, Executor::Create({plan}));
//   CONVOY_RETURN_IF_ERROR(executor->Run(batch_size, {images_view}, {logits_view}));
//
// Memory: the activation arena (sized for the largest batch's memory plan) and the workspace (the largest step
// workspace) are allocated once in Create; Run allocates nothing on the device.
// Each executor owns a DeviceQueue (on CUDA: a stream of its own), so executors of one plan run concurrently on one
// device. With `record_per_batch_size` (a model's `cuda_graphs: true`), the first Run of each batch size records the
// steps (a CUDA graph: one launch instead of one per kernel) and later Runs of that size replay the recording; the
// arena offsets of a batch size never change, which is what makes the replay valid.
// Inputs and outputs are host TensorViews in the order of plan.inputs() / plan.outputs(), with exactly the
// descriptors the plan expects for the batch (ExpectedInputDesc / ExpectedOutputDesc). On the CPU, inputs are read in
// place and outputs are written in place where the plan allows (zero copy); on other devices they are copied through
// the queue by way of staging buffers the executor allocates at Create (page-locked on CUDA, sized for the largest
// batch: the queued copies are then asynchronous and overlap other instances' kernels, where copies from the caller's
// pageable memory would block the host), and Run returns once the outputs are in the caller's buffers.
// The first Run of a batch size with recording on runs the steps directly and then records them: every kernel has
// been launched once outside a capture (lazy module loading and first-launch setup never happen inside one).
// Run makes the queue's device current on the calling thread for its duration (CUDA launches need it).
//
// Thread safety: thread-compatible (one Run at a time per executor); the plan is shared read-only.
#ifndef CONVOY_SERVER_RUNTIME_EXECUTOR_H_
#define CONVOY_SERVER_RUNTIME_EXECUTOR_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/common/tensor.h"
#include "kernels/registry/device.h"
#include "server/runtime/image_by_image.h"
#include "server/runtime/plan.h"

namespace convoy::runtime {

class Executor {
 public:
  // Called after each step with its index and wall time in milliseconds (the device is synchronized first, so the
  // time is the step's own). Setting one makes runs slower: use it for `inspect` and profiling, not serving.
  using StepObserver = std::function<void(int step_index, const PlanStep& step, double milliseconds)>;

  struct Options {
    std::shared_ptr<const ExecutionPlan> plan;  // required
    // Record the steps once per batch size and replay them (CUDA graphs) where the device's queue can record; ignored
    // elsewhere and while a step observer is set. A batch size whose recording fails runs its steps one by one
    // from then on (recording_error() says why): serving never fails because a graph could not be made.
    bool record_per_batch_size = false;
    // CPU plans: image_by_image_steps[b] > 0 runs the first that many steps of a batch of b images one image at a
    // time (image_by_image.h); absent or 0: the batch as a whole. Create fails where a step count is out of range.
    std::vector<int> image_by_image_steps;
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

  // How many leading steps a batch of `batch_size` runs one image at a time (0: none).
  int image_by_image_steps(int batch_size) const;

  // Whether Runs of this batch size replay a recording (they do from the first Run on, when recording is on and
  // the device can record).
  bool replays(int batch_size) const;
  // How many batch sizes have a recording, and the last reason a recording failed (OK if none did).
  int recorded_batch_sizes() const;
  const absl::Status& recording_error() const { return recording_error_; }
  const ExecutionContext& context() const { return context_; }

 private:
  explicit Executor(const Options& options)
      : plan_(options.plan), record_per_batch_size_(options.record_per_batch_size) {}
  // The image-by-image layout of this batch size, or null.
  const ImageByImageLayout* image_by_image(int batch_size) const;
  absl::Status Validate(int batch_size, absl::Span<const TensorView> inputs,
                        absl::Span<const TensorView> outputs) const;
  absl::Status BindTensors(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);
  absl::Status RunSteps(int batch_size);
  // Runs steps [first_step, end) at `batch_size` on pointers_.
  absl::Status RunEachStep(int batch_size, int first_step = 0);
  // Runs the layout's prefix once per image on the plan's batch-1 problems.
  absl::Status RunPrefixImageByImage(const ImageByImageLayout& layout);
  absl::Status RunStep(int batch_size, int index, TensorPointers pointers, double* milliseconds);
  absl::Status CopyOutputs(int batch_size, absl::Span<const TensorView> outputs);
  absl::Status RunOnQueue(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);

  std::shared_ptr<const ExecutionPlan> plan_;
  const bool record_per_batch_size_;
  std::unique_ptr<DeviceQueue> queue_;
  ExecutionContext context_;
  bool bound_to_caller_memory_ = false;                 // this run reads or writes caller buffers in place
  std::vector<std::unique_ptr<RecordedWork>> recorded_;  // per batch size
  std::vector<bool> recording_failed_;                  // per batch size
  absl::Status recording_error_;
  DeviceAllocation arena_;
  DeviceAllocation workspace_;
  // Host staging per plan input / output (empty where the tensor is read or written in place, and on the CPU).
  std::vector<DeviceAllocation> input_staging_;
  std::vector<DeviceAllocation> output_staging_;
  std::vector<void*> pointers_;  // per plan tensor, for the current run
  std::vector<void*> image_pointers_;  // per plan tensor, for one image of an image-by-image prefix
  std::vector<std::unique_ptr<ImageByImageLayout>> image_by_image_;  // per batch size; null: the batch as a whole
  StepObserver observer_;
};

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_EXECUTOR_H_
