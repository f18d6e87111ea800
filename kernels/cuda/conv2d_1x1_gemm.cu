// 1x1 conv2d (stride 1, no padding, NHWC, groups 1) as a plain tensor-core GEMM: Y[N*H*W, K] = X[N*H*W, C] *
// W[K, C]^T with the fused epilogue. It is the implicit-GEMM mainloop with the gather removed (kOneByOne: each A
// row is one input pixel), registered per tile shape and split factor:
//   cuda.conv2d.gemm_1x1_128x256 / _256x128   8 warps: ResNet bottleneck expansions at batch >= 8
//   cuda.conv2d.gemm_1x1_128x128              4 warps
//   cuda.conv2d.gemm_1x1_64x64                small layers
//   cuda.conv2d.gemm_1x1_64x64_splitk{2,4,8,16}   long reductions with few tiles (res5 1x1 at batch 1)
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using CudaConv2dGemm1x1_128x256 = CudaConv2dImplicitGemm<ImplicitGemmTile128x256, true>;
using CudaConv2dGemm1x1_256x128 = CudaConv2dImplicitGemm<ImplicitGemmTile256x128, true>;
using CudaConv2dGemm1x1_128x128 = CudaConv2dImplicitGemm<ImplicitGemmTile128x128, true>;
using CudaConv2dGemm1x1_64x64 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true>;
using CudaConv2dGemm1x1_64x64SplitK2 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true, 2>;
using CudaConv2dGemm1x1_64x64SplitK4 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true, 4>;
using CudaConv2dGemm1x1_64x64SplitK8 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true, 8>;
using CudaConv2dGemm1x1_64x64SplitK16 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true, 16>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_128x256);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_256x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64SplitK2);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64SplitK4);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64SplitK8);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64SplitK16);

}  // namespace
}  // namespace convoy::cuda
