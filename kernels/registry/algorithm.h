// The kernel contract. Every algorithm of every op, on every backend, is an Algorithm<Problem, Args>:
//
//   CanImplement(problem)        OK, or UNIMPLEMENTED with the reason (never crashes on any valid problem);
//   WorkspaceBytes(problem)      scratch it needs per Run (the caller owns and passes it);
//   PackedFilterBytes / PackFilter   optional one-time weight transform done at plan time (Winograd, tiled layouts);
//   PackedFilterLayout          which packed layout that is, where it can differ between batch sizes (oneDNN);
//   Prepare(problem, context)    optional plan-time state (a oneDNN primitive with its JIT code), made once per
//                                 problem, owned by the caller and handed back to Run in Workspace::state;
//   Run(problem, args, workspace, context)   runs on the context's stream (CUDA) or thread pool (CPU). It never
//                                 allocates and never synchronizes a CUDA stream; errors come back as absl::Status.
//   HeuristicScore / EstimatedMicroseconds / LaunchSummary   what the heuristic default and `convoy inspect` use.
//
// Ops are named by traits structs (Conv2dOp, Pool2dOp, ...) that tie a problem type to its argument bundle, so the
// registry, the algorithm cache and the autotuner are written once for all ops.
#ifndef CONVOY_KERNELS_REGISTRY_ALGORITHM_H_
#define CONVOY_KERNELS_REGISTRY_ALGORITHM_H_

#include <cstddef>
#include <memory>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "kernels/common/problems.h"
#include "kernels/common/thread_pool.h"

namespace convoy {

enum class Backend : uint8_t { kCpu = 0, kCuda = 1 };
absl::string_view BackendName(Backend backend);

// Where a kernel runs. CPU kernels use `thread_pool` (never null for CPU); CUDA kernels launch on `cuda_stream`
// (a cudaStream_t; null means the legacy default stream).
struct ExecutionContext {
  Backend backend = Backend::kCpu;
  ThreadPool* thread_pool = nullptr;
  void* cuda_stream = nullptr;
  int cuda_device = 0;
};

// What an algorithm made once at plan time for one problem (Algorithm::Prepare), e.g. a oneDNN primitive. The caller
// (the plan, the autotuner, a test) owns it and passes it back to every Run of that problem; Run only reads it, so
// concurrent Runs of one plan share it.
class AlgorithmState {
 public:
  virtual ~AlgorithmState() = default;
};

// Scratch memory handed to Run (device memory for CUDA, host memory for CPU), and the algorithm's prepared state.
struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
  const AlgorithmState* state = nullptr;  // what Prepare returned for this problem (null when it returned none)
};

template <typename ProblemT, typename ArgsT>
class Algorithm {
 public:
  using Problem = ProblemT;
  using Args = ArgsT;
  virtual ~Algorithm() = default;

