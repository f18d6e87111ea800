// The GPU check's benchmark phase ("bench"): every ResNet-50 conv layer (torchvision shapes, stem C padded to 8) at
// the given batch sizes, FP16 NHWC then FP32-as-TF32 NHWC, with a bias + ReLU epilogue. For each layer: every CUDA
// algorithm of ours that implements it and cuDNN's best (cudnn_bench.h: legacy Find and the backend API's heuristic
// modes A and B) are timed the same way (launch_timing.h); one table row per layer with per-launch microseconds, the
// ratio ours / cuDNN (below 1: we are faster), achieved TFLOP/s of each and ours as a share of the device's dense
// tensor-core peak, the timing method, and which cuDNN API won. Each row is one case: a fault costs that row.
#ifndef CONVOY_TESTS_GPU_CONV_BENCH_H_
#define CONVOY_TESTS_GPU_CONV_BENCH_H_

#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "tests/gpu/case_runner.h"

namespace convoy::gpu_check {

struct ConvBenchOptions {
  std::vector<int> batches = {1, 8, 32};
  bool quick = false;  // two tiny stand-in layers, one sample each (the emulated CI run)
};

void RunConvBench(const ConvBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases);

// The "bench_int8" phase: the same layers' geometry (batches up to 8) as INT8 convolutions (s8 x s8 -> s8, bias +
// ReLU): our fastest CUDA INT8 algorithm (its filter packed once, untimed) against cuDNN's INT8 convolution
// (cudnn_bench.h, TimeCudnnInt8), one row per layer; TOP/s against twice the FP16 dense peak.
void RunConvBenchInt8(const ConvBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases);

// Dense tensor-core peak of the device in TFLOP/s for `dtype` (FP16/BF16, or FP32 as TF32), from its SM count, peak
// clock and compute capability; 0 when unknown.
double PeakTensorTflops(const cuda::GpuInfo& info, DataType dtype);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_CONV_BENCH_H_
