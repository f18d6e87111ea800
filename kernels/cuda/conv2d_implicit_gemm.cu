// conv2d as a tensor-core implicit GEMM (NHWC, groups 1; FP16/BF16 with FP32 accumulation, FP32 as TF32 when
// allowed), three tile shapes registered as three algorithms so the autotuner has real choices:
//   cuda.conv2d.implicit_gemm_128x128   big layers (many output pixels and channels)
//   cuda.conv2d.implicit_gemm_128x64    K = 64..128 layers, or to double the block count
//   cuda.conv2d.implicit_gemm_64x64     small layers (batch 1, 7x7 and 14x14 outputs)
// The kernel is conv2d_implicit_gemm_kernel.cuh (instances in conv2d_implicit_gemm_instances_*.cu), the entry that
// validates and dispatches is conv2d_implicit_gemm_algorithm.cuh.
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using CudaConv2dImplicitGemm128x128 = CudaConv2dImplicitGemm<ImplicitGemmTile128x128, false>;
using CudaConv2dImplicitGemm128x64 = CudaConv2dImplicitGemm<ImplicitGemmTile128x64, false>;
using CudaConv2dImplicitGemm64x64 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm128x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64);

}  // namespace
}  // namespace convoy::cuda