  // Stable, unique within (op, backend): it is what the algorithm cache stores. E.g. "cpu.conv2d.winograd_f4x4".
  virtual absl::string_view name() const = 0;
  virtual Backend backend() const = 0;
  virtual absl::Status CanImplement(const Problem& problem) const = 0;
  virtual size_t WorkspaceBytes(const Problem& problem) const { return 0; }
  // Bytes of the pre-transformed filter this algorithm wants in Args::w (Conv2d) / Args::b (Gemm); 0 = raw filter.
  virtual size_t PackedFilterBytes(const Problem& problem) const { return 0; }
  virtual absl::Status PackFilter(const Problem& problem, const void* filter, void* packed,
                                  const ExecutionContext& context) const {
    return absl::UnimplementedError(std::string(name()) + " has no packed filter");
  }
  // Which packed layout PackFilter writes for `problem`. Two problems of one filter (a plan step's batch sizes) may
  // share one packed filter only when the algorithm and this string are the same. "" (the default): the packed filter
  // depends on the filter's shape alone, not on the batch. oneDNN's algorithms name the weights layout the primitive
  // chose, which can change with the batch: its brgconv kernels pick their output-channel block from the work per
  // thread (a 1x1 960->320 convolution on 2x2 pixels, 2 threads: Acdb32a at batch 1, Acdb48a from batch 2 on).
  virtual std::string PackedFilterLayout(const Problem& problem) const { return ""; }
  // Plan-time state for `problem` on `context` (null: the algorithm needs none, the default). Made once per problem by
  // whoever runs it (the planner per plan step and batch size, the autotuner per candidate) and kept as long as Run
  // may be called; Run gets it back in Workspace::state and fails with FAILED_PRECONDITION when it is missing.
  virtual absl::StatusOr<std::unique_ptr<AlgorithmState>> Prepare(const Problem& problem,
                                                                  const ExecutionContext& context) const {
    return std::unique_ptr<AlgorithmState>();
  }
  virtual absl::Status Run(const Problem& problem, const Args& args, Workspace workspace,
                           const ExecutionContext& context) const = 0;
  // Cheap shape predicate for heuristic selection: higher wins among the algorithms that CanImplement the problem.
  virtual int HeuristicScore(const Problem& problem) const { return 0; }
  // The algorithm's own estimate of its run time on the current device (e.g. from a launch-cost model), 0 when it
  // has none. Among candidates with the same HeuristicScore the heuristic takes the lowest positive estimate.
  virtual double EstimatedMicroseconds(const Problem& problem) const { return 0; }
  // One line on how it would run the problem (tiles, blocks, waves, split factor, estimate), for `convoy inspect`;
  // empty when there is nothing to say.
  virtual std::string LaunchSummary(const Problem& problem) const { return ""; }
  // True for the plain algorithm whose output on a device is the trusted result other algorithms are verified
  // against there (verification.h): one per op and backend, implementing every problem of its dtypes.
  virtual bool TrustedForVerification() const { return false; }
};

template <typename ProblemT, typename ArgsT>
struct OpTraits {
  using Problem = ProblemT;
  using Args = ArgsT;
  using AlgorithmType = Algorithm<ProblemT, ArgsT>;
  static constexpr OpKind kKind = ProblemT::kKind;
};

using Conv2dOp = OpTraits<Conv2dProblem, Conv2dArgs>;
using Pool2dOp = OpTraits<Pool2dProblem, Pool2dArgs>;
using GemmOp = OpTraits<GemmProblem, GemmArgs>;
using BatchNormOp = OpTraits<BatchNormProblem, BatchNormArgs>;
using ActivationOp = OpTraits<ActivationProblem, ActivationArgs>;
using BinaryElementwiseOp = OpTraits<BinaryProblem, BinaryArgs>;
using ConcatOp = OpTraits<ConcatProblem, ConcatArgs>;
using SplitOp = OpTraits<SplitProblem, SplitArgs>;
using ChannelShuffleOp = OpTraits<ChannelShuffleProblem, ChannelShuffleArgs>;
using SoftmaxOp = OpTraits<SoftmaxProblem, SoftmaxArgs>;
using PadOp = OpTraits<PadProblem, PadArgs>;
using ConvertOp = OpTraits<ConvertProblem, ConvertArgs>;
using PreprocessOp = OpTraits<PreprocessProblem, PreprocessArgs>;
using TransposeOp = OpTraits<TransposeProblem, TransposeArgs>;
using ResizeOp = OpTraits<ResizeProblem, ResizeArgs>;
using ArgMaxOp = OpTraits<ArgMaxProblem, ArgMaxArgs>;
using LayerNormOp = OpTraits<LayerNormProblem, LayerNormArgs>;
using ConvTranspose2dOp = OpTraits<ConvTranspose2dProblem, ConvTranspose2dArgs>;
using UnaryOp = OpTraits<UnaryProblem, UnaryArgs>;
// INT8 convolution: CPU (oneDNN) only so far, and not yet planned; not in ForEachOp until a CUDA algorithm exists.
using QuantizedConv2dOp = OpTraits<QuantizedConv2dProblem, QuantizedConv2dArgs>;
// INT8 residual add of QDQ plans: CPU only so far, like QuantizedConv2dOp.
using QuantizedAddOp = OpTraits<QuantizedAddProblem, QuantizedAddArgs>;
// A whole squeeze-and-excitation branch in one step: CPU only so far; the planner fuses the branch where the device
// has an algorithm for it and maps its nodes one by one elsewhere. Not in ForEachOp until a CUDA algorithm exists.
using SqueezeExcitationOp = OpTraits<SqueezeExcitationProblem, SqueezeExcitationArgs>;

