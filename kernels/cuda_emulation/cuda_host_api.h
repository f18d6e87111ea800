// For host .cc files that call CUDA launchers and the runtime: the real <cuda_runtime.h> (and fp16/bf16 types) when
// the kernels are built by nvcc, the emulated runtime when they are an emulated library. Targets built from
// cuda_emulated_library propagate CONVOY_CUDA_EMULATION to their dependents, which is how this header chooses.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_CUDA_HOST_API_H_
#define CONVOY_KERNELS_CUDA_EMULATION_CUDA_HOST_API_H_

#if defined(__CUDACC__) || !defined(CONVOY_CUDA_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#else
#include "kernels/cuda_emulation/float16.h"
#include "kernels/cuda_emulation/grid_launcher.h"
#include "kernels/cuda_emulation/host_runtime.h"
#include "kernels/cuda_emulation/schedule.h"
#endif

#endif  // CONVOY_KERNELS_CUDA_EMULATION_CUDA_HOST_API_H_
