// Host-side tensor-map encoding for the bulk tensor copy (TMA) kernels, the same call in both builds:
//
//   CUtensorMap map;
//   CUresult r = convoy::cuda::EncodeTensorMapTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, base, dims, strides,
//                                                   box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, ...);
//
// Under nvcc (and host code linked against the nvcc-built kernels) it calls the driver's cuTensorMapEncodeTiled /
// cuTensorMapEncodeIm2col, found through cudaGetDriverEntryPointByVersion so that nothing links -lcuda; against
// the CUDA emulation it calls the emulated encoders of tensor_map.h (the same arguments and limits).
// TensorMapErrorDetail() says why the last emulated encode failed ("" with the real driver).
//
// On the real path every map the driver encodes gets CUTLASS's driver workaround (tensor_map_driver_workaround.h):
// with a driver of CUDA 13.1 or older (cudaDriverGetVersion) and a tensor spanning under 128 KiB, bit 21 of the
// map's second 64-bit word is cleared. The emulated encoder's maps are the emulation's own and are left alone.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_HOST_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_HOST_H_

#include <string>

#include "kernels/cuda_emulation/tensor_map_driver_workaround.h"

#if defined(__CUDACC__) || !defined(CONVOY_CUDA_EMULATION)
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#else
#include "kernels/cuda_emulation/tensor_map.h"
#endif

namespace convoy::cuda {

#if defined(__CUDACC__) || !defined(CONVOY_CUDA_EMULATION)
namespace tensor_map_internal {
template <typename Function>
Function DriverEntryPoint(const char* symbol) {
  void* function = nullptr;
  cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion(symbol, &function, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      found != cudaDriverEntryPointSuccess) {
    (void)cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<Function>(function);
}

// The driver's version as cudaDriverGetVersion reports it (1000 * major + 10 * minor), read once; 0 if it fails.
inline int DriverVersion() {
  static const int version = [] {
    int v = 0;
    if (cudaDriverGetVersion(&v) != cudaSuccess) {
      (void)cudaGetLastError();
      v = 0;
    }
    return v;
  }();
  return version;
}

inline uint64_t ElementBytes(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 8;
    default:
      return 1;  // 8-bit and packed sub-byte types: the smallest span, so the workaround applies when in doubt
  }
}

// What every real encode does after the driver succeeded: CUTLASS's driver workaround.
inline CUresult FinishEncode(CUresult result, CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank,
                             const cuuint64_t* dims, const cuuint64_t* strides) {
  if (result == CUDA_SUCCESS) {
    ApplyTensorMapDriverWorkaround(map, DriverVersion(),
                                   TensorMapSpanBytes(static_cast<int>(rank), dims, strides, ElementBytes(dtype)));
  }
  return result;
}
}  // namespace tensor_map_internal

inline CUresult EncodeTensorMapTiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
                                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                     CUtensorMapFloatOOBfill oob) {
  static const auto encode =
      tensor_map_internal::DriverEntryPoint<PFN_cuTensorMapEncodeTiled_v12000>("cuTensorMapEncodeTiled");
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  return tensor_map_internal::FinishEncode(
      encode(map, dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob), map, dtype,
      rank, dims, strides);
}

inline CUresult EncodeTensorMapIm2col(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
                                      const cuuint64_t* dims, const cuuint64_t* strides, const int* lower_corner,
                                      const int* upper_corner, cuuint32_t channels_per_pixel,
                                      cuuint32_t pixels_per_column, const cuuint32_t* element_strides,
                                      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                      CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  static const auto encode =
      tensor_map_internal::DriverEntryPoint<PFN_cuTensorMapEncodeIm2col_v12000>("cuTensorMapEncodeIm2col");
  if (encode == nullptr) return CUDA_ERROR_NOT_FOUND;
  return tensor_map_internal::FinishEncode(
      encode(map, dtype, rank, address, dims, strides, lower_corner, upper_corner, channels_per_pixel,
             pixels_per_column, element_strides, interleave, swizzle, l2, oob),
      map, dtype, rank, dims, strides);
}

inline std::string TensorMapErrorDetail() { return ""; }
#else
inline CUresult EncodeTensorMapTiled(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
                                     const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                                     CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2,
                                     CUtensorMapFloatOOBfill oob) {
  return cuTensorMapEncodeTiled(map, dtype, rank, address, dims, strides, box, element_strides, interleave, swizzle,
                                l2, oob);
}

inline CUresult EncodeTensorMapIm2col(CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, void* address,
                                      const cuuint64_t* dims, const cuuint64_t* strides, const int* lower_corner,
                                      const int* upper_corner, cuuint32_t channels_per_pixel,
                                      cuuint32_t pixels_per_column, const cuuint32_t* element_strides,
                                      CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                      CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  return cuTensorMapEncodeIm2col(map, dtype, rank, address, dims, strides, lower_corner, upper_corner,
                                 channels_per_pixel, pixels_per_column, element_strides, interleave, swizzle, l2,
                                 oob);
}

inline std::string TensorMapErrorDetail() { return ::convoy::cuda_emulation::LastTensorMapError(); }
#endif

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_HOST_H_
