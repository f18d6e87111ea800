// Explicit instances of the tensor-core implicit-GEMM launchers for __half, the gathering implicit GEMM (conv2d), every
// tile. Each element type and mode is its own file so that nvcc builds them in parallel (the 8-warp tiles are the
// slowest to compile).
#define CONVOY_IMPLICIT_GEMM_DEFINE_INSTANCES 1
#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"

namespace convoy::cuda {

CONVOY_IMPLICIT_GEMM_INSTANCES_OF(, __half, false)

}  // namespace convoy::cuda
