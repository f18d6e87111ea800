// conv2d on Hopper (sm_90a): wgmma fed by the bulk tensor copy engine, warp-specialized producer and consumer
// warpgroups on an mbarrier pipeline (conv2d_hopper_kernel.cuh; the entry is conv2d_hopper_algorithm.cuh). NHWC,
// groups 1, FP16/BF16 with FP32 accumulation, FP32 as TF32 when allowed; candidates only on compute capability 9.0:
//   cuda.conv2d.hopper_implicit_gemm_{128x128,128x64,64x64}   any R x S, stride, dilation, padding (im2col copies)
//   cuda.conv2d.hopper_gemm_1x1_{128x128,128x64,64x64}        1x1, stride 1, no padding (2D tiled copies)
#include "kernels/cuda/conv2d_hopper_algorithm.cuh"
#include "kernels/registry/registry.h"

namespace convoy::cuda {
namespace {

using CudaConv2dHopperImplicitGemm128x128 = CudaConv2dHopper<HopperTile128x128, true>;
using CudaConv2dHopperImplicitGemm128x64 = CudaConv2dHopper<HopperTile128x64, true>;
using CudaConv2dHopperImplicitGemm64x64 = CudaConv2dHopper<HopperTile64x64, true>;
using CudaConv2dHopperGemm1x1_128x128 = CudaConv2dHopper<HopperTile128x128, false>;
using CudaConv2dHopperGemm1x1_128x64 = CudaConv2dHopper<HopperTile128x64, false>;
using CudaConv2dHopperGemm1x1_64x64 = CudaConv2dHopper<HopperTile64x64, false>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperImplicitGemm128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperImplicitGemm128x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperImplicitGemm64x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperGemm1x1_128x128);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperGemm1x1_128x64);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, CudaConv2dHopperGemm1x1_64x64);

}  // namespace
}  // namespace convoy::cuda
