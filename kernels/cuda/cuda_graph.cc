// CUDA graph capture and replay on the CUDA runtime, real or emulated (see cuda_graph.h).
#include "kernels/cuda/cuda_graph.h"

#include <utility>

#include "kernels/common/status_macros.h"
#include "kernels/cuda_emulation/cuda_status.h"

namespace convoy::cuda {

bool CudaGraphsSupported() { return true; }

void CudaGraph::Reset() {
  if (exec_ != nullptr) (void)cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec_));
  if (graph_ != nullptr) (void)cudaGraphDestroy(static_cast<cudaGraph_t>(graph_));
  exec_ = nullptr;
  graph_ = nullptr;
}

absl::Status CudaGraph::Launch(cudaStream_t stream) const {
  if (exec_ == nullptr) return absl::FailedPreconditionError("CudaGraph::Launch on an empty graph");
  return CudaStatus(cudaGraphLaunch(static_cast<cudaGraphExec_t>(exec_), stream), "cudaGraphLaunch");
}

absl::StatusOr<CudaGraphCapture> CudaGraphCapture::Begin(cudaStream_t stream) {
  if (stream == nullptr) {
    return absl::InvalidArgumentError("CUDA graph capture needs a created stream, not the legacy default stream");
  }
  CONVOY_RETURN_IF_CUDA_ERROR(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  return CudaGraphCapture(stream);
}

void CudaGraphCapture::Abandon() {
  if (!open_) return;
  open_ = false;
  cudaGraph_t graph = nullptr;
  (void)cudaStreamEndCapture(stream_, &graph);
  if (graph != nullptr) (void)cudaGraphDestroy(graph);
  (void)cudaGetLastError();  // an invalidated capture leaves its error behind; the caller already has its own
}

absl::StatusOr<CudaGraph> CudaGraphCapture::End() {
  if (!open_) return absl::FailedPreconditionError("CudaGraphCapture::End without an open capture");
  open_ = false;
  cudaGraph_t graph = nullptr;
  CONVOY_RETURN_IF_CUDA_ERROR(cudaStreamEndCapture(stream_, &graph));
  CudaGraph result;
  result.graph_ = graph;
  cudaGraphExec_t exec = nullptr;
  CONVOY_RETURN_IF_CUDA_ERROR(cudaGraphInstantiate(&exec, graph, 0));
  result.exec_ = exec;
  return result;
}

absl::StatusOr<CudaGraph> CudaGraph::Capture(cudaStream_t stream, const std::function<absl::Status()>& body) {
  CONVOY_ASSIGN_OR_RETURN(CudaGraphCapture capture, CudaGraphCapture::Begin(stream));
  CONVOY_RETURN_IF_ERROR(body());  // ~CudaGraphCapture ends the capture and drops the partial graph
  return capture.End();
}

CudaGraph::~CudaGraph() { Reset(); }

CudaGraph::CudaGraph(CudaGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)), exec_(std::exchange(other.exec_, nullptr)) {}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    Reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
  }
  return *this;
}

CudaGraphCapture::~CudaGraphCapture() { Abandon(); }

CudaGraphCapture::CudaGraphCapture(CudaGraphCapture&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), open_(std::exchange(other.open_, false)) {}

CudaGraphCapture& CudaGraphCapture::operator=(CudaGraphCapture&& other) noexcept {
  if (this != &other) {
    Abandon();
    stream_ = std::exchange(other.stream_, nullptr);
    open_ = std::exchange(other.open_, false);
  }
  return *this;
}

}  // namespace convoy::cuda
