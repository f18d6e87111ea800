// CONVOY_HOST_DEVICE marks small inline functions shared by host code, CUDA kernels compiled by nvcc, and the same
// kernels compiled as C++ by the CUDA emulation layer.
#ifndef CONVOY_KERNELS_COMMON_HOST_DEVICE_H_
#define CONVOY_KERNELS_COMMON_HOST_DEVICE_H_

#if defined(__CUDACC__)
#define CONVOY_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CONVOY_HOST_DEVICE inline
#endif

#endif  // CONVOY_KERNELS_COMMON_HOST_DEVICE_H_
