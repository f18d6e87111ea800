// Running a plan's leading steps one image at a time (CPU plans at batch sizes >= 2).
//
// At a large batch the first layers of a CNN work on tensors far larger than the caches (MobileNetV2's 112x112x96
// activations are 38 MB at batch 8): each step streams its input from memory and writes its output back. Running
// those steps for one image after the other, on the plan's batch-1 problems, keeps each image's tensors in cache from
// one step to the next; the steps after the prefix run at the full batch, where the tensors are small and the batch
// amortizes each step's fixed cost. Which prefix pays is measured (ModelRuntime; docs/runtime.md).
//
// Storage during the prefix: a tensor read after the prefix (or a graph input or output) lives in a buffer for the
// whole batch, and image i uses its i-th per-image slice; a tensor that lives and dies inside the prefix lives in a
// scratch region laid out by the plan's batch-1 memory plan and is reused by every image. The batch's buffers get a
// memory plan of their own, in which every one the prefix touches is live through the whole prefix (image 0 writes
// its slice before image 7 reads the slice beside it), placed below the scratch region in one arena.
#ifndef CONVOY_SERVER_RUNTIME_IMAGE_BY_IMAGE_H_
#define CONVOY_SERVER_RUNTIME_IMAGE_BY_IMAGE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "server/runtime/memory_planner.h"
#include "server/runtime/plan.h"

namespace convoy::runtime {

// How many leading steps of `plan` may run one image at a time: each is an op that never mixes images (convolutions,
// pools, normalizations, activations, element-wise ops, concat/split, conversions, preprocessing, their INT8 forms)
// and every tensor it reads or writes is batch-major with a fixed per-image size (its first dim is the batch). 0 for
// plans without a batch dimension or on devices other than the CPU.
int LongestImageByImagePrefix(const ExecutionPlan& plan);

// The prefix that measured step times predict fastest at `batch_size`. With gain(k) = the sum over steps s < k of
// at_batch[s] - batch_size * at_one[s], where at_one and at_batch are each step's time (ms) in whole runs of the plan
// at batch 1 and at batch_size (Executor's step observer; in a whole run each step finds its weights and inputs where
// the steps before left them, which is what running the prefix image by image changes): the shortest prefix whose
// gain is within 10 % of the largest. `steps` is 0 (the batch as a whole) when the largest gain is under `min_gain`
// of the run at batch_size.
struct ImageByImageChoice {
  int steps = 0;
  double batch_milliseconds = 0;           // the prefix at the full batch
  double image_by_image_milliseconds = 0;  // the same steps, batch_size times at batch 1
  double all_steps_milliseconds = 0;       // every step at the full batch
};
ImageByImageChoice ChooseImageByImageSteps(const ExecutionPlan& plan, int batch_size, absl::Span<const double> at_one,
                                           absl::Span<const double> at_batch, double min_gain = 0.05);

// Where each tensor lies when the first `steps` steps of a run at `batch_size` go image by image.
struct ImageByImageLayout {
  enum class Storage : uint8_t { kBatch, kScratch };
  int batch_size = 0;
  int steps = 0;
  // The whole batch's buffers (every tensor but the scratch ones, which it leaves out like caller memory), for the
  // prefix and for the steps after it.
  MemoryPlan batch_memory;
  std::vector<Storage> storage;         // per tensor (aliases: their root's)
  std::vector<size_t> image_bytes;      // bytes of one image's slice of the tensor's root
  std::vector<int64_t> scratch_offset;  // kScratch: offset in the arena (after the batch's buffers); else -1
  size_t arena_bytes = 0;               // the batch's buffers and the scratch region together
};

// Fails when `steps` is outside [1, LongestImageByImagePrefix(plan)] or `batch_size` outside [2, max_batch_size].
absl::StatusOr<ImageByImageLayout> MakeImageByImageLayout(const ExecutionPlan& plan, int batch_size, int steps);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_IMAGE_BY_IMAGE_H_
