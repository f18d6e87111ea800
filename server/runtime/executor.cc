// Runs an ExecutionPlan: binds tensors to the arena or the caller's buffers, runs each step, copies outputs out
// (see executor.h).
#include "server/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime {
namespace {

std::string DescribeView(const TensorDesc& desc) {
  return absl::StrCat(DimsToString(desc.dims()), " ", DataTypeName(desc.dtype()));
}

absl::Status CheckView(const char* role, const std::string& name, const TensorView& view, const TensorDesc& expected) {
  if (view.desc.dims() != expected.dims() || view.desc.dtype() != expected.dtype()) {
    return absl::InvalidArgumentError(absl::StrCat(role, " '", name, "': expected ", DescribeView(expected), " (",
                                                   expected.size_bytes(), " bytes), got ", DescribeView(view.desc),
                                                   " (", view.desc.size_bytes(), " bytes)"));
  }
  if (!view.desc.is_dense()) {
    return absl::InvalidArgumentError(absl::StrCat(role, " '", name, "': the view must be dense"));
  }
  if (view.data == nullptr && expected.size_bytes() > 0) {
    return absl::InvalidArgumentError(absl::StrCat(role, " '", name, "': data pointer is null"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Executor>> Executor::Create(const Options& options) {
  if (options.plan == nullptr) return absl::InvalidArgumentError("Executor::Options.plan is required");
  const ExecutionPlan& plan = *options.plan;
  std::unique_ptr<Executor> executor(new Executor(options));
  CONVOY_ASSIGN_OR_RETURN(executor->queue_, plan.device().CreateQueue());
  executor->context_ = executor->queue_->context();
  size_t arena_bytes = plan.arena_bytes();
  executor->image_by_image_.resize(plan.max_batch_size() + 1);
  for (size_t b = 0; b < options.image_by_image_steps.size(); ++b) {
    const int steps = options.image_by_image_steps[b];
    if (steps == 0) continue;
    if (plan.device().backend() != Backend::kCpu) {
      return absl::InvalidArgumentError("image-by-image steps are for CPU plans only");
    }
    CONVOY_ASSIGN_OR_RETURN(ImageByImageLayout layout,
                            MakeImageByImageLayout(plan, static_cast<int>(b), steps));
    arena_bytes = std::max(arena_bytes, layout.arena_bytes);
    executor->image_by_image_[b] = std::make_unique<ImageByImageLayout>(std::move(layout));
  }
  CONVOY_ASSIGN_OR_RETURN(executor->arena_, plan.device().Allocate(arena_bytes));
  CONVOY_ASSIGN_OR_RETURN(executor->workspace_, plan.device().Allocate(plan.workspace_bytes()));
  if (plan.device().backend() != Backend::kCpu) {
    const int max_batch = plan.max_batch_size();
    for (const auto& input : plan.inputs()) {
      const PlanTensor& tensor = plan.tensors()[input.tensor];
      CONVOY_ASSIGN_OR_RETURN(DeviceAllocation staging, plan.device().AllocateStagingHost(
                                                            tensor.external ? 0 : tensor.Bytes(max_batch)));
      executor->input_staging_.push_back(std::move(staging));
    }
    for (const auto& output : plan.outputs()) {
      CONVOY_ASSIGN_OR_RETURN(DeviceAllocation staging,
                              plan.device().AllocateStagingHost(plan.tensors()[output.tensor].Bytes(max_batch)));
      executor->output_staging_.push_back(std::move(staging));
    }
  }
  executor->pointers_.resize(plan.tensors().size(), nullptr);
  executor->image_pointers_.resize(plan.tensors().size(), nullptr);
  executor->recorded_.resize(plan.max_batch_size() + 1);
  executor->recording_failed_.resize(plan.max_batch_size() + 1, false);
  return executor;
}

const ImageByImageLayout* Executor::image_by_image(int batch_size) const {
  return batch_size >= 0 && batch_size < static_cast<int>(image_by_image_.size()) ? image_by_image_[batch_size].get()
                                                                                  : nullptr;
}

int Executor::image_by_image_steps(int batch_size) const {
  const ImageByImageLayout* layout = image_by_image(batch_size);
  return layout == nullptr ? 0 : layout->steps;
}

bool Executor::replays(int batch_size) const {
  return batch_size >= 1 && batch_size < static_cast<int>(recorded_.size()) && recorded_[batch_size] != nullptr;
}

int Executor::recorded_batch_sizes() const {
  int n = 0;
  for (const auto& r : recorded_) n += r != nullptr;
  return n;
}

TensorDesc Executor::ExpectedInputDesc(size_t index, int batch_size) const {
  return plan_->tensors()[plan_->inputs()[index].tensor].Desc(batch_size);
}

TensorDesc Executor::ExpectedOutputDesc(size_t index, int batch_size) const {
  return plan_->tensors()[plan_->outputs()[index].tensor].Desc(batch_size);
}

absl::Status Executor::Validate(int batch_size, absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs) const {
  if (batch_size < 1 || batch_size > plan_->max_batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("batch size ", batch_size, " is outside [1, ",
                                                   plan_->max_batch_size(), "]"));
  }
  if (inputs.size() != plan_->inputs().size() || outputs.size() != plan_->outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", plan_->inputs().size(), " inputs and ",
                                                   plan_->outputs().size(), " outputs, got ", inputs.size(), " and ",
                                                   outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(CheckView("input", plan_->inputs()[i].name, inputs[i], ExpectedInputDesc(i, batch_size)));
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(
        CheckView("output", plan_->outputs()[i].name, outputs[i], ExpectedOutputDesc(i, batch_size)));
  }
  return absl::OkStatus();
}

absl::Status Executor::BindTensors(int batch_size, absl::Span<const TensorView> inputs,
                                   absl::Span<const TensorView> outputs) {
  const ImageByImageLayout* layout = image_by_image(batch_size);
  const MemoryPlan& memory = layout != nullptr ? layout->batch_memory : plan_->memory_plan(batch_size);
  const auto& tensors = plan_->tensors();
  char* arena = arena_.as<char>();
  bound_to_caller_memory_ = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    pointers_[i] = memory.offsets[i] >= 0 ? arena + memory.offsets[i] : nullptr;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const int id = plan_->inputs()[i].tensor;
    if (tensors[id].external) {
      pointers_[id] = inputs[i].data;  // read in place; steps never write their inputs
      bound_to_caller_memory_ = true;
    } else {
      const size_t bytes = tensors[id].Bytes(batch_size);
      const void* source = inputs[i].data;
      if (i < input_staging_.size() && input_staging_[i].data() != nullptr) {
        std::memcpy(input_staging_[i].data(), source, bytes);  // the queued copy reads pinned memory
        source = input_staging_[i].data();
      }
      CONVOY_RETURN_IF_ERROR(queue_->CopyToDevice(pointers_[id], source, bytes));
    }
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int root = memory.roots[plan_->outputs()[i].tensor];
    if (tensors[root].external && pointers_[root] == nullptr) {
      pointers_[root] = outputs[i].data;
      bound_to_caller_memory_ = true;
    }
  }
  for (size_t i = 0; i < tensors.size(); ++i) pointers_[i] = pointers_[memory.roots[i]];
  return absl::OkStatus();
}

absl::Status Executor::RunSteps(int batch_size) {
  if (const ImageByImageLayout* layout = image_by_image(batch_size); layout != nullptr) {
    CONVOY_RETURN_IF_ERROR(RunPrefixImageByImage(*layout));
    return RunEachStep(batch_size, layout->steps);
  }
  // A recording holds this run's pointers: only arena-bound runs (every tensor at its fixed offset) can replay.
  if (!record_per_batch_size_ || observer_ || bound_to_caller_memory_ || !queue_->CanRecord()) {
    return RunEachStep(batch_size);
  }
  std::unique_ptr<RecordedWork>& recorded = recorded_[batch_size];
  if (recorded != nullptr) return recorded->Replay();
  // This run's outputs come from running the steps directly: the first run of a batch size launches every kernel
  // outside a capture (a kernel's module loads at its first launch under lazy loading, CUDA's default; that must not
  // happen inside the capture), then records them for the runs after it.
  CONVOY_RETURN_IF_ERROR(RunEachStep(batch_size));
  if (recording_failed_[batch_size]) return absl::OkStatus();
  absl::StatusOr<std::unique_ptr<RecordedWork>> made = queue_->Record([&] { return RunEachStep(batch_size); });
  if (made.ok()) {
    recorded = std::move(*made);
  } else {
    recording_failed_[batch_size] = true;
    recording_error_ = absl::Status(made.status().code(), absl::StrCat("recording batch size ", batch_size, ": ",
                                                                       made.status().message()));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunStep(int batch_size, int index, TensorPointers pointers, double* milliseconds) {
  const PlanStep& step = *plan_->steps()[index];
  const Workspace workspace{workspace_.data(), plan_->workspace_bytes()};
  const auto start = std::chrono::steady_clock::now();
  absl::Status status = step.Run(batch_size, pointers, workspace, context_);
  if (status.ok() && observer_) {
    status = queue_->Synchronize();
    const std::chrono::duration<double, std::milli> elapsed = std::chrono::steady_clock::now() - start;
    *milliseconds += elapsed.count();
  }
  if (!status.ok()) {
    return absl::Status(status.code(), absl::StrCat("step ", index, " '", step.name(), "' (", OpKindName(step.op()),
                                                    ") at batch size ", batch_size, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunEachStep(int batch_size, int first_step) {
  const auto& steps = plan_->steps();
  for (size_t s = first_step; s < steps.size(); ++s) {
    double milliseconds = 0;
    CONVOY_RETURN_IF_ERROR(RunStep(batch_size, static_cast<int>(s), pointers_, &milliseconds));
    if (observer_) observer_(static_cast<int>(s), *steps[s], milliseconds);
  }
  return absl::OkStatus();
}

absl::Status Executor::RunPrefixImageByImage(const ImageByImageLayout& layout) {
  char* arena = arena_.as<char>();
  std::vector<double> milliseconds(observer_ ? layout.steps : 0, 0.0);  // no allocation when serving
  double untimed = 0;
  for (int image = 0; image < layout.batch_size; ++image) {
    for (size_t i = 0; i < image_pointers_.size(); ++i) {
      if (layout.storage[i] == ImageByImageLayout::Storage::kScratch) {
        image_pointers_[i] = arena + layout.scratch_offset[i];
      } else {
        image_pointers_[i] =
            pointers_[i] == nullptr ? nullptr : static_cast<char*>(pointers_[i]) + image * layout.image_bytes[i];
      }
    }
    for (int s = 0; s < layout.steps; ++s) {
      absl::Status status = RunStep(1, s, image_pointers_, observer_ ? &milliseconds[s] : &untimed);
      if (!status.ok()) {
        return absl::Status(status.code(), absl::StrCat("image ", image, " of a batch of ", layout.batch_size,
                                                        " run image by image: ", status.message()));
      }
    }
  }
  // The observer sees each prefix step once, with its time summed over the images.
  if (observer_) {
    for (int s = 0; s < layout.steps; ++s) observer_(s, *plan_->steps()[s], milliseconds[s]);
  }
  return absl::OkStatus();
}

absl::Status Executor::CopyOutputs(int batch_size, absl::Span<const TensorView> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    const int id = plan_->outputs()[i].tensor;
    if (pointers_[id] == outputs[i].data) continue;  // written in place
    void* destination = i < output_staging_.size() ? output_staging_[i].data() : outputs[i].data;
    CONVOY_RETURN_IF_ERROR(queue_->CopyToHost(destination, pointers_[id], plan_->tensors()[id].Bytes(batch_size)));
  }
  return absl::OkStatus();
}

absl::Status Executor::RunOnQueue(int batch_size, absl::Span<const TensorView> inputs,
                                  absl::Span<const TensorView> outputs) {
  absl::Status status = BindTensors(batch_size, inputs, outputs);
  if (status.ok()) status = RunSteps(batch_size);
  if (status.ok()) status = CopyOutputs(batch_size, outputs);
  // Always wait, failed or not: queued copies still read and write the caller's buffers until the queue is idle.
  absl::Status synchronized = queue_->Synchronize();
  CONVOY_RETURN_IF_ERROR(status.ok() ? synchronized : status);
  for (size_t i = 0; i < outputs.size() && i < output_staging_.size(); ++i) {
    const int id = plan_->outputs()[i].tensor;
    if (pointers_[id] == outputs[i].data) continue;
    std::memcpy(outputs[i].data, output_staging_[i].data(), plan_->tensors()[id].Bytes(batch_size));
  }
  return absl::OkStatus();
}

absl::Status Executor::Run(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs) {
  CONVOY_RETURN_IF_ERROR(Validate(batch_size, inputs, outputs));
  return queue_->RunWithDeviceCurrent([&] { return RunOnQueue(batch_size, inputs, outputs); });
}

}  // namespace convoy::runtime
