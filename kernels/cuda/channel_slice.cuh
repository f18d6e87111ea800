// The index map shared by concat.cu and split.cu: element i of a part with `part_channels` channels lies at
// ChannelSliceOffset(i) in the whole tensor of `total_channels`, the part starting at channel `channel_offset`.
#ifndef CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_
#define CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_

#include <cstdint>

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

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CHANNEL_SLICE_CUH_
