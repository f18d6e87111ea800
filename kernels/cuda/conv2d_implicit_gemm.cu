// conv2d as a tensor-core implicit GEMM (NHWC, groups 1; FP16/BF16 with FP32 accumulation, FP32 as TF32 when
// allowed), registered as one algorithm per tile shape and split factor so the autotuner has real choices and the
// heuristic's launch-cost model picks among them:
//   cuda.conv2d.implicit_gemm_128x256 / _256x128   8 warps, 64-element k-step: big layers at batch >= 8
//   cuda.conv2d.implicit_gemm_128x128              4 warps: big layers
//   cuda.conv2d.implicit_gemm_128x64               K = 64..128 layers, or to double the block count
//   cuda.conv2d.implicit_gemm_64x64                small layers (batch 1, 7x7 and 14x14 outputs)
//   cuda.conv2d.implicit_gemm_64x64_splitk{2,4,8,16}   the reduction split across 2..16 blocks into an FP32
//                                                   workspace, then the reduce pass: deep layers with few tiles
// The kernel is conv2d_implicit_gemm_kernel.cuh (instances in conv2d_implicit_gemm_instances_*.cu), the entry that
// validates and dispatches is conv2d_implicit_gemm_algorithm.cuh.
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using CudaConv2dImplicitGemm128x256 = CudaConv2dImplicitGemm<ImplicitGemmTile128x256, false>;
using CudaConv2dImplicitGemm256x128 = CudaConv2dImplicitGemm<ImplicitGemmTile256x128, false>;
using CudaConv2dImplicitGemm128x128 = CudaConv2dImplicitGemm<ImplicitGemmTile128x128, false>;
using CudaConv2dImplicitGemm128x64 = CudaConv2dImplicitGemm<ImplicitGemmTile128x64, false>;
using CudaConv2dImplicitGemm64x64 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false>;
using CudaConv2dImplicitGemm64x64SplitK2 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false, 2>;
using CudaConv2dImplicitGemm64x64SplitK4 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false, 4>;
using CudaConv2dImplicitGemm64x64SplitK8 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false, 8>;
using CudaConv2dImplicitGemm64x64SplitK16 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, false, 16>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm128x256);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm256x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm128x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64SplitK2);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64SplitK4);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64SplitK8);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dImplicitGemm64x64SplitK16);

}  // namespace
}  // namespace convoy::cuda
