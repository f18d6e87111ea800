// Element storage types for the CPU kernels: FP16 and BF16 are loaded into FP32, computed in FP32, and rounded back
// (round to nearest even) on store. Kernels are templated on a storage type and dispatched once per Run, so inner
// loops carry no per-element branch on the data type:
//
//   return DispatchFloatStorage(problem.dtype, [&](auto storage) {
//     using S = decltype(storage);
//     MyKernel<S>(static_cast<const typename S::T*>(args.x), ...);
//     return absl::OkStatus();
//   });
#ifndef CONVOY_KERNELS_CPU_CONVERT_ELEMENT_H_
#define CONVOY_KERNELS_CPU_CONVERT_ELEMENT_H_

#include <cstdint>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/dtype.h"

namespace convoy::cpu {

struct Fp32Storage {
  using T = float;
  static float Load(const T* p, int64_t i) { return p[i]; }
  static void Store(T* p, int64_t i, float v) { p[i] = v; }
};

struct Fp16Storage {
  using T = uint16_t;
  static float Load(const T* p, int64_t i) { return HalfBitsToFloat(p[i]); }
  static void Store(T* p, int64_t i, float v) { p[i] = FloatToHalfBits(v); }
};

struct Bf16Storage {
  using T = uint16_t;
  static float Load(const T* p, int64_t i) {
    const uint32_t bits = static_cast<uint32_t>(p[i]) << 16;
    float v;
    std::memcpy(&v, &bits, sizeof(v));
    return v;
  }
  static void Store(T* p, int64_t i, float v) { p[i] = FloatToBFloat16Bits(v); }
};

// Calls fn(Fp32Storage{}), fn(Fp16Storage{}) or fn(Bf16Storage{}) for `dtype`; UNIMPLEMENTED for other types.
template <typename Fn>
absl::Status DispatchFloatStorage(DataType dtype, Fn&& fn) {
  switch (dtype) {
    case DataType::kFloat32: return fn(Fp32Storage{});
    case DataType::kFloat16: return fn(Fp16Storage{});
    case DataType::kBFloat16: return fn(Bf16Storage{});
    default:
      return absl::UnimplementedError(
          absl::StrCat("CPU kernels compute FP32, FP16 and BF16, got ", DataTypeName(dtype)));
  }
}

// Loads n contiguous elements into float (dst) and stores them back: the staging used by row-wise kernels.
template <typename S>
void LoadRow(const typename S::T* src, int64_t n, float* dst) {
  for (int64_t i = 0; i < n; ++i) dst[i] = S::Load(src, i);
}
template <typename S>
void StoreRow(const float* src, int64_t n, typename S::T* dst) {
  for (int64_t i = 0; i < n; ++i) S::Store(dst, i, src[i]);
}

}  // namespace convoy::cpu

#endif  // CONVOY_KERNELS_CPU_CONVERT_ELEMENT_H_
