// Internals of the planner shared by planner.cc (tensors, conversions, weights, algorithm selection, memory) and
// planner_ops.cc (one mapping function per graph op). Not part of the runtime's API.
#ifndef CONVOY_SERVER_RUNTIME_PLANNER_INTERNAL_H_
#define CONVOY_SERVER_RUNTIME_PLANNER_INTERNAL_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/autotuner.h"
#include "server/runtime/plan.h"
#include "server/runtime/planner.h"
#include "server/runtime/quantized_conv_folding.h"
#include "server/runtime/squeeze_excitation_fusion.h"

namespace convoy::runtime {

// A kernel argument that is either a plan tensor (resolved per run) or a constant in plan-owned device memory.
struct Operand {
  int tensor = -1;
  const void* constant = nullptr;
  const void* Get(TensorPointers tensors) const { return tensor >= 0 ? tensors[tensor] : constant; }
};

// One kernel step of op `Op`: a problem and selected algorithm per batch size, plus a binder that builds the
// argument bundle from the run's tensor pointers.
template <typename Op>
class KernelStep final : public PlanStep {
 public:
  using Problem = typename Op::Problem;
  using Args = typename Op::Args;
  using Binder = std::function<Args(TensorPointers)>;
  struct Variant {
    Problem problem;
    const typename Op::AlgorithmType* algorithm = nullptr;
    size_t workspace_bytes = 0;
    const void* packed_filter = nullptr;  // replaces the raw filter in Args when set
    const AlgorithmState* state = nullptr;  // the algorithm's Prepare for this problem (owned by the plan)
    double tuned_ms = 0;
    std::string launch_summary;  // the algorithm's LaunchSummary (tiles, waves, split, estimate)
    bool verified = false;       // its output was checked on the device for this problem
  };

  KernelStep(std::string name, std::vector<int> inputs, std::vector<int> outputs, Binder bind)
      : PlanStep(std::move(name), Op::kKind, std::move(inputs), std::move(outputs)), bind_(std::move(bind)) {}

  std::vector<Variant>& variants() { return variants_; }
  const Problem& problem(int batch_size) const { return At(batch_size).problem; }

  size_t WorkspaceBytes(int batch_size) const override { return At(batch_size).workspace_bytes; }
  std::string ProblemString(int batch_size) const override { return At(batch_size).problem.ToString(); }
  absl::string_view AlgorithmName(int batch_size) const override { return At(batch_size).algorithm->name(); }
  double TunedMilliseconds(int batch_size) const override { return At(batch_size).tuned_ms; }
  std::string LaunchSummary(int batch_size) const override { return At(batch_size).launch_summary; }
  bool Verified(int batch_size) const override { return At(batch_size).verified; }

  absl::Status Run(int batch_size, TensorPointers tensors, Workspace workspace,
                   const ExecutionContext& context) const override {
    const Variant& v = At(batch_size);
    Args args = bind_(tensors);
    if (v.packed_filter != nullptr) autotuner_internal::SetFilter(args, v.packed_filter);
    workspace.state = v.state;
    return v.algorithm->Run(v.problem, args, workspace, context);
  }

 private:
  const Variant& At(int batch_size) const { return variants_[batch_size - 1]; }
  Binder bind_;
  std::vector<Variant> variants_;
};

// Logical N, C, H, W of a rank-4 tensor, or of a rank-2 [N, C] tensor as [N, C, 1, 1].
struct ImageDims {
  int n = 1, c = 1, h = 1, w = 1;
};

class PlanBuilder {
 public:
  PlanBuilder(const Graph& graph, const PlannerOptions& options);
  absl::StatusOr<std::shared_ptr<const ExecutionPlan>> Build();

