// cuDNN 9 as the GPU check's yardstick: "cuDNN's best" on a conv + bias + ReLU layer is the fastest of
//   - the legacy API: cudnnFindConvolutionForwardAlgorithmEx over every algorithm with the whole workspace, its
//     three fastest algorithms timed through cudnnConvolutionBiasActivationForward (bias + ReLU fused; the
//     convolution alone where cuDNN refuses the fused call, and then `fused` is false: cuDNN did less work), and
//   - the backend (graph) API that PyTorch and TensorRT use: an operation graph of the same fused operation
//     (convolution forward -> pointwise add of the bias -> pointwise ReLU, FP32 intermediates), its engine configs
//     from heuristic modes A and B (the top few of each, duplicates removed), each finalized into an execution plan
//     and timed (runtime-fusion engines compile while being finalized: that time is capped, see Options).
// Every candidate is timed by launch_timing.h exactly as Convoy's kernels are (warm-up, samples of N back-to-back
// launches, as one CUDA graph when the capture works).
//
// libcudnn is opened at run time (dlopen), so the check binary carries no link-time cuDNN dependency: it looks at
// $CONVOY_CUDNN_LIBRARY, then libcudnn.so.9 and libcudnn.so on the loader's path. Where cuDNN is missing, or the
// device is emulated (cudnn_bench_unavailable.cc), CudnnBenchAvailable() says why and nothing is timed.
#ifndef CONVOY_TESTS_GPU_CUDNN_BENCH_H_
#define CONVOY_TESTS_GPU_CUDNN_BENCH_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/problems.h"
#include "tests/gpu/launch_timing.h"

namespace convoy::gpu_check {

struct CudnnBenchOptions {
  LaunchTimingOptions timing;
  int legacy_top = 3;         // legacy algorithms timed, in the order of Find's own ranking
  int heuristic_top = 3;      // engine configs taken from each of heuristic modes A and B
  double backend_budget_s = 1.0;  // stop finalizing more backend plans for this layer past this much time
};

struct CudnnResult {
  std::string winner;       // e.g. "legacy IMPLICIT_PRECOMP_GEMM" or "backend B eng12"
  LaunchTiming timing;      // the winner's
  bool fused = false;       // the winner did conv + bias + ReLU (else the convolution only)
  std::string legacy_best;  // "<name> <us>" of the best of each API, for the table's notes
  std::string backend_best;
  int candidates = 0;       // candidates timed, both APIs
};

// OK when cuDNN could be loaded (the message of the error says why not, e.g. "emulated device").
absl::Status CudnnBenchAvailable();
std::string CudnnVersionString();

// cuDNN's best on `problem` (NHWC or NCHW, FP16/BF16/FP32; FP32 with allow_tf32 lets cuDNN use TF32) with device
// buffers x, w (KRSC for NHWC), bias (K floats), y and a workspace of `workspace_bytes`, on `stream` (a cudaStream_t).
absl::StatusOr<CudnnResult> TimeCudnnBest(const Conv2dProblem& problem, const void* x, const void* w,
                                          const float* bias, void* y, void* workspace, size_t workspace_bytes,
                                          void* stream, const CudnnBenchOptions& options);

// cuDNN's INT8 convolution on `problem`'s geometry (the legacy API, where cuDNN 9 offers INT8: NHWC INT8 x and w,
// INT32 compute, INT8 y, C and K multiples of 4; Find's top algorithms timed, bias (K floats) + ReLU fused where
// cuDNN takes the fused call). It scales by one alpha: less work than Convoy's per-channel requantization with zero
// points, so the ratio favours cuDNN.
absl::StatusOr<CudnnResult> TimeCudnnInt8(const QuantizedConv2dProblem& problem, const void* x, const void* w,
                                          const float* bias, void* y, void* workspace, size_t workspace_bytes,
                                          void* stream, const CudnnBenchOptions& options);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_CUDNN_BENCH_H_
