// The conv layers the CPU benchmarks time, and how they time them.
//
// ModelConvLayers() lists the distinct conv2d shapes of torchvision's ResNet-50 (v1.5: stride on the 3x3) and
// MobileNetV2 at 224x224, each with how many times the model uses it, so a per-model sum of layer times can be
// formed. Layer specs travel between the benchmark binaries and bench/onnxruntime_compare.py as one text line:
//
//   model:name:h:w:c:k:r:s:stride:pad:groups:count      e.g. resnet50:l1_3x3:56:56:64:64:3:3:1:1:1:3
//
// Benchmark problems carry the epilogue the models fuse into these convs: bias + ReLU (ReLU6 for MobileNetV2),
// identity + bias for MobileNetV2's linear projections.
#ifndef CONVOY_KERNELS_BENCHMARKS_LAYER_BENCHMARKS_H_
#define CONVOY_KERNELS_BENCHMARKS_LAYER_BENCHMARKS_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/common/problems.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/autotuner.h"

namespace convoy::benchmarks {

struct ConvLayer {
  std::string model;  // "resnet50" or "mobilenetv2"
  std::string name;
  int h = 0, w = 0, c = 0, k = 0, r = 0, s = 0, stride = 1, pad = 0, groups = 1;
  int count = 1;         // uses in the model
  bool linear = false;   // no activation after it (MobileNetV2 projections)
};

std::vector<ConvLayer> ModelConvLayers();
std::string FormatLayerSpec(const ConvLayer& layer);
absl::StatusOr<ConvLayer> ParseLayerSpec(const std::string& spec);

// The problem for a layer at a batch size and layout, with the fused epilogue described above.
Conv2dProblem LayerProblem(const ConvLayer& layer, int batch, Layout layout);

// Random operands for one problem, made once and shared by every algorithm timed on it.
using LayerBuffers = TuningBuffers<Conv2dOp>;
absl::StatusOr<std::unique_ptr<LayerBuffers>> MakeLayerBuffers(const Conv2dProblem& problem, CpuDevice& device);

// Times one algorithm (packed filter and workspace prepared outside the timed region): median of `reps` runs after
// `warmup`, in milliseconds.
absl::StatusOr<double> TimeAlgorithm(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem,
                                     LayerBuffers& buffers, CpuDevice& device, int warmup, int reps);

// Times two algorithms alternately (a, b, a, b, ...) so that both see the same machine load; returns the medians
// of the per-round medians.
absl::StatusOr<std::pair<double, double>> TimeSideBySide(const Conv2dAlgorithm& a, const Conv2dAlgorithm& b,
                                                         const Conv2dProblem& problem, LayerBuffers& buffers,
                                                         CpuDevice& device, int rounds);

}  // namespace convoy::benchmarks

#endif  // CONVOY_KERNELS_BENCHMARKS_LAYER_BENCHMARKS_H_
