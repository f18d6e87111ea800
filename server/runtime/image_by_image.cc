// Which leading steps of a plan may run one image at a time, and where their tensors lie then (image_by_image.h).
#include "server/runtime/image_by_image.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::runtime {
namespace {

constexpr size_t kImageByImageAlignment = 256;  // as the planner aligns arena buffers

// Ops whose output for an image depends on that image's inputs only (Pad pads H and W only).
bool KeepsImagesApart(convoy::OpKind op) {
  switch (op) {
    case convoy::OpKind::kConv2d:
    case convoy::OpKind::kPool2d:
    case convoy::OpKind::kBatchNorm:
    case convoy::OpKind::kActivation:
    case convoy::OpKind::kBinary:
    case convoy::OpKind::kConcat:
    case convoy::OpKind::kSplit:
    case convoy::OpKind::kChannelShuffle:
    case convoy::OpKind::kPad:
    case convoy::OpKind::kConvTranspose2d:
    case convoy::OpKind::kConvert:
    case convoy::OpKind::kPreprocess:
    case convoy::OpKind::kQuantizedConv2d:
    case convoy::OpKind::kQuantizedAdd:
    case convoy::OpKind::kUnary:
    case convoy::OpKind::kSqueezeExcitation:
      return true;
    default:
      return false;
  }
}

// A tensor whose first dim is the batch and whose storage (its root's) splits into equal per-image slices.
bool SlicesByImage(const ExecutionPlan& plan, int tensor) {
  const PlanTensor& t = plan.tensors()[tensor];
  const int root = plan.memory_plan(1).roots[tensor];
  const PlanTensor& r = plan.tensors()[root];
  return !t.shape.empty() && t.shape[0] == kBatch && !r.shape.empty() && r.shape[0] == kBatch &&
         t.Bytes(1) == r.Bytes(1);
}

}  // namespace

int LongestImageByImagePrefix(const ExecutionPlan& plan) {
  if (plan.device().backend() != Backend::kCpu || !plan.has_batch_dimension() || plan.max_batch_size() < 2) return 0;
  const auto& steps = plan.steps();
  for (size_t s = 0; s < steps.size(); ++s) {
    if (!KeepsImagesApart(steps[s]->op())) return static_cast<int>(s);
    for (const std::vector<int>* ids : {&steps[s]->inputs(), &steps[s]->outputs()}) {
      for (int id : *ids) {
        if (!SlicesByImage(plan, id)) return static_cast<int>(s);
      }
    }
  }
  return static_cast<int>(steps.size());
}

ImageByImageChoice ChooseImageByImageSteps(const ExecutionPlan& plan, int batch_size, absl::Span<const double> at_one,
                                           absl::Span<const double> at_batch, double min_gain) {
  ImageByImageChoice choice;
  const size_t num_steps = plan.steps().size();
  if (batch_size < 2 || batch_size > plan.max_batch_size() || at_one.size() != num_steps ||
      at_batch.size() != num_steps) {
    return choice;
  }
  for (double t : at_batch) choice.all_steps_milliseconds += t;
  const int longest = LongestImageByImagePrefix(plan);
  // gain[k]: what running the first k steps image by image saves.
  std::vector<double> batch(longest + 1, 0.0), image_by_image(longest + 1, 0.0);
  double best_gain = 0;
  for (int s = 0; s < longest; ++s) {
    batch[s + 1] = batch[s] + at_batch[s];
    image_by_image[s + 1] = image_by_image[s] + batch_size * at_one[s];
    best_gain = std::max(best_gain, batch[s + 1] - image_by_image[s + 1]);
  }
  if (best_gain <= 0 || best_gain < min_gain * choice.all_steps_milliseconds) return choice;
  // The shortest prefix within 10 % of the best: the steps after it gain little and add the risk of a misjudged step.
  for (int k = 1; k <= longest; ++k) {
    if (batch[k] - image_by_image[k] >= 0.9 * best_gain) {
      choice.steps = k;
      choice.batch_milliseconds = batch[k];
      choice.image_by_image_milliseconds = image_by_image[k];
      break;
    }
  }
  return choice;
}

