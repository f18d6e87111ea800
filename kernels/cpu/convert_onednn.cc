// CPU layout and dtype conversion on oneDNN's reorder primitive; see convert_onednn.h.
#include "kernels/cpu/convert_onednn.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnReorderDescriptor {
  dnnl::reorder::primitive_desc pd;
  memory::desc src, dst;
  std::string impl;
};

namespace {

absl::StatusOr<std::shared_ptr<const OnednnReorderDescriptor>> MakeDescriptor(const ConvertProblem& p) {
  auto d = std::make_shared<OnednnReorderDescriptor>();
  CONVOY_ASSIGN_OR_RETURN(d->src, onednn::ActivationDesc(p.src_dtype, p.n, p.c, p.h, p.w, p.src_layout));
  CONVOY_ASSIGN_OR_RETURN(d->dst, onednn::ActivationDesc(p.dst_dtype, p.n, p.c, p.h, p.w, p.dst_layout));
  try {
    d->pd = dnnl::reorder::primitive_desc(onednn::Engine(), d->src, onednn::Engine(), d->dst,
                                          onednn::MakeAttr(dnnl::post_ops()), /*allow_empty=*/true);
    if (!d->pd) return absl::UnimplementedError(absl::StrCat("oneDNN has no reorder for ", p.ToString()));
    d->impl = d->pd.impl_info_str();
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  return std::shared_ptr<const OnednnReorderDescriptor>(std::move(d));
}

bool Blocked(const ConvertProblem& p) {
  return p.src_layout == Layout::kNCHW8c || p.dst_layout == Layout::kNCHW8c;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const OnednnReorderDescriptor>> ConvertOnednnReorder::Describe(
    const ConvertProblem& problem) const {
  return descriptors_.Get(problem, MakeDescriptor);
}

absl::Status ConvertOnednnReorder::CanImplement(const ConvertProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.output_c() != problem.c) {
    return absl::UnimplementedError("channel padding (dst_c) is done by the CUDA kernels only");
  }
  CONVOY_RETURN_IF_ERROR(onednn::DataTypeOf(problem.src_dtype).status());
  CONVOY_RETURN_IF_ERROR(onednn::DataTypeOf(problem.dst_dtype).status());
  return Describe(problem).status();
}

size_t ConvertOnednnReorder::WorkspaceBytes(const ConvertProblem& problem) const {
  auto d = Describe(problem);
  return d.ok() ? (*d)->pd.scratchpad_desc().get_size() : 0;
}

int ConvertOnednnReorder::HeuristicScore(const ConvertProblem& problem) const { return Blocked(problem) ? 20 : 0; }

absl::StatusOr<std::unique_ptr<AlgorithmState>> ConvertOnednnReorder::Prepare(const ConvertProblem& problem,
                                                                              const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::MakePrimitiveState<dnnl::reorder>(d->pd, d->impl, context);
}

absl::Status ConvertOnednnReorder::Run(const ConvertProblem& problem, const ConvertArgs& args, Workspace workspace,
                                       const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(const onednn::PrimitiveState* state, onednn::PreparedState(workspace, name()));
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  try {
    std::unordered_map<int, memory> run_args = {{DNNL_ARG_FROM, onednn::Wrap(d->src, args.x)},
                                                {DNNL_ARG_TO, onednn::Wrap(d->dst, args.y)}};
    return onednn::Execute(*state, run_args, workspace, d->pd.scratchpad_desc().get_size(), context);
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, problem.ToString());
  }
}

CONVOY_REGISTER_ALGORITHM(ConvertOp, ConvertOnednnReorder);

std::string ConvertOnednnReorder::LaunchSummary(const ConvertProblem& problem) const {
  return onednn::ImplementationSummary(Describe(problem));
}

}  // namespace convoy::cpu
