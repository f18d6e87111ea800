// Explicit instances of the tensor-core implicit-GEMM launchers for float (every tile, general and 1x1), compiled
// apart from the algorithms so that nvcc builds the instances of the three element types in parallel.
#define CONVOY_IMPLICIT_GEMM_DEFINE_INSTANCES 1
#include "kernels/cuda/conv2d_implicit_gemm_kernel.cuh"

namespace convoy::cuda {

CONVOY_IMPLICIT_GEMM_INSTANCES(, float)

}  // namespace convoy::cuda
