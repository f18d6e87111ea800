// cuDNN 9 as the GPU check's yardstick: the fastest forward algorithm from cuDNN's own Find
// (cudnnFindConvolutionForwardAlgorithmEx, same dtype and layout, FP32 accumulation; FP32 problems with TF32
// allowed), timed with CUDA events through cudnnConvolutionBiasActivationForward (bias + ReLU fused) where cuDNN
// accepts it, else through cudnnConvolutionForward alone (then `fused` is false: cuDNN did less work than we did).
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

namespace convoy::gpu_check {

struct CudnnTiming {
  std::string algorithm;  // cuDNN's name of the winning forward algorithm
  double milliseconds = 0;
  bool fused = false;     // timed with bias + ReLU fused (else convolution only)
};

// OK when cuDNN could be loaded (the message of the error says why not, e.g. "emulated device").
absl::Status CudnnBenchAvailable();
std::string CudnnVersionString();

// Times cuDNN's best algorithm on `problem` (NHWC or NCHW, FP16/BF16/FP32) with device buffers x, w (KRSC for NHWC),
// y and a workspace of `workspace_bytes`, on `stream` (a cudaStream_t), median of `reps` runs.
absl::StatusOr<CudnnTiming> TimeCudnnConv(const Conv2dProblem& problem, const void* x, const void* w, void* y,
                                          void* workspace, size_t workspace_bytes, void* stream, int reps);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_CUDNN_BENCH_H_
