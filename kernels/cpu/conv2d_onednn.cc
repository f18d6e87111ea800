// CPU conv2d on oneDNN's convolution primitive; see conv2d_onednn.h.
#include "kernels/cpu/conv2d_onednn.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/silu_loops.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnConvDescriptor {
  dnnl::convolution_forward::primitive_desc pd;
  onednn::PostOps post_ops;
  memory::desc src, dst, user_weights, bias;
  memory::dims channel_dims;
  std::string impl;
  bool residual_sum = false;  // the residual is the sum post-op: it must be in the output buffer when pd runs
  bool silu_after = false;    // the epilogue's SiLU runs after the primitive (SiluAfter), not as a post-op
};

namespace {

// SiLU over the primitive's output, in chunks across the pool.
void SiluAfter(float* y, size_t count, const ExecutionContext& context) {
  constexpr int64_t kChunk = 16384;
  const CpuIsa isa = BestCpuIsa();
  const int64_t n = static_cast<int64_t>(count), chunks = (n + kChunk - 1) / kChunk;
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t c = begin; c < end; ++c) SiluInPlace(isa, y + c * kChunk, std::min(kChunk, n - c * kChunk));
  };
  if (context.thread_pool == nullptr) return run(0, chunks);
  context.thread_pool->ParallelFor(chunks, run);
}

// The filter as the problem stores it: [K, C/g, R, S] for NCHW and NCHW8c problems, [K, R, S, C/g] for NHWC ones;
// grouped problems see it as [g, K/g, C/g, R, S].
memory::desc UserWeightsDesc(const Conv2dProblem& p, memory::data_type type) {
  const memory::dim g = p.groups, o = p.k / p.groups, i = p.c_per_group(), r = p.r, s = p.s;
  const bool hwc = p.layout == Layout::kNHWC;
  // Element strides of (o, i, r, s) within one group, then the group stride.
  const memory::dims ois = hwc ? memory::dims{r * s * i, 1, s * i, i} : memory::dims{i * r * s, r * s, s, 1};
  if (p.groups == 1) return memory::desc({o, i, r, s}, type, ois);
  return memory::desc({g, o, i, r, s}, type, {o * i * r * s, ois[0], ois[1], ois[2], ois[3]});
}

using Descriptor = absl::StatusOr<std::shared_ptr<const OnednnConvDescriptor>>;

