// Warm-up, then samples of N back-to-back launches, as a CUDA graph where possible (see launch_timing.h).
#include "tests/gpu/launch_timing.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/cuda_graph.h"
#include "kernels/cuda/cuda_stream.h"

namespace convoy::gpu_check {
namespace {

// Milliseconds of `queue()` between two events on `stream`.
absl::StatusOr<double> TimeOnce(cudaStream_t stream, const cuda::CudaEvent& start, const cuda::CudaEvent& end,
                                const std::function<absl::Status()>& queue) {
  CONVOY_RETURN_IF_ERROR(start.Record(stream));
  CONVOY_RETURN_IF_ERROR(queue());
  CONVOY_RETURN_IF_ERROR(end.Record(stream));
  CONVOY_RETURN_IF_ERROR(end.Synchronize());
  CONVOY_ASSIGN_OR_RETURN(const float ms, cuda::CudaEvent::ElapsedMilliseconds(start, end));
  return static_cast<double>(ms);
}

}  // namespace

std::string LaunchTiming::method() const { return absl::StrCat(graph ? "graph x" : "stream x", launches); }

absl::StatusOr<LaunchTiming> TimeLaunches(cudaStream_t stream, const std::function<absl::Status()>& launch,
                                          const LaunchTimingOptions& options) {
  CONVOY_ASSIGN_OR_RETURN(cuda::CudaEvent start, cuda::CudaEvent::Create({/*timing=*/true}));
  CONVOY_ASSIGN_OR_RETURN(cuda::CudaEvent end, cuda::CudaEvent::Create({/*timing=*/true}));
  auto back_to_back = [&](int n) {
    return [&launch, n]() -> absl::Status {
      for (int i = 0; i < n; ++i) CONVOY_RETURN_IF_ERROR(launch());
      return absl::OkStatus();
    };
  };
  // Warm-up, then N from one timed batch of launches.
  CONVOY_ASSIGN_OR_RETURN(double probe_ms, TimeOnce(stream, start, end, back_to_back(options.warmup)));
  const double per_launch_ms = std::max(probe_ms / std::max(options.warmup, 1), 1e-4);
  LaunchTiming timing;
  timing.launches = std::clamp(static_cast<int>(options.sample_ms / per_launch_ms), options.min_launches,
                               options.max_launches);
  std::function<absl::Status()> sample = back_to_back(timing.launches);
  cuda::CudaGraph graph;
  if (options.as_graph) {
    absl::StatusOr<cuda::CudaGraph> captured = cuda::CudaGraph::Capture(stream, sample);
    if (captured.ok()) {
      graph = std::move(*captured);
      timing.graph = true;
      sample = [&graph, stream] { return graph.Launch(stream); };
      CONVOY_RETURN_IF_ERROR(sample());  // the graph's own first launch (upload) outside the timing
    } else {
      timing.graph_error = std::string(captured.status().message());
    }
  }
  std::vector<double> per_launch_us;
  for (int s = 0; s < options.samples; ++s) {
    CONVOY_ASSIGN_OR_RETURN(const double ms, TimeOnce(stream, start, end, sample));
    per_launch_us.push_back(ms * 1000.0 / timing.launches);
  }
  std::sort(per_launch_us.begin(), per_launch_us.end());
  timing.microseconds = per_launch_us[per_launch_us.size() / 2];
  return timing;
}

}  // namespace convoy::gpu_check
