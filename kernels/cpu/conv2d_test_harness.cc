// Test support for the CPU conv2d and GEMM algorithms; see conv2d_test_harness.h.
#include "kernels/cpu/conv2d_test_harness.h"

#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::cpu::testing {
namespace {

using ::convoy::testing::CompareFloats;
using ::convoy::testing::PoisonWithNaN;
using ::convoy::testing::RandomBuffer;
using ::convoy::testing::ToFloats;

// Random operands shared by the conv and GEMM checks.
struct Operands {
  HostBuffer x, w, bias, scale, residual, y, y_reference, packed, workspace;
  std::unique_ptr<AlgorithmState> state;
};

absl::StatusOr<Operands> MakeOperands(DataType dtype, int64_t x_count, int64_t w_count, int channels,
                                      int64_t y_count, uint32_t seed) {
  Operands o;
  CONVOY_ASSIGN_OR_RETURN(o.x, RandomBuffer(dtype, x_count, seed));
  CONVOY_ASSIGN_OR_RETURN(o.w, RandomBuffer(dtype, w_count, seed + 1));
  CONVOY_ASSIGN_OR_RETURN(o.bias, RandomBuffer(DataType::kFloat32, channels, seed + 2));
  CONVOY_ASSIGN_OR_RETURN(o.scale, RandomBuffer(DataType::kFloat32, channels, seed + 3, 0.5f, 1.5f));
  CONVOY_ASSIGN_OR_RETURN(o.residual, RandomBuffer(dtype, y_count, seed + 4));
  CONVOY_ASSIGN_OR_RETURN(o.y, HostBuffer::Allocate(static_cast<size_t>(y_count) * DataTypeSize(dtype)));
  CONVOY_ASSIGN_OR_RETURN(o.y_reference, HostBuffer::Allocate(static_cast<size_t>(y_count) * DataTypeSize(dtype)));
  PoisonWithNaN(o.y.data(), dtype, y_count);
  PoisonWithNaN(o.y_reference.data(), dtype, y_count);
  return o;
}

// Packs the filter when the algorithm wants it, sizes the workspace and prepares the algorithm's state; returns the
// filter pointer to pass.
template <typename AlgorithmT, typename ProblemT>
absl::StatusOr<const void*> PrepareAlgorithm(const AlgorithmT& algorithm, const ProblemT& problem, Operands& o,
                                             const ExecutionContext& context) {
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(problem));
  CONVOY_ASSIGN_OR_RETURN(o.workspace, HostBuffer::Allocate(algorithm.WorkspaceBytes(problem)));
  CONVOY_ASSIGN_OR_RETURN(o.state, algorithm.Prepare(problem, context));
  const size_t packed_bytes = algorithm.PackedFilterBytes(problem);
  if (packed_bytes == 0) return static_cast<const void*>(o.w.data());
  CONVOY_ASSIGN_OR_RETURN(o.packed, HostBuffer::Allocate(packed_bytes));
  CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(problem, o.w.data(), o.packed.data(), context));
  return static_cast<const void*>(o.packed.data());
}

absl::Status Annotate(const absl::Status& status, absl::string_view algorithm, const std::string& problem) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat(algorithm, " on ", problem, ": ", status.message()));
}

}  // namespace

