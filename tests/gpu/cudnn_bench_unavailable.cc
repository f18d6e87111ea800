// The cuDNN yardstick where there is no real GPU (the emulated build of the GPU check): always unavailable.
#include "tests/gpu/cudnn_bench.h"

namespace convoy::gpu_check {

absl::Status CudnnBenchAvailable() {
  return absl::UnavailableError("cuDNN skipped: emulated CUDA device (no GPU), so there is nothing to compare with");
}

std::string CudnnVersionString() { return "none (emulated device)"; }

absl::StatusOr<CudnnResult> TimeCudnnBest(const Conv2dProblem&, const void*, const void*, const float*, void*, void*,
                                          size_t, void*, const CudnnBenchOptions&) {
  return CudnnBenchAvailable();
}

absl::StatusOr<CudnnResult> TimeCudnnInt8(const QuantizedConv2dProblem&, const void*, const void*, const float*, void*,
                                          void*, size_t, void*, const CudnnBenchOptions&) {
  return CudnnBenchAvailable();
}

}  // namespace convoy::gpu_check
