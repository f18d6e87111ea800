// FP32 / FP16 / BF16 element <-> float conversion for every CUDA kernel (element-wise ops, conv2d, GEMM), under nvcc
// and under the CUDA emulation:
//
//   float f = ElementToFloat(x[i]);          // or ElementToFloat<T>(x[i]); T deduced from the argument
//   y[i] = FloatToElement<T>(f);             // round to nearest even
#ifndef CONVOY_KERNELS_CUDA_ELEMENT_CONVERSION_CUH_
#define CONVOY_KERNELS_CUDA_ELEMENT_CONVERSION_CUH_

#include "kernels/cuda_emulation/cuda_compat.cuh"

namespace convoy::cuda {

template <typename T>
__device__ __forceinline__ float ElementToFloat(T value);
template <>
__device__ __forceinline__ float ElementToFloat<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ float ElementToFloat<__half>(__half value) {
  return __half2float(value);
}
template <>
__device__ __forceinline__ float ElementToFloat<__nv_bfloat16>(__nv_bfloat16 value) {
  return __bfloat162float(value);
}

template <typename T>
__device__ __forceinline__ T FloatToElement(float value);
template <>
__device__ __forceinline__ float FloatToElement<float>(float value) {
  return value;
}
template <>
__device__ __forceinline__ __half FloatToElement<__half>(float value) {
  return __float2half_rn(value);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FloatToElement<__nv_bfloat16>(float value) {
  return __float2bfloat16_rn(value);
}

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_ELEMENT_CONVERSION_CUH_