  // ---- used by the op mappings (planner_ops.cc) -----------------------------------------------------------------
  const Graph& graph() const { return graph_; }
  const PlannerOptions& options() const { return options_; }
  DataType compute_dtype() const { return ComputeDataType(options_.precision); }
  // The plain layout ops run in: the plan's, or NCHW in a blocked (NCHW8c) plan.
  Layout layout() const { return options_.layout == Layout::kNCHW8c ? Layout::kNCHW : options_.layout; }
  // The layout for an op that may take the blocked layout: NCHW8c in a blocked plan when every channel count is a
  // multiple of the block and some algorithm of the device implements `probe` (the op's batch-1 problem, its layout
  // set here) in it; otherwise layout().
  template <typename Op>
  Layout BlockedLayoutIfImplemented(typename Op::Problem probe, std::initializer_list<int> channel_counts) const;
  int max_batch_size() const { return plan_->max_batch_size_; }
  const PlanTensor& tensor(int id) const { return plan_->tensors_[id]; }

  // The plan tensor currently holding graph tensor `name` (fails for constants: use Constant()).
  absl::StatusOr<int> Value(const std::string& name) const;
  // `id` in `dtype` and `layout`, inserting (and remembering) a Convert step when it differs. padded_channels > C
  // (an NCHW image converted to NHWC) makes the Convert write that many channels, the extra ones zeros.
  absl::StatusOr<int> Require(int id, DataType dtype, Layout layout, int padded_channels = 0);
  // The channel count a C-channel image is padded to so that a groups-1 conv reading it runs on the tensor cores
  // (16 bytes of channels: 8 FP16/BF16, 4 TF32), or 0 when this plan does not pad (CPU, NCHW, FP32 without TF32,
  // or C already enough).
  int TensorCoreChannels(int64_t channels) const;
  // Whether every node reading graph tensor `name` is a groups-1 conv (the readers that accept padded channels).
  bool OnlyConvsRead(const std::string& name) const;
  // The computed value of graph tensor `name` in the compute dtype and the plan layout (or `layout`).
  absl::StatusOr<int> ComputeInput(const Node& node, size_t index);
  absl::StatusOr<int> ComputeInput(const Node& node, size_t index, Layout layout);
  // A new step output for graph tensor `name`, shaped as the graph says.
  absl::StatusOr<int> AddOutput(const std::string& name, DataType dtype, Layout layout);
  // A new step output that no graph tensor names (an op's intermediate, e.g. Gemm's transposed A), shaped `shape`.
  absl::StatusOr<int> AddIntermediate(const std::string& name, Shape shape, DataType dtype, Layout layout);
  // A new tensor viewing `source`'s storage, registered as graph tensor `name` (in `layout`: a Transpose between
  // NHWC and NCHW order is a view of the same bytes).
  absl::StatusOr<int> AddAlias(const std::string& name, int source);
  absl::StatusOr<int> AddAlias(const std::string& name, int source, Layout layout);
  // The graph constant feeding input `index` of `node`, or an error naming both.
  absl::StatusOr<const Tensor*> Constant(const Node& node, size_t index) const;
  // Copies values into plan-owned device memory as `dtype`; rank-4 NCHW data is permuted to NHWC when asked.
  absl::StatusOr<const void*> Upload(const Tensor& value, DataType dtype, Layout layout);
  absl::StatusOr<const void*> UploadFloats(const std::vector<float>& values);
  // Copies raw bytes (INT8 filters, INT32 biases) into plan-owned device memory.
  absl::StatusOr<const void*> UploadBytes(const void* data, size_t bytes);