absl::Status CheckConv2dAgainstReference(const Conv2dAlgorithm& algorithm, const Conv2dProblem& p,
                                         const convoy::testing::Tolerance& tolerance, uint32_t seed, int threads,
                                         ResidualPlacement placement) {
  ThreadPool pool(threads);
  ExecutionContext context{Backend::kCpu, &pool};
  const int64_t y_count = p.output_desc().num_elements();
  CONVOY_ASSIGN_OR_RETURN(Operands o,
                          MakeOperands(p.dtype, p.input_desc().num_elements(), p.filter_elements(), p.k, y_count, seed));
  auto filter = PrepareAlgorithm(algorithm, p, o, context);
  if (!filter.ok()) return Annotate(filter.status(), algorithm.name(), p.ToString());
  Conv2dArgs args{o.x.data(), *filter, o.bias.as<float>(), o.scale.as<float>(), o.residual.data(), o.y.data()};
  if (placement == ResidualPlacement::kInOutput && p.epilogue.residual != ResidualMode::kNone) {
    std::memcpy(o.y.data(), o.residual.data(), o.y.size());
    args.residual = o.y.data();
  }
  const Workspace workspace{o.workspace.data(), o.workspace.size(), o.state.get()};
  CONVOY_RETURN_IF_ERROR(Annotate(algorithm.Run(p, args, workspace, context), algorithm.name(), p.ToString()));
  args.w = o.w.data();
  args.residual = o.residual.data();
  args.y = o.y_reference.data();
  CONVOY_RETURN_IF_ERROR(reference::Conv2d(p, args));
  return Annotate(CompareFloats(ToFloats(o.y.data(), p.dtype, y_count), ToFloats(o.y_reference.data(), p.dtype, y_count),
                                tolerance),
                  algorithm.name(), p.ToString());
}

absl::Status CheckGemmAgainstReference(const GemmAlgorithm& algorithm, const GemmProblem& p,
                                       const convoy::testing::Tolerance& tolerance, uint32_t seed, int threads) {
  ThreadPool pool(threads);
  ExecutionContext context{Backend::kCpu, &pool};
  const int64_t y_count = int64_t{p.m} * p.n;
  CONVOY_ASSIGN_OR_RETURN(Operands o, MakeOperands(p.dtype, int64_t{p.m} * p.k, int64_t{p.n} * p.k, p.n, y_count, seed));
  auto filter = PrepareAlgorithm(algorithm, p, o, context);
  if (!filter.ok()) return Annotate(filter.status(), algorithm.name(), p.ToString());
  GemmArgs args{o.x.data(), *filter, o.bias.as<float>(), o.scale.as<float>(), o.residual.data(), o.y.data()};
  const Workspace workspace{o.workspace.data(), o.workspace.size(), o.state.get()};
  CONVOY_RETURN_IF_ERROR(Annotate(algorithm.Run(p, args, workspace, context), algorithm.name(), p.ToString()));
  args.b = o.w.data();
  args.y = o.y_reference.data();
  CONVOY_RETURN_IF_ERROR(reference::Gemm(p, args));
  return Annotate(CompareFloats(ToFloats(o.y.data(), p.dtype, y_count), ToFloats(o.y_reference.data(), p.dtype, y_count),
                                tolerance),
                  algorithm.name(), p.ToString());
}

Conv2dProblem Conv(int n, int c, int h, int w, int k, int r, int s, int stride, int pad, int dilation, int groups,
                   Layout layout) {
  Conv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = s;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.dilation_h = p.dilation_w = dilation;
  p.groups = groups;
  p.layout = layout;
  return p;
}

std::vector<Epilogue> EpiloguesToTest() {
  std::vector<Epilogue> out(5);
  out[1].has_bias = true;
  out[1].activation = Activation::Relu();
  out[2].has_scale = out[2].has_bias = true;
  out[2].residual = ResidualMode::kBeforeActivation;
  out[2].activation = Activation::Relu();
  out[3].has_bias = true;
  out[3].residual = ResidualMode::kAfterActivation;
  out[3].activation = Activation::Relu6();
  out[4].has_scale = true;
  out[4].activation = Activation::Of(ActivationKind::kSilu);
  return out;
}

std::vector<absl::Status> CheckEveryEpilogue(const Conv2dAlgorithm& algorithm, std::vector<Conv2dProblem> problems,
                                             const convoy::testing::Tolerance& tolerance, uint32_t seed) {
  std::vector<absl::Status> statuses;
  for (Conv2dProblem& p : problems) {
    for (const Epilogue& e : EpiloguesToTest()) {
      p.epilogue = e;
      statuses.push_back(CheckConv2dAgainstReference(algorithm, p, tolerance, seed++));
    }
  }
  return statuses;
}

}  // namespace convoy::cpu::testing
