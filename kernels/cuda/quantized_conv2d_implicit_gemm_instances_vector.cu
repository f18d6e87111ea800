// Explicit instances of the INT8 implicit-GEMM launchers with the 16-byte cp.async gather, every tile, u8 and s8
// activations (one file per gather so that nvcc builds them in parallel).
#define CONVOY_QUANTIZED_IMPLICIT_GEMM_DEFINE_INSTANCES 1
#include "kernels/cuda/quantized_conv2d_implicit_gemm_algorithm.cuh"

namespace convoy::cuda {

CONVOY_QUANTIZED_IMPLICIT_GEMM_INSTANCES_OF(, true)

}  // namespace convoy::cuda