  // ---- INT8 steps of QDQ models (quantized_conv_folding.h) ------------------------------------------------------
  // The convolutions that run INT8 in this plan (the analysis less those no algorithm implements).
  const QuantizedConvAnalysis& quantized() const { return quantized_; }
  // The 8-bit NHWC plan tensor holding graph tensor `name` (a QDQ node's output), or an error.
  absl::StatusOr<int> QuantizedValue(const std::string& name) const;
  bool HasQuantizedValue(const std::string& name) const { return quantized_values_.count(name) > 0; }
  // A new 8-bit NHWC step output for graph tensor `name`.
  absl::StatusOr<int> AddQuantizedOutput(const std::string& name, DataType dtype);
  // Registers `source`'s 8-bit plan tensor as graph tensor `name`'s too (the same bytes: QuantizedViewFold).
  absl::Status AliasQuantizedValue(const std::string& name, const std::string& source);
  // Quantizes the FP32 value of graph tensor `source` into an 8-bit NHWC tensor registered as graph tensor `name`.
  absl::Status Quantize(const std::string& source, const std::string& name, DataType dtype, float scale,
                        int zero_point);
  // Dequantizes the 8-bit value of graph tensor `name` into its FP32 value (in the plan's layout).
  absl::Status Dequantize(const std::string& name, float scale, int zero_point);

  ImageDims Dims(int id, int batch_size) const;

  // Adds a kernel step: for each batch size, problem_for(b) is selected an algorithm (and its filter packed from
  // raw_filter, if the algorithm wants one).
  template <typename Op>
  absl::Status AddKernelStep(const std::string& name, std::vector<int> inputs, std::vector<int> outputs,
                             const std::function<typename Op::Problem(int)>& problem_for,
                             typename KernelStep<Op>::Binder bind, const void* raw_filter = nullptr);

  absl::Status NodeError(const Node& node, const std::string& what) const;

  // Makes conv output `y` a view of `residual`'s storage (the step just added reads input `x`, adds `residual`, graph
  // tensor `residual_name`, and writes `y`) when the step's algorithm at every batch size AccumulatesOntoOutput
  // (kernels/registry/residual_in_output.h) and
  // the overwrite is safe: the residual's storage (its root) is a step's output in the arena, of y's shape, dtype
  // and layout, not the conv's input, and no later node and no graph output reads any graph tensor that lies in it
  // (the residual, `residual_name`, and its views). Otherwise leaves the plan as it is (the algorithm then copies).
  // Returns whether it did.
  // `fused_reader`: a later node whose computation this step has taken over (a fused add), whose reads do not count.
  bool PlaceOutputOverResidual(const Node& node, const std::string& residual_name, int x, int residual, int y,
                               const std::string& fused_reader = "");

 private:
  absl::Status AddGraphInputs();
  absl::Status ChooseQuantizedConvs();
  absl::Status ChooseSqueezeExcitations();
  absl::Status AddPreprocessedInput(const GraphInput& input, const PreprocessProblem& configured);
  absl::Status PlanNode(const Node& node);
  absl::Status BindGraphOutputs();
  absl::Status PlanMemory();
  template <typename Op>
  absl::Status SelectForBatch(KernelStep<Op>& step, int batch_size, typename Op::Problem problem,
                              const void* raw_filter, std::map<std::string, const void*>& packed);
  bool Tuned(int batch_size) const;
  int Root(int id) const;