using Conv2dAlgorithm = Conv2dOp::AlgorithmType;
using Pool2dAlgorithm = Pool2dOp::AlgorithmType;
using GemmAlgorithm = GemmOp::AlgorithmType;
using BatchNormAlgorithm = BatchNormOp::AlgorithmType;
using ActivationAlgorithm = ActivationOp::AlgorithmType;
using BinaryAlgorithm = BinaryElementwiseOp::AlgorithmType;
using ConcatAlgorithm = ConcatOp::AlgorithmType;
using SplitAlgorithm = SplitOp::AlgorithmType;
using ChannelShuffleAlgorithm = ChannelShuffleOp::AlgorithmType;
using SoftmaxAlgorithm = SoftmaxOp::AlgorithmType;
using PadAlgorithm = PadOp::AlgorithmType;
using ConvertAlgorithm = ConvertOp::AlgorithmType;
using PreprocessAlgorithm = PreprocessOp::AlgorithmType;
using TransposeAlgorithm = TransposeOp::AlgorithmType;
using ResizeAlgorithm = ResizeOp::AlgorithmType;
using ArgMaxAlgorithm = ArgMaxOp::AlgorithmType;
using LayerNormAlgorithm = LayerNormOp::AlgorithmType;
using ConvTranspose2dAlgorithm = ConvTranspose2dOp::AlgorithmType;
using UnaryAlgorithm = UnaryOp::AlgorithmType;
using QuantizedConv2dAlgorithm = QuantizedConv2dOp::AlgorithmType;
using QuantizedAddAlgorithm = QuantizedAddOp::AlgorithmType;
using SqueezeExcitationAlgorithm = SqueezeExcitationOp::AlgorithmType;

// Names one op for ForEachOp's visitor: `using Op = typename decltype(tag)::type;`.
template <typename Op>
struct OpTag {
  using type = Op;
};

// Calls visit(OpTag<Op>{}) for every op of the library: the one list that code going over all ops (the tests over
// every op, `convoy algorithms`, the GPU check) iterates, so a new op is added here once.
template <typename Visitor>
void ForEachOp(Visitor&& visit) {
  visit(OpTag<Conv2dOp>{});
  visit(OpTag<GemmOp>{});
  visit(OpTag<Pool2dOp>{});
  visit(OpTag<BatchNormOp>{});
  visit(OpTag<ActivationOp>{});
  visit(OpTag<BinaryElementwiseOp>{});
  visit(OpTag<ConcatOp>{});
  visit(OpTag<SplitOp>{});
  visit(OpTag<ChannelShuffleOp>{});
  visit(OpTag<SoftmaxOp>{});
  visit(OpTag<PadOp>{});
  visit(OpTag<ConvertOp>{});
  visit(OpTag<PreprocessOp>{});
  visit(OpTag<TransposeOp>{});
  visit(OpTag<ResizeOp>{});
  visit(OpTag<ArgMaxOp>{});
  visit(OpTag<LayerNormOp>{});
  visit(OpTag<ConvTranspose2dOp>{});
  visit(OpTag<UnaryOp>{});
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_ALGORITHM_H_
