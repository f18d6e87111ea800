// The CUDA driver tensor-map workaround that CUTLASS applies since 4.3.4 (cute/atom/copy_traits_sm90_tma.hpp and
// copy_traits_sm90_im2col.hpp): with a driver that reports CUDA 13.1 or older (cudaDriverGetVersion <= 13010) and a
// tensor that spans less than 128 KiB, bit 21 of the second 64-bit word of the encoded CUtensorMap is cleared after
// cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col. CUTLASS's changelog names occasional errors of kernels that use
// maps of such small tensors as the driver bug this avoids. The span is CUTLASS's: the bytes from the first element
// to one past the last element the tensor reaches (cosize of its layout times the element size), not the
// allocation.
//
// Plain functions over the map's 128 bytes, without the CUDA headers, so the condition and the bit manipulation are
// unit-tested on any CPU (tensor_map_driver_workaround_test.cc); tensor_map_host.h applies them on the real path.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_DRIVER_WORKAROUND_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_DRIVER_WORKAROUND_H_

#include <cstdint>
#include <cstring>

namespace convoy::cuda {

// The newest driver the workaround applies to (cudaDriverGetVersion's 1000 * major + 10 * minor: 13.1).
inline constexpr int kTensorMapWorkaroundNewestDriver = 13010;
// Tensors spanning fewer bytes than this get the workaround.
inline constexpr uint64_t kTensorMapWorkaroundSpanBytes = 128 * 1024;
// The bit cleared: bit 21 of 64-bit word 1 of the map.
inline constexpr int kTensorMapWorkaroundWord = 1;
inline constexpr int kTensorMapWorkaroundBit = 21;

// Bytes from the tensor's first element to one past its last: element_bytes * (1 + sum over dimensions of
// (dims[i] - 1) * stride_i), with stride_0 = 1 element and byte_strides[i - 1] the stride of dimension i >= 1 (the
// cuTensorMapEncode* arguments). 0 when a dimension is 0.
inline uint64_t TensorMapSpanBytes(int rank, const uint64_t* dims, const uint64_t* byte_strides,
                                   uint64_t element_bytes) {
  uint64_t span = element_bytes;
  for (int i = 0; i < rank; ++i) {
    if (dims[i] == 0) return 0;
    span += (dims[i] - 1) * (i == 0 ? element_bytes : byte_strides[i - 1]);
  }
  return span;
}

// True when CUTLASS would clear the bit: driver 13.1 or older and a tensor under 128 KiB.
inline bool TensorMapNeedsDriverWorkaround(int driver_version, uint64_t span_bytes) {
  return driver_version <= kTensorMapWorkaroundNewestDriver && span_bytes < kTensorMapWorkaroundSpanBytes;
}

// Clears the bit in the map's 128 bytes (a CUtensorMap, 64-byte aligned).
inline void ClearTensorMapDriverBit(void* map) {
  uint64_t word = 0;
  unsigned char* bytes = static_cast<unsigned char*>(map) + 8 * kTensorMapWorkaroundWord;
  std::memcpy(&word, bytes, sizeof(word));
  word &= ~(uint64_t{1} << kTensorMapWorkaroundBit);
  std::memcpy(bytes, &word, sizeof(word));
}

// Applies the workaround to a map the driver just encoded; returns whether it changed anything it was asked to.
inline bool ApplyTensorMapDriverWorkaround(void* map, int driver_version, uint64_t span_bytes) {
  if (!TensorMapNeedsDriverWorkaround(driver_version, span_bytes)) return false;
  ClearTensorMapDriverBit(map);
  return true;
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_DRIVER_WORKAROUND_H_
