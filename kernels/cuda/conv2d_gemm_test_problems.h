// Problems for the CUDA conv2d/GEMM tests and the GPU check (tests/gpu): the shared list of kernels/testing plus
// extras that reach the tensor-core kernels' corners (split-K included), the ResNet-50 conv layers the GPU check
// benchmarks, and the layers of ResNet-50, MobileNetV2 and EfficientNet-Lite0 for the model-layer suite.
#ifndef CONVOY_KERNELS_CUDA_CONV2D_GEMM_TEST_PROBLEMS_H_
#define CONVOY_KERNELS_CUDA_CONV2D_GEMM_TEST_PROBLEMS_H_

#include <string>
#include <vector>

#include "kernels/common/problems.h"

namespace convoy::testing {

// NHWC problems for the tensor-core kernels (FP16, BF16, FP32 with allow_tf32): several k-slices with a partial
// last one, several tiles in M and N with ragged edges, 1x1 with a residual, stride/dilation/asymmetric padding,
// plus one depthwise and one grouped problem so every CUDA conv algorithm runs on this list alone.
std::vector<Conv2dProblem> CudaConvExtraProblems();
std::vector<GemmProblem> CudaGemmExtraProblems();

// Shapes aimed at the Hopper (wgmma) tiles, whose reduction step is one 128-byte row (64 FP16/BF16 or 32 FP32
// channels) and whose tiles are 128 or 64 output pixels by 128 or 64 channels: stride 2 with asymmetric padding,
// dilation 2 (alone and with stride 2), C not a multiple of 64 (a partial last channel block), M = N*P*Q not a
// multiple of 128 (nor of 64), K with a tail past the last 64- and 128-wide tile, 1x1 for the tiled path; and GEMMs
// with m, n and k tails. Every shape is small (each tensor under 128 KiB: the tensor maps of the driver workaround),
// in FP16, BF16 and FP32-as-TF32.
std::vector<Conv2dProblem> HopperConvExtraProblems();
std::vector<GemmProblem> HopperGemmExtraProblems();

// The shared list followed by the extras.
std::vector<Conv2dProblem> CudaConvTestProblems();
std::vector<GemmProblem> CudaGemmTestProblems();

// A ResNet-50 conv layer (torchvision v1.5: stride on the 3x3) at a batch size, for the GPU check's benchmark.
struct ResNetLayer {
  std::string name;
  Conv2dProblem problem;
};
// The distinct conv layers of ResNet-50 (stem, and per stage the 1x1 reduce, 3x3, 1x1 expand and downsample) in
// `dtype`/`layout`; FP32 layers set allow_tf32. Epilogue: folded-BN bias + ReLU.
std::vector<ResNetLayer> ResNet50ConvLayers(int batch, DataType dtype, Layout layout);

// "resnet50", "mobilenetv2", "efficientnet_lite0".
std::vector<std::string> TestModels();
// Every distinct conv layer of `model` (ResNet-50 v1.5 with its downsamples, MobileNetV2, EfficientNet-Lite0: real
// input/output channels, filter, stride, padding, groups, and the epilogue the model fuses: bias + ReLU/ReLU6, the
// residual before the ReLU of ResNet's expansions, after the linear projections of repeated inverted-residual
// blocks) at batch `batch`, NHWC, with the input's spatial size reduced to the smallest that gives an
// output_hw x output_hw output (the emulation pays for every output pixel; channels, taps and batch are what the
// kernels' tiling and gathers depend on). Stems take 8 channels, as the planner pads RGB. Named "<model>/<layer>_b<N>".
std::vector<ResNetLayer> ModelConvLayerProblems(const std::string& model, int batch, int output_hw, DataType dtype);
// The model's classifier GEMM at batch `batch`: [batch, 2048 or 1280] x [1000, ...]^T + bias.
std::vector<GemmProblem> ModelFcProblems(const std::string& model, int batch, DataType dtype);
// The groups-1 conv layer shapes of ResNet-50 (every distinct layer, stem C padded to 8), MobileNetV2 and
// EfficientNet-Lite0 (their pointwise expand / project convolutions and head; the depthwise layers are groups == C
// and the RGB stems C = 3) with the networks' channel counts, filters, strides and padding, at `spatial` x `spatial`
// inputs (the emulation cannot afford 224 x 224) and batch `batch`, in `dtype` NHWC (FP32 with allow_tf32), with a
// bias + ReLU epilogue (plus a residual on the projections, as the networks add one).
std::vector<ResNetLayer> NetworkConvLayerShapes(int spatial, int batch, DataType dtype);

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_CUDA_CONV2D_GEMM_TEST_PROBLEMS_H_
