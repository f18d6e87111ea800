// The output side of Convoy's GEMM-shaped CUDA kernels, shared by the tensor-core implicit GEMM (conv2d, 1x1 conv,
// GEMM), its split-K reduce pass (split_k_reduce.cuh) and any later tiled kernel (a Hopper wgmma kernel stages its
// accumulators the same way). It writes the output one vector of kOutputVector<T> consecutive channels of one GEMM
// row at a time: 16 bytes of T (8 FP16/BF16 or 4 FP32 elements), applying the whole fused epilogue once.
//
//   OutputTarget<T> out{operands, y, channels, vector_ok};
//   ChannelAffine<V> affine = LoadChannelAffine<T, V>(out, n0);          // scale/bias of [n0, n0 + V), once
//   StoreOutputVector<T, V>(out, m, n0, affine, values);                  // y[m, n0..) = epilogue(values)
//   StorePartialVector<V>(partials, m, n0, channels, vector_ok, values); // split-K: raw FP32 sums
//
// With vector_ok (y and the residual 16-byte aligned and the channel count a multiple of V, checked on the host)
// the residual is read and the output written with one 16-byte access each; otherwise (and for a ragged last
// vector) element by element. The epilogue math is ApplyEpilogueValues from kernels/common/epilogue.h, the same
// definition the CPU kernels and the reference use.
#ifndef CONVOY_KERNELS_CUDA_GEMM_EPILOGUE_CUH_
#define CONVOY_KERNELS_CUDA_GEMM_EPILOGUE_CUH_

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/conv2d_common.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

// Output elements of T per 16-byte vector.
template <typename T>
inline constexpr int kOutputVector = 16 / static_cast<int>(sizeof(T));

// Where a GEMM-shaped kernel's results go: y [rows, channels] row-major (NHWC output or GEMM [m, n]) with the fused
// epilogue's operands.
template <typename T>
struct OutputTarget {
  EpilogueOperands<T> epilogue;
  T* y = nullptr;
  int channels = 0;        // row pitch and count of valid channels (K of a conv, n of a GEMM)
  bool vector_ok = false;  // y, residual 16-byte aligned and channels % kOutputVector<T> == 0
};

// The per-channel scale (1 when absent) and bias (0 when absent) of V consecutive channels.
template <int V>
struct ChannelAffine {
  float scale[V];
  float bias[V];
};

template <typename T, int V>
__device__ __forceinline__ ChannelAffine<V> LoadChannelAffine(const OutputTarget<T>& out, int n0) {
  ChannelAffine<V> affine;
  const Epilogue& e = out.epilogue.epilogue;
#pragma unroll
  for (int j = 0; j < V; ++j) {
    const int n = n0 + j;  // [channels]
    const bool valid = n < out.channels;
    affine.scale[j] = e.has_scale && valid ? __ldg(out.epilogue.scale + n) : 1.0f;
    affine.bias[j] = e.has_bias && valid ? __ldg(out.epilogue.bias + n) : 0.0f;
  }
  return affine;
}

// Traps (under the emulation) on a 16-byte access that is not 16-byte aligned: x86 performs it, the GPU faults with
// "misaligned address", so the emulation fails the launch where the GPU would.
__device__ __forceinline__ void CheckVectorAlignment(const void* address) {
#if defined(CONVOY_CUDA_EMULATION)
  if (reinterpret_cast<uintptr_t>(address) % 16 != 0) __trap();
#else
  (void)address;
#endif
}

// 32-bit word i (0..3) of a 16-byte vector.
__device__ __forceinline__ uint32_t VectorWord(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// The V = kOutputVector<T> elements of a 16-byte vector of T, as floats.
template <typename T, int V>
__device__ __forceinline__ void UnpackVector(const uint4& bits, float (&values)[V]) {
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if constexpr (sizeof(T) == 4) {
      values[j] = __uint_as_float(VectorWord(bits, j));
    } else {
      const auto half_bits = static_cast<unsigned short>(VectorWord(bits, j / 2) >> (16 * (j % 2)));
      if constexpr (std::is_same<T, __half>::value) {
        values[j] = __half2float(__ushort_as_half(half_bits));
      } else {
        values[j] = __bfloat162float(__ushort_as_bfloat16(half_bits));
      }
    }
  }
}

// V floats rounded to T, packed into one 16-byte vector (element 0 in the lowest bytes).
template <typename T, int V>
__device__ __forceinline__ uint4 PackVector(const float (&values)[V]) {
  uint32_t words[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (sizeof(T) == 4) {
      words[i] = __float_as_uint(values[i]);
    } else if constexpr (std::is_same<T, __half>::value) {
      words[i] = PackHalf2(FloatToElement<__half>(values[2 * i]), FloatToElement<__half>(values[2 * i + 1]));
    } else {
      words[i] = PackBfloat162(FloatToElement<__nv_bfloat16>(values[2 * i]),
                               FloatToElement<__nv_bfloat16>(values[2 * i + 1]));
    }
  }
  return make_uint4(words[0], words[1], words[2], words[3]);
}

// y[m, n0 .. n0 + V) = epilogue(values), skipping channels >= out.channels.
template <typename T, int V>
__device__ __forceinline__ void StoreOutputVector(const OutputTarget<T>& out, int64_t m, int n0,
                                                  const ChannelAffine<V>& affine, const float (&values)[V]) {
  const Epilogue& e = out.epilogue.epilogue;
  const int64_t offset = m * out.channels + n0;  // into Y [rows, channels]
  if (out.vector_ok && n0 + V <= out.channels) {
    float residual[V] = {};
    if (e.residual != ResidualMode::kNone) {
      CheckVectorAlignment(out.epilogue.residual + offset);
      UnpackVector<T, V>(__ldg(reinterpret_cast<const uint4*>(out.epilogue.residual + offset)), residual);
    }
    float result[V];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      result[j] = ApplyEpilogueValues(values[j], e, affine.scale[j], affine.bias[j], residual[j]);
    }
    CheckVectorAlignment(out.y + offset);
    *reinterpret_cast<uint4*>(out.y + offset) = PackVector<T, V>(result);
    return;
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (n0 + j >= out.channels) break;
    const float r = e.residual != ResidualMode::kNone ? ElementToFloat<T>(out.epilogue.residual[offset + j]) : 0.0f;
    out.y[offset + j] = FloatToElement<T>(ApplyEpilogueValues(values[j], e, affine.scale[j], affine.bias[j], r));
  }
}

// partials[m, n0 .. n0 + V) = values (FP32, row pitch `channels`), skipping channels >= channels. vector_ok: the
// partials are 16-byte aligned and channels % 4 == 0.
template <int V>
__device__ __forceinline__ void StorePartialVector(float* partials, int64_t m, int n0, int channels, bool vector_ok,
                                                   const float (&values)[V]) {
  float* row = partials + m * channels + n0;  // [rows, channels]
  if (vector_ok && n0 + V <= channels) {
#pragma unroll
    for (int j = 0; j < V; j += 4) {
      CheckVectorAlignment(row + j);
      *reinterpret_cast<float4*>(row + j) = make_float4(values[j], values[j + 1], values[j + 2], values[j + 3]);
    }
    return;
  }
#pragma unroll
  for (int j = 0; j < V; ++j) {
    if (n0 + j < channels) row[j] = values[j];
  }
}

// True when the output (and residual) of `out` allow 16-byte vector accesses.
template <typename T>
bool OutputVectorsAligned(const T* y, const T* residual, int channels) {
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return channels % kOutputVector<T> == 0 && aligned(y) && (residual == nullptr || aligned(residual));
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_GEMM_EPILOGUE_CUH_
