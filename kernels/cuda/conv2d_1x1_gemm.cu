// 1x1 conv2d (stride 1, no padding, NHWC, groups 1) as a plain tensor-core GEMM: Y[N*H*W, K] = X[N*H*W, C] *
// W[K, C]^T with the fused epilogue. It is the implicit-GEMM mainloop with the gather removed (kOneByOne: each A
// row is one input pixel), registered in two tile shapes:
//   cuda.conv2d.gemm_1x1_128x128   ResNet bottleneck expansions at batch >= 8
//   cuda.conv2d.gemm_1x1_64x64     small layers
#include "kernels/cuda/conv2d_implicit_gemm_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using CudaConv2dGemm1x1_128x128 = CudaConv2dImplicitGemm<ImplicitGemmTile128x128, true>;
using CudaConv2dGemm1x1_64x64 = CudaConv2dImplicitGemm<ImplicitGemmTile64x64, true>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dGemm1x1_64x64);

}  // namespace
}  // namespace convoy::cuda
