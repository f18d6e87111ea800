// CUDA graphs: record a whole plan's kernel launches on a stream once, then replay them with a single launch (saves
// the per-kernel launch overhead, which dominates small-batch CNN inference). Kernels may be captured because
// Algorithm::Run never allocates nor synchronizes.
//
//   CONVOY_ASSIGN_OR_RETURN(CudaGraph graph, CudaGraph::Capture(stream, [&] { return plan.Run(batch, stream); }));
//   CONVOY_RETURN_IF_ERROR(graph.Launch(stream));   // as many times as wanted; same buffers every time
//
// or, when the captured code is not one function: CudaGraphCapture::Begin(stream) ... capture.End() -> CudaGraph.
// The captured launches read and write the very device pointers they were given: a replay works on the same buffers
// (copy new inputs into them first, on the same stream).
//
// Capture uses cudaStreamCaptureModeThreadLocal: this thread may not call unsafe APIs (cudaMalloc, synchronous
// copies, cudaStreamSynchronize) while capturing; other threads may. Capture on the legacy default stream (null) is
// not allowed by CUDA; pass an owned stream (CudaStream).
//
// The CUDA emulation captures and replays graphs too (kernels/cuda_emulation/host_runtime.h), and fails the calls a
// capture forbids the way CUDA does, so capture bugs show up in CPU-only tests.
#ifndef CONVOY_KERNELS_CUDA_CUDA_GRAPH_H_
#define CONVOY_KERNELS_CUDA_CUDA_GRAPH_H_

#include <functional>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/cuda_emulation/cuda_host_api.h"

namespace convoy::cuda {

// True where this build can capture and launch graphs: both the real runtime and the emulation can.
bool CudaGraphsSupported();

// An instantiated, launchable graph (cudaGraphExec_t) and the graph it came from; move-only, destroys both.
class CudaGraph {
 public:
  // Captures what `body` queues on `stream` and instantiates it. When `body` fails, capture is ended and its error is
  // returned; the stream is usable again either way.
  static absl::StatusOr<CudaGraph> Capture(cudaStream_t stream, const std::function<absl::Status()>& body);

  CudaGraph() = default;
  ~CudaGraph();
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  bool empty() const { return exec_ == nullptr; }
  // Queues one replay on `stream` (asynchronous, like a kernel launch).
  absl::Status Launch(cudaStream_t stream) const;

 private:
  friend class CudaGraphCapture;
  void Reset();
  void* graph_ = nullptr;  // cudaGraph_t
  void* exec_ = nullptr;   // cudaGraphExec_t
};

// An open capture on a stream; End() closes it and instantiates the graph. Destroying an open capture ends it and
// discards the graph.
class CudaGraphCapture {
 public:
  static absl::StatusOr<CudaGraphCapture> Begin(cudaStream_t stream);

  CudaGraphCapture() = default;
  ~CudaGraphCapture();
  CudaGraphCapture(CudaGraphCapture&& other) noexcept;
  CudaGraphCapture& operator=(CudaGraphCapture&& other) noexcept;
  CudaGraphCapture(const CudaGraphCapture&) = delete;
  CudaGraphCapture& operator=(const CudaGraphCapture&) = delete;

  absl::StatusOr<CudaGraph> End();

 private:
  explicit CudaGraphCapture(cudaStream_t stream) : stream_(stream), open_(true) {}
  void Abandon();
  cudaStream_t stream_ = nullptr;
  bool open_ = false;
};

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_CUDA_GRAPH_H_
