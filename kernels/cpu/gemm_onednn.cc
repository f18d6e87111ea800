// CPU GEMM on oneDNN's matmul primitive; see gemm_onednn.h.
#include "kernels/cpu/gemm_onednn.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnMatmulDescriptor {
  dnnl::matmul::primitive_desc pd;
  onednn::PostOps post_ops;
  memory::desc a, user_b, bias, y;
  memory::dims channel_dims;
  std::string impl;
};

namespace {

absl::StatusOr<std::shared_ptr<const OnednnMatmulDescriptor>> MakeDescriptor(const GemmProblem& p) {
  auto d = std::make_shared<OnednnMatmulDescriptor>();
  CONVOY_ASSIGN_OR_RETURN(const memory::data_type type, onednn::DataTypeOf(p.dtype));
  const memory::dim m = p.m, n = p.n, k = p.k;
  d->a = memory::desc({m, k}, type, memory::format_tag::ab);
  d->user_b = memory::desc({k, n}, type, memory::format_tag::ba);  // B[n, k] row-major is B^T[k, n] column-major
  d->y = memory::desc({m, n}, type, memory::format_tag::ab);
  d->channel_dims = {1, n};
  CONVOY_ASSIGN_OR_RETURN(d->post_ops, onednn::MakePostOps(p.epilogue, d->y, d->channel_dims));
  try {
    if (d->post_ops.conv_bias) d->bias = memory::desc({1, n}, memory::data_type::f32, memory::format_tag::ab);
    const memory::desc b_any({k, n}, type, memory::format_tag::any);
    dnnl::matmul::desc desc(d->a, b_any, d->bias, d->y);
    d->pd = dnnl::matmul::primitive_desc(desc, onednn::MakeAttr(d->post_ops.ops), onednn::Engine(),
                                         /*allow_empty=*/true);
    if (!d->pd) return absl::UnimplementedError(absl::StrCat("oneDNN has no matmul for ", p.ToString()));
    d->impl = d->pd.impl_info_str();
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  return std::shared_ptr<const OnednnMatmulDescriptor>(std::move(d));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const OnednnMatmulDescriptor>> GemmOnednnMatmul::Describe(
    const GemmProblem& problem) const {
  return descriptors_.Get(problem, MakeDescriptor);
}

absl::Status GemmOnednnMatmul::CanImplement(const GemmProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  CONVOY_RETURN_IF_ERROR(onednn::DataTypeOf(problem.dtype).status());
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::RejectReferenceImplementation(d->impl, name());
}

size_t GemmOnednnMatmul::WorkspaceBytes(const GemmProblem& problem) const {
  auto d = Describe(problem);
  return d.ok() ? (*d)->pd.scratchpad_desc().get_size() : 0;
}

size_t GemmOnednnMatmul::PackedFilterBytes(const GemmProblem& problem) const {
  auto d = Describe(problem);
  return d.ok() ? (*d)->pd.weights_desc().get_size() : 0;
}

std::string GemmOnednnMatmul::PackedFilterLayout(const GemmProblem& problem) const {
  auto d = Describe(problem);
  return d.ok() ? onednn::LayoutString((*d)->pd.weights_desc()) : "";
}

absl::Status GemmOnednnMatmul::PackFilter(const GemmProblem& problem, const void* filter, void* packed,
                                          const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::Reorder(d->user_b, filter, d->pd.weights_desc(), packed, context);
}

absl::StatusOr<std::unique_ptr<AlgorithmState>> GemmOnednnMatmul::Prepare(const GemmProblem& problem,
                                                                          const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::MakePrimitiveState<dnnl::matmul>(d->pd, d->impl, context);
}

absl::Status GemmOnednnMatmul::Run(const GemmProblem& problem, const GemmArgs& args, Workspace workspace,
                                   const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(const onednn::PrimitiveState* state, onednn::PreparedState(workspace, name()));
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  try {
    std::unordered_map<int, memory> run_args = {{DNNL_ARG_SRC, onednn::Wrap(d->a, args.a)},
                                                {DNNL_ARG_WEIGHTS, onednn::Wrap(d->pd.weights_desc(), args.b)},
                                                {DNNL_ARG_DST, onednn::Wrap(d->y, args.y)}};
    if (d->post_ops.conv_bias) run_args.emplace(DNNL_ARG_BIAS, onednn::Wrap(d->bias, args.bias));
    onednn::AddPostOpArgs(d->post_ops, {args.scale, args.bias, args.residual}, d->y, d->channel_dims, run_args);
    return onednn::Execute(*state, run_args, workspace, d->pd.scratchpad_desc().get_size(), context);
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, problem.ToString());
  }
}

CONVOY_REGISTER_ALGORITHM(GemmOp, GemmOnednnMatmul);

std::string GemmOnednnMatmul::LaunchSummary(const GemmProblem& problem) const {
  return onednn::ImplementationSummary(Describe(problem));
}

}  // namespace convoy::cpu
