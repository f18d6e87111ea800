// Explicit instances of the Hopper main-loop launchers for __nv_bfloat16 (every tile, im2col and tiled), compiled apart
// so that nvcc builds the three element types in parallel.
#define CONVOY_HOPPER_GEMM_DEFINE_INSTANCES 1
#include "kernels/cuda/conv2d_hopper_kernel.cuh"

namespace convoy::cuda {

CONVOY_HOPPER_GEMM_INSTANCES(, __nv_bfloat16)

}  // namespace convoy::cuda