// The descriptor of `p` with the residual (if any) as `residual_as`: the first implementation oneDNN offers whose
// primitive can be created.
Descriptor DescribeWith(const Conv2dProblem& p, onednn::ResidualPostOp residual_as) {
  auto d = std::make_shared<OnednnConvDescriptor>();
  CONVOY_ASSIGN_OR_RETURN(const memory::data_type type, onednn::DataTypeOf(p.dtype));
  CONVOY_ASSIGN_OR_RETURN(d->src, onednn::ActivationDesc(p.dtype, p.n, p.c, p.h, p.w, p.layout));
  CONVOY_ASSIGN_OR_RETURN(d->dst, onednn::ActivationDesc(p.dtype, p.n, p.k, p.p(), p.q(), p.layout));
  d->channel_dims = {1, p.k, 1, 1};
  d->residual_sum = p.epilogue.residual != ResidualMode::kNone && residual_as == onednn::ResidualPostOp::kSum;
  // oneDNN 2.6's swish post-op made EfficientNet's expand and depthwise convolutions 2.4-2.8x slower than the same
  // convolutions without an activation; the own vectorized SiLU over the output afterwards, a pass over memory the
  // primitive just wrote, costs less (docs/kernels.md). Only where nothing follows the activation, the output is
  // FP32 and the CPU has AVX2 or AVX-512 (the loop's portable version computes its FMAs in software).
  Epilogue chain = p.epilogue;
  d->silu_after = p.dtype == DataType::kFloat32 && chain.activation.kind == ActivationKind::kSilu &&
                  chain.residual != ResidualMode::kAfterActivation && BestCpuIsa() != CpuIsa::kBaseline;
  if (d->silu_after) chain.activation = Activation{};
  CONVOY_ASSIGN_OR_RETURN(d->post_ops, onednn::MakePostOps(chain, d->dst, d->channel_dims, residual_as));
  d->user_weights = UserWeightsDesc(p, type);
  try {
    const memory::desc weights_any(d->user_weights.dims(), type, memory::format_tag::any);
    if (d->post_ops.conv_bias) d->bias = memory::desc({p.k}, memory::data_type::f32, memory::format_tag::a);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, d->src, weights_any, d->bias, d->dst,
        {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_top, p.pad_left},
        {p.pad_bottom, p.pad_right});
    d->pd = dnnl::convolution_forward::primitive_desc(desc, onednn::MakeAttr(d->post_ops.ops), onednn::Engine(),
                                                      /*allow_empty=*/true);
    if (!d->pd) {
      return absl::UnimplementedError(absl::StrCat("oneDNN ", onednn::Version(), " has no convolution for ",
                                                   p.ToString()));
    }
    // An implementation whose primitive cannot be created is walked past, to the next one oneDNN offers
    // (pd.next_impl()): on AVX-512 BF16 CPUs (seen on an Intel Xeon with AMX) jit_bf16:avx512_core_bf16 is offered
    // for grouped BF16 NHWC / NCHW8c convolutions with a scale + SiLU epilogue, and creating it fails ("could not
    // create a primitive"). Creating it here, once per problem, keeps CanImplement truthful: Prepare would otherwise
    // fail with INTERNAL after the algorithm was chosen (oneDNN's primitive cache makes Prepare's creation of the same
    // primitive cheap).
    //
    // brgconv (oneDNN's BRGEMM-based kernels, picked on AVX-512 CPUs for NHWC problems) is used like any other. It
    // chooses its filter layout per problem: the same filter can be Acdb32a at batch 1 and Acdb48a at batch 2, which
    // is why PackedFilterLayout exists (docs/kernels.md, "brgconv"; conv2d_onednn_test.cc,
    // BrgconvFilterLayoutFollowsTheBatch).
    std::vector<std::string> skipped;
    while (true) {  // pd is non-empty here (checked above)
      const std::string impl = d->pd.impl_info_str();
      const absl::Status created = onednn::CheckPrimitiveCreates<dnnl::convolution_forward>(d->pd);
      if (created.ok()) break;
      skipped.push_back(absl::StrCat(impl, " (", created.message(), ")"));
      if (!d->pd.next_impl()) {
        return absl::UnimplementedError(absl::StrCat("oneDNN ", onednn::Version(), " has no usable convolution for ",
                                                     p.ToString(), "; skipped ", absl::StrJoin(skipped, ", ")));
      }
    }
    d->impl = d->pd.impl_info_str();
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  return std::shared_ptr<const OnednnConvDescriptor>(std::move(d));
}

bool IsBrgconv(const Descriptor& d) { return d.ok() && absl::StrContains((*d)->impl, "brgconv"); }

// The residual's form (Conv2dOnednn::ResidualForm). oneDNN 2.6 on AVX-512 runs NHWC residual layers with binary_add
// on jit:avx512_core / jit_1x1:avx512_core (brgconv declines it) and with sum on brgconv / brgconv_1x1; without
// AVX-512 there is no brgconv, and the binary form stays.
template <typename Form>
Descriptor MakeDescriptor(const Conv2dProblem& p, Form form) {
  using onednn::ResidualPostOp;
  if (p.epilogue.residual == ResidualMode::kNone || form == Form::kBinaryAdd) {
    return DescribeWith(p, ResidualPostOp::kBinaryAdd);
  }
  if (form == Form::kSum) {
    Descriptor sum = DescribeWith(p, ResidualPostOp::kSum);
    if (sum.ok() && !absl::StartsWith((*sum)->impl, "ref")) return sum;
    return DescribeWith(p, ResidualPostOp::kBinaryAdd);
  }
  Descriptor binary = DescribeWith(p, ResidualPostOp::kBinaryAdd);
  if (!onednn::HasAvx512Kernels() || IsBrgconv(binary)) return binary;  // 2.6 has brgconv on AVX-512 only
  Descriptor sum = DescribeWith(p, ResidualPostOp::kSum);
  return IsBrgconv(sum) ? sum : binary;
}

}  // namespace

template <Layout kLayout>
absl::string_view Conv2dOnednn<kLayout>::name() const {
  switch (kLayout) {
    case Layout::kNCHW: return "cpu.conv2d.onednn_nchw";
    case Layout::kNHWC: return "cpu.conv2d.onednn_nhwc";
    case Layout::kNCHW8c: return "cpu.conv2d.onednn_nchw8c";
  }
  return "cpu.conv2d.onednn";
}

template <Layout kLayout>
absl::StatusOr<std::shared_ptr<const OnednnConvDescriptor>> Conv2dOnednn<kLayout>::Describe(
    const Conv2dProblem& problem) const {
  return descriptors_.Get(problem, [this](const Conv2dProblem& p) { return MakeDescriptor(p, residual_form_); });
}

