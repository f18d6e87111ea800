// The planner: turns an optimized Graph into an immutable ExecutionPlan (plan.h) for one device and precision.
//
//   PlannerOptions options;
//   options.device = &CpuDevice::Default();
//   options.max_batch_size = 8;
//   CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<const ExecutionPlan> plan, BuildExecutionPlan(graph, options));
//
// What it does, node by node (in the graph's topological order):
// - Conv2d, Pool2d, BatchNorm, Activation, Binary, Concat/Split (channel axis), ChannelShuffle, Softmax, Gemm and Pad
//   become one kernel step each, with the fused conv epilogue carried into Conv2dProblem. Binary broadcasting is
//   classified into the kernel's kinds (same shape, [N,C,1,1], [1,C,1,1], scalar); Gemm weights are transposed to
//   [n, k] and scaled by alpha once, beta * C becomes the bias.
// - Transpose becomes a TransposeOp step on the logical (NCHW-order) dims: its input is converted to NCHW first and
//   its output is NCHW (consumers in an NHWC plan convert it like any graph input).
// - Flatten, Reshape and Identity become aliases of their input's buffer (no copy).
// - Anything else fails with the node's name and op.
// Layout: kernels run in options.layout. Graph inputs and outputs are exchanged in NCHW (in options.io_dtypes, FP32
// by default) and Convert steps are inserted where a tensor's dtype or layout has to change: at the graph edges and,
// in NHWC plans, before Flatten/Reshape/Softmax/Transpose of spatial tensors.
// Precision: FP16/BF16 convert the weights at load and run every kernel in that type; TF32 sets allow_tf32.
// QDQ models (quantized_conv_folding.h): in FP32 plans on the CPU, each convolution between quantize-dequantize
// nodes that a QuantizedConv2dOp algorithm implements at every batch size runs in INT8 on 8-bit NHWC tensors, which
// stay 8-bit from one such step to the next; Convert steps quantize and dequantize where FP32 ops meet them. The
// plan lists every such convolution with its precision and, for the FP32 ones, the reason (quantized_layers()).
// Algorithms: for every batch size 1..max_batch_size through SelectAlgorithm (kHeuristic, or kTune for the
// configured batch sizes, timing each layer at load); packed filters are made once per (step, algorithm).
#ifndef CONVOY_SERVER_RUNTIME_PLANNER_H_
#define CONVOY_SERVER_RUNTIME_PLANNER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/registry/algorithm_cache.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/device.h"
#include "server/runtime/graph.h"
#include "server/runtime/plan.h"

namespace convoy::runtime {

struct PlannerOptions {
  // Where the plan runs and its weights live. Required; must outlive the plan.
  Device* device = nullptr;
  Precision precision = Precision::kFp32;
  // NCHW suits the CPU kernels; NHWC the CUDA tensor-core kernels (Convert steps at the edges cost one pass each).
  Layout layout = Layout::kNCHW;
  // Largest batch the executor may run; every size 1..max_batch_size gets its problems and algorithms. Ignored
  // (treated as 1) for graphs without a symbolic batch dimension.
  int max_batch_size = 1;
  // kHeuristic picks without timing (or takes what the cache already knows); kTune times every candidate for the
  // batch sizes in tuned_batch_sizes (all of them when empty) at load. Tuning makes loads slower and plans faster.
  AlgorithmSelection selection = AlgorithmSelection::kHeuristic;
  std::vector<int> tuned_batch_sizes;
  TuningOptions tuning;
  // Null: AlgorithmCache::Global().
  AlgorithmCache* cache = nullptr;
  // QDQ models: run the convolutions that fold (quantized_conv_folding.h) as INT8 steps. Off: every quantization
  // is simulated in FP32 (the QDQ nodes as activation steps), as onnxruntime computes with its optimizations off.
  bool int8_convolutions = true;
  // QDQ models: a residual add fused into the INT8 convolution before it is computed with one rounding (the conv's
  // output is not first rounded to 8 bits; MakeQuantizedConvProblem) where SingleRoundingAddApplies and an algorithm
  // implements it. Faster (one post-op instead of four on oneDNN's convolutions) but no longer bit for bit what the
  // QDQ graph (and onnxruntime) computes: the sum may differ by one quantization step. Off: the exact chain.
  bool int8_single_rounding_adds = false;
  // Runs each squeeze-and-excitation branch (global average pool, two 1x1 convolutions, the gate's multiply;
  // squeeze_excitation_fusion.h) as one step where an algorithm of the device implements it in the plan's precision
  // (the CPU, FP32): at batch 1 the five small steps' fixed costs are most of the branch's time. Off: node by node.
  bool fuse_squeeze_excitation = true;
  // Data type in which each graph input/output (by name) is exchanged with the caller; FP32 when absent.
  std::map<std::string, DataType> io_dtypes;
  // Graph inputs (by name) that arrive as UINT8 images, [N,] H, W, C, and are normalized on the device by a
  // PreprocessOp step into the graph's [N,] C, H, W input in the plan's compute type and layout (n, dst_dtype and
  // dst_layout of the problem are set by the planner). The plan input is then the UINT8 image.
  std::map<std::string, PreprocessProblem> preprocessing;
  // Receives one line per tuned layer (choice and time), per rejected algorithm, and a progress line ("planning: k of
  // n nodes after t s") when planning a node ends at least progress_interval_seconds after the last such line (0:
  // after every node but the last). May be empty.
  std::function<void(const std::string&)> log;
  double progress_interval_seconds = 10;
};

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> BuildExecutionPlan(const Graph& graph,
                                                                        const PlannerOptions& options);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_PLANNER_H_