absl::StatusOr<ImageByImageLayout> MakeImageByImageLayout(const ExecutionPlan& plan, int batch_size, int steps) {
  const int longest = LongestImageByImagePrefix(plan);
  if (steps < 1 || steps > longest) {
    return absl::InvalidArgumentError(absl::StrCat("image-by-image steps: expected 1..", longest,
                                                   " (the plan's longest prefix that keeps images apart), got ",
                                                   steps));
  }
  if (batch_size < 2 || batch_size > plan.max_batch_size()) {
    return absl::InvalidArgumentError(absl::StrCat("image-by-image batch size: expected 2..", plan.max_batch_size(),
                                                   ", got ", batch_size));
  }
  const MemoryPlan& batch1 = plan.memory_plan(1);
  const auto& tensors = plan.tensors();
  const int num_tensors = static_cast<int>(tensors.size());
  const int num_steps = static_cast<int>(plan.steps().size());
  // Step indices with the prefix folded into one: step s < steps -> 0, s >= steps -> s - steps + 1.
  auto folded = [&](int s) { return s < steps ? 0 : s - steps + 1; };
  const int folded_end = folded(num_steps - 1) + 1;
  std::vector<int> producer(num_tensors, -1), last_read(num_tensors, -1);
  for (int s = 0; s < num_steps; ++s) {
    for (int id : plan.steps()[s]->outputs()) producer[id] = s;
    for (int id : plan.steps()[s]->inputs()) last_read[id] = s;
  }
  std::vector<bool> graph_output(num_tensors, false);
  for (const PlanBinding& b : plan.outputs()) graph_output[b.tensor] = true;
  // A root stays in the batch's buffers when it is caller memory, a graph input or output, or read after the prefix;
  // otherwise (written and last read inside the prefix) it is scratch.
  std::vector<bool> batch_root(num_tensors, false);
  for (int i = 0; i < num_tensors; ++i) {
    const int root = batch1.roots[i];
    if (tensors[root].external || producer[i] < 0 || producer[i] >= steps || last_read[i] >= steps ||
        graph_output[i] || batch1.offsets[root] < 0) {
      batch_root[root] = true;
    }
  }
  ImageByImageLayout layout;
  layout.batch_size = batch_size;
  layout.steps = steps;
  std::vector<BufferUse> uses(num_tensors);
  for (int i = 0; i < num_tensors; ++i) {
    const PlanTensor& t = tensors[i];
    BufferUse& u = uses[i];
    u.bytes = t.Bytes(batch_size);
    u.alias_of = t.alias_of;
    u.external = t.external || (t.alias_of < 0 && !batch_root[i]);
    u.first_step = producer[i] < 0 ? -1 : folded(producer[i]);
    u.last_step = graph_output[i] ? folded_end : std::max(last_read[i] < 0 ? -1 : folded(last_read[i]), u.first_step);
  }
  CONVOY_ASSIGN_OR_RETURN(layout.batch_memory, PlanActivationMemory(uses, kImageByImageAlignment));
  const size_t scratch_base =
      (layout.batch_memory.arena_bytes + kImageByImageAlignment - 1) / kImageByImageAlignment * kImageByImageAlignment;
  layout.arena_bytes = layout.batch_memory.arena_bytes;
  layout.storage.assign(num_tensors, ImageByImageLayout::Storage::kBatch);
  layout.image_bytes.assign(num_tensors, 0);
  layout.scratch_offset.assign(num_tensors, -1);
  for (int i = 0; i < num_tensors; ++i) {
    const int root = batch1.roots[i];
    layout.image_bytes[i] = tensors[root].Bytes(1);
    if (batch_root[root]) continue;
    layout.storage[i] = ImageByImageLayout::Storage::kScratch;
    layout.scratch_offset[i] = static_cast<int64_t>(scratch_base) + batch1.offsets[root];
    layout.arena_bytes = std::max(layout.arena_bytes, scratch_base + batch1.offsets[root] + tensors[root].Bytes(1));
  }
  return layout;
}

}  // namespace convoy::runtime
