// CPU pooling on oneDNN's pooling primitive; see pool2d_onednn.h.
#include "kernels/cpu/pool2d_onednn.h"

#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnPoolDescriptor {
  dnnl::pooling_forward::primitive_desc pd;
  memory::desc src, dst;
  std::string impl;
};

namespace {

bool Global(const Pool2dProblem& p) { return p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax; }

// The image's memory descriptor: onednn::ActivationDesc's, and 8-bit NHWC images (which no other oneDNN algorithm
// here takes, so the shared helper keeps declining them).
absl::StatusOr<memory::desc> ImageDesc(DataType dtype, int n, int c, int h, int w, Layout layout) {
  if (dtype == DataType::kUInt8 || dtype == DataType::kInt8) {
    return memory::desc({n, c, h, w}, dtype == DataType::kUInt8 ? memory::data_type::u8 : memory::data_type::s8,
                        memory::format_tag::nhwc);
  }
  return onednn::ActivationDesc(dtype, n, c, h, w, layout);
}

absl::StatusOr<std::shared_ptr<const OnednnPoolDescriptor>> MakeDescriptor(const Pool2dProblem& p) {
  auto d = std::make_shared<OnednnPoolDescriptor>();
  CONVOY_ASSIGN_OR_RETURN(d->src, ImageDesc(p.dtype, p.n, p.c, p.h, p.w, p.layout));
  CONVOY_ASSIGN_OR_RETURN(d->dst, ImageDesc(p.dtype, p.n, p.c, p.p(), p.q(), p.layout));
  const bool global = Global(p);
  const memory::dims kernel = global ? memory::dims{p.h, p.w} : memory::dims{p.r, p.s};
  const memory::dims strides = global ? memory::dims{1, 1} : memory::dims{p.stride_h, p.stride_w};
  const memory::dims pad_l = global ? memory::dims{0, 0} : memory::dims{p.pad_top, p.pad_left};
  // oneDNN floors (dst - 1) * stride + kernel = src + pad_l + pad_r: ceil mode's last window needs more on the right.
  memory::dims pad_r = global ? memory::dims{0, 0} : memory::dims{p.pad_bottom, p.pad_right};
  if (!global) {
    pad_r[0] = std::max<memory::dim>(pad_r[0], (p.p() - 1) * p.stride_h + p.r - p.h - p.pad_top);
    pad_r[1] = std::max<memory::dim>(pad_r[1], (p.q() - 1) * p.stride_w + p.s - p.w - p.pad_left);
  }
  const dnnl::algorithm algorithm = (p.mode == PoolMode::kMax || p.mode == PoolMode::kGlobalMax)
                                        ? dnnl::algorithm::pooling_max
                                    : p.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                          : dnnl::algorithm::pooling_avg_exclude_padding;
  try {
    dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_inference, algorithm, d->src, d->dst, strides, kernel,
                                     pad_l, pad_r);
    d->pd = dnnl::pooling_forward::primitive_desc(desc, onednn::MakeAttr(dnnl::post_ops()), onednn::Engine(),
                                                  /*allow_empty=*/true);
    if (!d->pd) return absl::UnimplementedError(absl::StrCat("oneDNN has no pooling for ", p.ToString()));
    d->impl = d->pd.impl_info_str();
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  return std::shared_ptr<const OnednnPoolDescriptor>(std::move(d));
}

}  // namespace

template <Layout kLayout>
absl::string_view Pool2dOnednn<kLayout>::name() const {
  switch (kLayout) {
    case Layout::kNCHW: return "cpu.pool2d.onednn_nchw";
    case Layout::kNHWC: return "cpu.pool2d.onednn_nhwc";
    case Layout::kNCHW8c: return "cpu.pool2d.onednn_nchw8c";
  }
  return "cpu.pool2d.onednn";
}

template <Layout kLayout>
absl::StatusOr<std::shared_ptr<const OnednnPoolDescriptor>> Pool2dOnednn<kLayout>::Describe(
    const Pool2dProblem& problem) const {
  return descriptors_.Get(problem, MakeDescriptor);
}

template <Layout kLayout>
absl::Status Pool2dOnednn<kLayout>::CanImplement(const Pool2dProblem& p) const {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  if (p.layout != kLayout) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes ", LayoutName(kLayout), " only"));
  }
  if (!IsFloatingPoint(p.dtype) && kLayout != Layout::kNHWC) {
    // 8-bit max pooling (QDQ models' INT8 steps) lies NHWC, as every 8-bit tensor of a plan does.
    return absl::UnimplementedError(absl::StrCat(name(), ": 8-bit max pooling runs on cpu.pool2d.onednn_nhwc"));
  }
  if (p.dilation_h != 1 || p.dilation_w != 1) {
    // oneDNN 2.6 has dilation only in its pooling_v2 primitive, which this algorithm does not build.
    return absl::UnimplementedError(absl::StrCat(name(), ": dilated windows run on cpu.pool2d.direct"));
  }
  if (p.mode == PoolMode::kAverage && p.count_include_pad && p.ceil_mode &&
      ((p.p() - 1) * p.stride_h + p.r > p.h + p.pad_top + p.pad_bottom ||
       (p.q() - 1) * p.stride_w + p.s > p.w + p.pad_left + p.pad_right)) {
    return absl::UnimplementedError(absl::StrCat(name(), ": a ceil-mode window past the padded input divides by the "
                                                 "clipped window (PyTorch), oneDNN by the whole window"));
  }
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(p));
  return onednn::RejectReferenceImplementation(d->impl, name());
}

template <Layout kLayout>
size_t Pool2dOnednn<kLayout>::WorkspaceBytes(const Pool2dProblem& problem) const {
  auto d = Describe(problem);
  return d.ok() ? (*d)->pd.scratchpad_desc().get_size() : 0;
}

template <Layout kLayout>
absl::StatusOr<std::unique_ptr<AlgorithmState>> Pool2dOnednn<kLayout>::Prepare(const Pool2dProblem& problem,
                                                                               const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::MakePrimitiveState<dnnl::pooling_forward>(d->pd, d->impl, context);
}

template <Layout kLayout>
absl::Status Pool2dOnednn<kLayout>::Run(const Pool2dProblem& problem, const Pool2dArgs& args, Workspace workspace,
                                        const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(const onednn::PrimitiveState* state, onednn::PreparedState(workspace, name()));
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  try {
    std::unordered_map<int, memory> run_args = {{DNNL_ARG_SRC, onednn::Wrap(d->src, args.x)},
                                                {DNNL_ARG_DST, onednn::Wrap(d->dst, args.y)}};
    return onednn::Execute(*state, run_args, workspace, d->pd.scratchpad_desc().get_size(), context);
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, problem.ToString());
  }
}

template <Layout kLayout>
std::string Pool2dOnednn<kLayout>::LaunchSummary(const Pool2dProblem& problem) const {
  return onednn::ImplementationSummary(Describe(problem));
}

template class Pool2dOnednn<Layout::kNCHW>;
template class Pool2dOnednn<Layout::kNHWC>;
template class Pool2dOnednn<Layout::kNCHW8c>;

CONVOY_REGISTER_ALGORITHM(Pool2dOp, Pool2dOnednnNchw);
CONVOY_REGISTER_ALGORITHM(Pool2dOp, Pool2dOnednnNhwc);
CONVOY_REGISTER_ALGORITHM(Pool2dOp, Pool2dOnednnNchw8c);

}  // namespace convoy::cpu