template <Layout kLayout>
absl::Status Conv2dOnednn<kLayout>::CanImplement(const Conv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.layout != kLayout) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes ", LayoutName(kLayout), " only"));
  }
  CONVOY_RETURN_IF_ERROR(onednn::DataTypeOf(problem.dtype).status());
  CONVOY_ASSIGN_OR_RETURN(auto descriptor, Describe(problem));
  return onednn::RejectReferenceImplementation(descriptor->impl, name());
}

template <Layout kLayout>
absl::StatusOr<std::string> Conv2dOnednn<kLayout>::Implementation(const Conv2dProblem& problem) const {
  CONVOY_ASSIGN_OR_RETURN(auto descriptor, Describe(problem));
  return descriptor->impl;
}

template <Layout kLayout>
bool Conv2dOnednn<kLayout>::AccumulatesOntoOutput(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() && (*descriptor)->residual_sum;
}

template <Layout kLayout>
int Conv2dOnednn<kLayout>::HeuristicScore(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  if (!descriptor.ok() || onednn::IsGemmImplementation((*descriptor)->impl)) return 5;
  return 40;
}

template <Layout kLayout>
size_t Conv2dOnednn<kLayout>::WorkspaceBytes(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? (*descriptor)->pd.scratchpad_desc().get_size() : 0;
}

template <Layout kLayout>
size_t Conv2dOnednn<kLayout>::PackedFilterBytes(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? (*descriptor)->pd.weights_desc().get_size() : 0;
}

template <Layout kLayout>
std::string Conv2dOnednn<kLayout>::PackedFilterLayout(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? onednn::LayoutString((*descriptor)->pd.weights_desc()) : "";
}

template <Layout kLayout>
absl::Status Conv2dOnednn<kLayout>::PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                                               const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::Reorder(d->user_weights, filter, d->pd.weights_desc(), packed, context);
}

template <Layout kLayout>
absl::StatusOr<std::unique_ptr<AlgorithmState>> Conv2dOnednn<kLayout>::Prepare(const Conv2dProblem& problem,
                                                                               const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  return onednn::MakePrimitiveState<dnnl::convolution_forward>(d->pd, d->impl, context);
}

template <Layout kLayout>
absl::Status Conv2dOnednn<kLayout>::Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                                        const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(const onednn::PrimitiveState* state, onednn::PreparedState(workspace, name()));
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  if (problem.epilogue.residual != ResidualMode::kNone && args.residual == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": the epilogue of ", problem.ToString(),
                                                   " adds a residual, and the residual pointer is null"));
  }
  if (d->residual_sum && args.residual != args.y) {
    // The sum post-op adds what the output holds. Plans usually give the output the residual's storage, so that
    // this copy is not needed (AccumulatesOntoOutput).
    std::memcpy(args.y, args.residual, d->dst.get_size());
  }
  try {
    std::unordered_map<int, memory> run_args = {
        {DNNL_ARG_SRC, onednn::Wrap(d->src, args.x)},
        {DNNL_ARG_WEIGHTS, onednn::Wrap(d->pd.weights_desc(), args.w)},
        {DNNL_ARG_DST, onednn::Wrap(d->dst, args.y)},
    };
    if (d->post_ops.conv_bias) run_args.emplace(DNNL_ARG_BIAS, onednn::Wrap(d->bias, args.bias));
    onednn::AddPostOpArgs(d->post_ops, {args.scale, args.bias, args.residual}, d->dst, d->channel_dims, run_args);
    CONVOY_RETURN_IF_ERROR(onednn::Execute(*state, run_args, workspace, d->pd.scratchpad_desc().get_size(), context));
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, problem.ToString());
  }
  if (d->silu_after) SiluAfter(static_cast<float*>(args.y), d->dst.get_size() / sizeof(float), context);
  return absl::OkStatus();
}

template <Layout kLayout>
std::string Conv2dOnednn<kLayout>::LaunchSummary(const Conv2dProblem& problem) const {
  return onednn::ImplementationSummary(Describe(problem));
}

template class Conv2dOnednn<Layout::kNCHW>;
template class Conv2dOnednn<Layout::kNHWC>;
template class Conv2dOnednn<Layout::kNCHW8c>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dOnednnNchw);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dOnednnNhwc);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dOnednnNchw8c);

}  // namespace convoy::cpu
