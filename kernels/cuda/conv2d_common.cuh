// Device helpers shared by Convoy's CUDA conv2d and GEMM kernels (both under nvcc and under the CUDA emulation):
//
//   ElementToFloat<T>(v), FloatToElement<T>(f)   FP32 / FP16 / BF16 element conversion (element_conversion.cuh)
//   StoreElementPair<T>(dst, a, b)               two adjacent outputs in one 4- or 8-byte store (dst aligned to
//                                                PairedStoreAlignment(dtype) = 2 elements: 8 bytes for FP32)
//   EpilogueOperands                             the fused-epilogue pointers and descriptor a kernel carries
//   MakeEpilogueOperands<T>(epilogue, args)      ... filled from a Conv2dArgs or GemmArgs
//   LaunchForFloatType(dtype, "Launcher", fn)    fn(T{}) -> cudaError_t for T = __half, __nv_bfloat16 or float; Status
//   ApplyFusedEpilogue(ops, acc, channel, offset)  scale, bias, residual before/after, activation of one output
//   SetConvGeometry(problem, shape)              a conv problem's sizes, padding, stride and dilation into a kernel's
//                                                shape or parameter struct (host side)
//
// The epilogue math itself is ApplyEpilogue from kernels/common/epilogue.h, so CPU, CUDA and reference agree.
#ifndef CONVOY_KERNELS_CUDA_CONV2D_COMMON_CUH_
#define CONVOY_KERNELS_CUDA_CONV2D_COMMON_CUH_

#include <cstdint>
#include <type_traits>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"
#include "kernels/common/epilogue.h"
#include "kernels/cuda/element_conversion.cuh"
#include "kernels/cuda_emulation/cuda_compat.cuh"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

// Bytes of alignment StoreElementPair needs at the destination: two elements (8 for FP32/TF32, 4 for FP16/BF16).
inline size_t PairedStoreAlignment(DataType dtype) { return 2 * DataTypeSize(dtype); }

// Stores two adjacent elements with one instruction; `destination` must be aligned to two elements.
template <typename T>
__device__ __forceinline__ void StoreElementPair(T* destination, float first, float second) {
#if defined(CONVOY_CUDA_EMULATION)
  // x86 stores at any alignment; the GPU faults ("misaligned address") on a float2 / 32-bit store that is not
  // aligned to its size, so the emulation traps where the GPU would.
  if (reinterpret_cast<uintptr_t>(destination) % (2 * sizeof(T)) != 0) __trap();
#endif
  if constexpr (sizeof(T) == 4) {
    float2 pair;
    pair.x = first;
    pair.y = second;
    *reinterpret_cast<float2*>(destination) = pair;
  } else if constexpr (sizeof(T) == 2) {
    const T low = FloatToElement<T>(first), high = FloatToElement<T>(second);
    uint32_t bits;
    if constexpr (std::is_same<T, __half>::value) {
      bits = PackHalf2(low, high);
    } else {
      bits = PackBfloat162(low, high);
    }
    *reinterpret_cast<uint32_t*>(destination) = bits;
  }
}

// What a conv/GEMM kernel needs for its fused epilogue. scale/bias index the output channel; the residual has the
// output's shape, dtype and layout, so it is read at the output's own offset.
template <typename T>
struct EpilogueOperands {
  Epilogue epilogue;
  const float* scale = nullptr;  // [K] when epilogue.has_scale
  const float* bias = nullptr;   // [K] when epilogue.has_bias
  const T* residual = nullptr;   // output-shaped when epilogue.residual != kNone
};

// The operands of `epilogue` from a Conv2dArgs or GemmArgs (scale, bias and residual pointers).
template <typename T, typename Args>
EpilogueOperands<T> MakeEpilogueOperands(const Epilogue& epilogue, const Args& args) {
  EpilogueOperands<T> operands;
  operands.epilogue = epilogue;
  operands.scale = args.scale;
  operands.bias = args.bias;
  operands.residual = static_cast<const T*>(args.residual);
  return operands;
}

// The dtype dispatch of every conv2d/GEMM entry: launch(T{}) with T = __half for FP16, __nv_bfloat16 for BF16 and
// float otherwise (FP32, TF32: CanImplement has turned every other dtype away). A failed launch becomes a Status
// naming `launcher`.
template <typename Launch>
absl::Status LaunchForFloatType(DataType dtype, absl::string_view launcher, Launch&& launch) {
  cudaError_t error;
  switch (dtype) {
    case DataType::kFloat16:
      error = launch(__half{});
      break;
    case DataType::kBFloat16:
      error = launch(__nv_bfloat16{});
      break;
    default:
      error = launch(float{});
      break;
  }
  return CudaStatus(error, launcher);
}

template <typename T>
__device__ __forceinline__ float ApplyFusedEpilogue(const EpilogueOperands<T>& ops, float acc, int channel,
                                                    int64_t offset) {
  const float residual =
      ops.epilogue.residual == ResidualMode::kNone ? 0.0f : ElementToFloat<T>(ops.residual[offset]);
  return ApplyEpilogue(acc, ops.epilogue, ops.scale, ops.bias, channel, residual);
}

// Copies the geometry of a Conv2dProblem or QuantizedConv2dProblem into a kernel's shape or parameter struct with
// the fields n, h, w, c, k, r, s, p, q, pad_h, pad_w (top and left), stride_h, stride_w, dilation_h and dilation_w.
template <typename Problem, typename Shape>
void SetConvGeometry(const Problem& problem, Shape& shape) {
  shape.n = problem.n, shape.h = problem.h, shape.w = problem.w, shape.c = problem.c;
  shape.k = problem.k, shape.r = problem.r, shape.s = problem.s;
  shape.p = problem.p(), shape.q = problem.q();
  shape.pad_h = problem.pad_top, shape.pad_w = problem.pad_left;
  shape.stride_h = problem.stride_h, shape.stride_w = problem.stride_w;
  shape.dilation_h = problem.dilation_h, shape.dilation_w = problem.dilation_w;
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CONV2D_COMMON_CUH_
