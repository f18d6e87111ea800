// The CUDA emulation prelude: everything a .cu file needs to compile as ordinary C++ and run on the CPU. Bazel's
// cuda_emulated_library (bazel/cuda.bzl) includes it ahead of each .cu file; kernel sources themselves include
// cuda_compat.cuh, which includes this header when not compiled by nvcc. See docs/cuda_emulation.md.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_CUDA_EMULATION_H_
#define CONVOY_KERNELS_CUDA_EMULATION_CUDA_EMULATION_H_

#if defined(__CUDACC__)
#error "cuda_emulation.h is for C++ compilers; nvcc builds include cuda_compat.cuh, which uses the real CUDA headers"
#endif

#ifndef CONVOY_CUDA_EMULATION
#define CONVOY_CUDA_EMULATION 1
#endif

#include "kernels/cuda_emulation/device_builtins.h"
#include "kernels/cuda_emulation/float16.h"
#include "kernels/cuda_emulation/grid_launcher.h"
#include "kernels/cuda_emulation/host_runtime.h"
#include "kernels/cuda_emulation/schedule.h"
#include "kernels/cuda_emulation/tensor_core_emulation.h"
#include "kernels/cuda_emulation/vector_types.h"

#endif  // CONVOY_KERNELS_CUDA_EMULATION_CUDA_EMULATION_H_
