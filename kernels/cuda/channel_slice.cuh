// What concat.cu and split.cu share: the index map (element i of a part with `part_channels` channels lies at
// ChannelSliceOffset(i) in the whole tensor of `total_channels`, the part starting at channel `channel_offset`) and
// ForEachChannelSlice, the host loop that checks the parts and launches one copy per non-empty part.
#ifndef CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_
#define CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/common/problems.h"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

struct ChannelSliceParams {
  int64_t count;  // elements of the part: n * part_channels * h * w
  int64_t plane;  // h * w
  int part_channels;
  int total_channels;
  int channel_offset;
  bool channels_last;
};

__device__ __forceinline__ int64_t ChannelSliceOffset(int64_t i, const ChannelSliceParams& p) {
  if (p.channels_last) {  // part [N*H*W, Cp] -> whole [N*H*W, C]
    const int64_t pixel = i / p.part_channels;
    return pixel * p.total_channels + p.channel_offset + i % p.part_channels;
  }
  const int64_t part_image = int64_t{p.part_channels} * p.plane;  // part [N, Cp*H*W] -> whole [N, C*H*W]
  const int64_t n = i / part_image;
  return n * p.total_channels * p.plane + int64_t{p.channel_offset} * p.plane + i % part_image;
}

// Walks the parts of a ConcatProblem or SplitProblem in channel order: checks that `parts` (args.inputs or
// args.outputs, called `parts_name` in errors) holds one non-null pointer per part, then calls
// launch_part(j, params) -> absl::Status for every non-empty part j. Returns the first error.
template <typename Problem, typename Pointer, typename LaunchPart>
absl::Status ForEachChannelSlice(const Problem& problem, const std::vector<Pointer>& parts,
                                 absl::string_view parts_name, LaunchPart&& launch_part) {
  if (parts.size() != problem.channels.size()) {
    return absl::InvalidArgumentError(absl::StrCat(problem.ToString(), ": ", parts.size(), " ", parts_name, " for ",
                                                   problem.channels.size(), " parts"));
  }
  ChannelSliceParams params;
  params.plane = int64_t{problem.h} * problem.w;
  params.total_channels = problem.total_channels();
  params.channels_last = problem.layout == Layout::kNHWC;
  params.channel_offset = 0;
  for (size_t j = 0; j < problem.channels.size(); ++j) {
    if (parts[j] == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(problem.ToString(), ": args.", parts_name, "[", j, "] is null"));
    }
    params.part_channels = problem.channels[j];
    params.count = int64_t{problem.n} * problem.channels[j] * params.plane;
    if (params.count > 0) {
      const absl::Status launched = launch_part(j, params);
      if (!launched.ok()) return launched;
    }
    params.channel_offset += problem.channels[j];
  }
  return absl::OkStatus();
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_
