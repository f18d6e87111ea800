// How the GPU check times a kernel, the same way for Convoy and for cuDNN: warm-up launches, then samples of N
// back-to-back launches between one pair of CUDA events (N sized so a sample lasts ~2 ms), preferably as one CUDA
// graph of N launches (no host launch cost between them), else queued one after another on the stream. The result is
// the median over the samples of (sample time / N): the device time of one launch, where a single launch between two
// events followed by a host sync would mostly measure launch latency at batch 1.
#ifndef CONVOY_TESTS_GPU_LAUNCH_TIMING_H_
#define CONVOY_TESTS_GPU_LAUNCH_TIMING_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/cuda_emulation/cuda_host_api.h"

namespace convoy::gpu_check {

struct LaunchTimingOptions {
  bool as_graph = true;          // capture N launches into one CUDA graph (falls back to the stream if it fails)
  int warmup = 3;
  int samples = 5;
  double sample_ms = 2.0;        // target device time of one sample
  int min_launches = 5, max_launches = 2000;
};

struct LaunchTiming {
  double microseconds = 0;  // per launch, median over the samples
  int launches = 0;         // per sample
  bool graph = false;       // measured as a CUDA graph (else back-to-back on the stream)
  std::string graph_error;  // why the graph could not be used, when as_graph was asked for
  std::string method() const;  // "graph xN" / "stream xN"
};

// `launch` queues one launch on `stream` (no synchronization).
absl::StatusOr<LaunchTiming> TimeLaunches(cudaStream_t stream, const std::function<absl::Status()>& launch,
                                          const LaunchTimingOptions& options);

}  // namespace convoy::gpu_check

#endif  // CONVOY_TESTS_GPU_LAUNCH_TIMING_H_