  const Graph& graph_;
  PlannerOptions options_;
  std::unique_ptr<ExecutionPlan> plan_;
  std::map<std::string, int> values_;                               // graph tensor -> plan tensor
  std::map<std::tuple<int, DataType, Layout, int>, int> conversions_;  // (source, dtype, layout, channels) -> tensor
  std::vector<int> producer_;                                       // plan tensor -> step index (-1: graph input)
  QuantizedConvAnalysis quantized_;                                 // the folds this plan runs INT8
  std::map<std::string, int> quantized_values_;                     // graph tensor -> its 8-bit plan tensor
  std::map<std::string, SqueezeExcitationBranch> squeeze_excitations_;  // pool node -> the branch run as one step
  std::set<std::string> fused_nodes_;  // the other nodes of those branches: planned with their pool node
};

// One mapping per graph op (planner_ops.cc).
absl::Status PlanConv2d(PlanBuilder& b, const Node& node);
absl::Status PlanPool2d(PlanBuilder& b, const Node& node);
absl::Status PlanBatchNorm(PlanBuilder& b, const Node& node);
absl::Status PlanActivation(PlanBuilder& b, const Node& node);
absl::Status PlanBinary(PlanBuilder& b, const Node& node);
absl::Status PlanConcat(PlanBuilder& b, const Node& node);
absl::Status PlanSplit(PlanBuilder& b, const Node& node);
absl::Status PlanChannelShuffle(PlanBuilder& b, const Node& node);
absl::Status PlanSoftmax(PlanBuilder& b, const Node& node);
absl::Status PlanGemm(PlanBuilder& b, const Node& node);
absl::Status PlanPad(PlanBuilder& b, const Node& node);
absl::Status PlanTranspose(PlanBuilder& b, const Node& node);
absl::Status PlanResize(PlanBuilder& b, const Node& node);
absl::Status PlanArgMax(PlanBuilder& b, const Node& node);
absl::Status PlanLayerNorm(PlanBuilder& b, const Node& node);
absl::Status PlanConvTranspose2d(PlanBuilder& b, const Node& node);
absl::Status PlanUnary(PlanBuilder& b, const Node& node);
absl::Status PlanAlias(PlanBuilder& b, const Node& node);
// A folded convolution's INT8 step (also a folded pool or Gemm), a folded add's, an 8-bit view, and a QDQ node
// between INT8 steps and FP32 ops (planner_quantized.cc).
absl::Status PlanQuantizedConv2d(PlanBuilder& b, const Node& node, const QuantizedConvFold& fold);
absl::Status PlanQuantizedAdd(PlanBuilder& b, const Node& node, const QuantizedAddFold& fold);
absl::Status PlanQuantizeDequantize(PlanBuilder& b, const Node& node);
absl::Status PlanQuantizedView(PlanBuilder& b, const QuantizedViewFold& view);
absl::Status PlanQuantizedMaxPool(PlanBuilder& b, const Node& node, const QuantizedMaxPoolFold& fold);
// A pool node's kernel problem for an input of dims `d` (planner_ops.cc).
Pool2dProblem Pool2dProblemFor(const Pool2dAttrs& a, const ImageDims& d, DataType dtype, Layout layout);
// A squeeze-and-excitation branch as one step (squeeze_excitation_fusion.h), planned at its pool node; and its
// problem for x's dims [N,C,H,W] (planner_ops.cc).
absl::Status PlanSqueezeExcitation(PlanBuilder& b, const SqueezeExcitationBranch& branch);
SqueezeExcitationProblem SqueezeExcitationProblemFor(const SqueezeExcitationBranch& branch, const Shape& dims,
                                                     DataType dtype, Layout layout);

// ---- template definitions ----------------------------------------------------------------------------------------

template <typename Op>
Layout PlanBuilder::BlockedLayoutIfImplemented(typename Op::Problem probe,
                                               std::initializer_list<int> channel_counts) const {
  if (options_.layout != Layout::kNCHW8c) return layout();
  for (int c : channel_counts) {
    if (c % kLayoutChannelBlock != 0) return layout();
  }
  probe.layout = Layout::kNCHW8c;
  const bool implemented = OpRegistry<Op>::Global().Heuristic(probe, options_.device->backend()).ok();
  return implemented ? Layout::kNCHW8c : layout();
}

template <typename Op>
absl::Status PlanBuilder::SelectForBatch(KernelStep<Op>& step, int batch_size, typename Op::Problem problem,
                                         const void* raw_filter, std::map<std::string, const void*>& packed) {
  AlgorithmCache& cache = options_.cache != nullptr ? *options_.cache : AlgorithmCache::Global();
  const AlgorithmSelection selection = Tuned(batch_size) ? options_.selection : AlgorithmSelection::kHeuristic;
  auto selected = SelectAlgorithm<Op>(problem, *options_.device, cache, selection, options_.tuning);
  if (!selected.ok()) {
    return absl::Status(selected.status().code(), absl::StrCat("step '", step.name(), "' at batch size ", batch_size,
                                                               ": ", selected.status().message()));
  }
  for (const VerificationRecord& rejected : selected->rejected) {
    if (options_.log) {
      options_.log(absl::StrCat("step '", step.name(), "' batch ", batch_size, ": ",
                                DescribeRejection(rejected, problem.ToString())));
    }
  }
  typename KernelStep<Op>::Variant v{problem,
                                     selected->algorithm,
                                     selected->workspace_bytes,
                                     nullptr,
                                     nullptr,
                                     selected->tuned ? selected->time_ms : 0.0,
                                     selected->algorithm->LaunchSummary(problem),
                                     selected->verified};
  // Plan-time state (a oneDNN primitive) is made here, once per step and batch size, and owned by the plan.
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state,
                          v.algorithm->Prepare(problem, options_.device->context()));
  if (state != nullptr) {
    v.state = state.get();
    plan_->algorithm_states_.push_back(std::move(state));
  }
  const size_t packed_bytes = v.algorithm->PackedFilterBytes(problem);
  if (packed_bytes > 0) {
    // One packed filter per algorithm and packed layout: the layout usually depends on the filter's shape alone, but
    // oneDNN's choice can change with the batch (Algorithm::PackedFilterLayout), and a batch size must never read a
    // filter packed for another layout (it reads wrong weights, and past the end of a smaller one).
    auto [it, inserted] = packed.emplace(
        absl::StrCat(v.algorithm->name(), "|", v.algorithm->PackedFilterLayout(problem)), nullptr);
    if (inserted) {
      CONVOY_ASSIGN_OR_RETURN(DeviceAllocation allocation, options_.device->Allocate(packed_bytes));
      CONVOY_RETURN_IF_ERROR(v.algorithm->PackFilter(problem, raw_filter, allocation.data(),
                                                     options_.device->context()));
      it->second = allocation.data();
      plan_->weight_bytes_ += packed_bytes;
      plan_->weights_.push_back(std::move(allocation));
    }
    v.packed_filter = it->second;
  }
  if (selection == AlgorithmSelection::kTune && options_.log) {
    // Untimed choices say why: nothing to choose between (e.g. a blocked convolution, oneDNN's alone), or the
    // heuristic (an op the autotuner does not time).
    const bool only_candidate = OpRegistry<Op>::Global().Candidates(problem, options_.device->backend()).size() == 1;
    const std::string how = selected->tuned ? absl::StrCat(" ", selected->time_ms, " ms")
                            : only_candidate ? " (the only candidate)"
                                             : " (heuristic)";
    options_.log(absl::StrCat("tune ", step.name(), " batch ", batch_size, ": ", v.algorithm->name(), how,
                              selected->from_cache ? " [cache]" : ""));
  }
  step.variants().push_back(std::move(v));
  return absl::OkStatus();
}

template <typename Op>
absl::Status PlanBuilder::AddKernelStep(const std::string& name, std::vector<int> inputs, std::vector<int> outputs,
                                        const std::function<typename Op::Problem(int)>& problem_for,
                                        typename KernelStep<Op>::Binder bind, const void* raw_filter) {
  auto step = std::make_unique<KernelStep<Op>>(name, inputs, outputs, std::move(bind));
  std::map<std::string, const void*> packed;
  for (int b = 1; b <= max_batch_size(); ++b) {
    CONVOY_RETURN_IF_ERROR(SelectForBatch<Op>(*step, b, problem_for(b), raw_filter, packed));
  }
  const int index = static_cast<int>(plan_->steps_.size());
  // A tensor written by several steps (a batched MatMul's matrices, one step each) is live from the first.
  for (int out : step->outputs()) {
    if (producer_[out] < 0) producer_[out] = index;
  }
  plan_->steps_.push_back(std::move(step));
  return absl::OkStatus();
}

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_PLANNER_INTERNAL_H_
