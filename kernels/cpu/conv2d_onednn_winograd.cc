// CPU conv2d on oneDNN's Winograd convolution for NHWC plans; see conv2d_onednn_winograd.h.
#include "kernels/cpu/conv2d_onednn_winograd.h"

#include <omp.h>

#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "kernels/common/align.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnWinogradDescriptor {
  dnnl::convolution_forward::primitive_desc pd;
  onednn::PostOps post_ops;
  memory::desc nhwc_src, nhwc_dst, user_weights, bias;
  std::string impl;
  bool residual = false;
  // The workspace: oneDNN's scratchpad at 0, the nChw16c input at src_offset, the nChw16c output at dst_offset.
  size_t src_offset = 0, dst_offset = 0, bytes = 0;
};

namespace {

constexpr int kBlock = 16;  // nChw16c: oneDNN's Winograd kernels take no other activation layout


// The shapes oneDNN's Winograd kernels take, checked before asking oneDNN (so the message names what is wrong).
absl::Status CheckShape(const Conv2dProblem& p, absl::string_view name) {
  if (p.layout != Layout::kNHWC) return absl::UnimplementedError(absl::StrCat(name, " takes NHWC only"));
  if (p.dtype != DataType::kFloat32) {
    return absl::UnimplementedError(absl::StrCat(name, " takes FP32 only, not ", DataTypeName(p.dtype)));
  }
  if (p.r != 3 || p.s != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 || p.dilation_w != 1 ||
      p.groups != 1) {
    return absl::UnimplementedError(
        absl::StrCat(name, " takes 3x3 filters with stride 1, dilation 1 and one group; got ", p.ToString()));
  }
  if (p.c % kBlock != 0 || p.k % kBlock != 0) {
    return absl::UnimplementedError(absl::StrCat(name, " takes input and output channel counts that are multiples of ",
                                                 kBlock, "; got C=", p.c, " K=", p.k));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const OnednnWinogradDescriptor>> MakeDescriptor(const Conv2dProblem& p,
                                                                              absl::string_view name) {
  CONVOY_RETURN_IF_ERROR(CheckShape(p, name));
  if (!onednn::HasAvx512Kernels()) {
    return absl::UnimplementedError(absl::StrCat(name, ": oneDNN ", onednn::Version(),
                                                 " has Winograd kernels on AVX-512 CPUs only"));
  }
  auto d = std::make_shared<OnednnWinogradDescriptor>();
  const memory::data_type f32 = memory::data_type::f32;
  d->nhwc_src = memory::desc({p.n, p.c, p.h, p.w}, f32, memory::format_tag::nhwc);
  d->nhwc_dst = memory::desc({p.n, p.k, p.p(), p.q()}, f32, memory::format_tag::nhwc);
  const memory::desc src16({p.n, p.c, p.h, p.w}, f32, memory::format_tag::nChw16c);
  const memory::desc dst16({p.n, p.k, p.p(), p.q()}, f32, memory::format_tag::nChw16c);
  // The filter as NHWC problems store it, [K, R, S, C], seen as oihw dims with (o, i, r, s) strides.
  d->user_weights = memory::desc({p.k, p.c, 3, 3}, f32, memory::dims{9 * p.c, 1, 3 * p.c, p.c});
  d->residual = p.epilogue.residual != ResidualMode::kNone;
  CONVOY_ASSIGN_OR_RETURN(d->post_ops,
                          onednn::MakePostOps(p.epilogue, dst16, {1, p.k, 1, 1}, onednn::ResidualPostOp::kSum));
  if (!d->post_ops.binary_args.empty()) {
    return absl::UnimplementedError(absl::StrCat(name, ": oneDNN's Winograd kernels take no binary post-op (a "
                                                 "per-channel scale); got ", p.ToString()));
  }
  try {
    if (d->post_ops.conv_bias) d->bias = memory::desc({p.k}, f32, memory::format_tag::a);
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
                                         src16, memory::desc({p.k, p.c, 3, 3}, f32, memory::format_tag::any), d->bias,
                                         dst16, {1, 1}, {0, 0}, {p.pad_top, p.pad_left}, {p.pad_bottom, p.pad_right});
    d->pd = dnnl::convolution_forward::primitive_desc(desc, onednn::MakeAttr(d->post_ops.ops), onednn::Engine(),
                                                      /*allow_empty=*/true);
    if (!d->pd) {
      return absl::UnimplementedError(absl::StrCat(name, ": oneDNN ", onednn::Version(),
                                                   " has no Winograd convolution for ", p.ToString()));
    }
    d->impl = d->pd.impl_info_str();
    if (!absl::StrContains(d->impl, "wino")) {
      return absl::UnimplementedError(absl::StrCat(name, ": oneDNN offers ", d->impl, " for ", p.ToString(),
                                                   ", not a Winograd kernel"));
    }
    CONVOY_RETURN_IF_ERROR(onednn::CheckPrimitiveCreates<dnnl::convolution_forward>(d->pd));
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  d->src_offset = AlignUp(d->pd.scratchpad_desc().get_size());
  d->dst_offset = d->src_offset + AlignUp(d->pd.src_desc().get_size());
  d->bytes = d->dst_offset + AlignUp(d->pd.dst_desc().get_size());
  return std::shared_ptr<const OnednnWinogradDescriptor>(std::move(d));
}

// Prepare's state: the Winograd primitive, the reorders into and out of nChw16c, and the thread count they were
// made for.
class WinogradState final : public AlgorithmState {
 public:
  WinogradState(dnnl::convolution_forward conv, dnnl::reorder src_in, dnnl::reorder dst_out,
                std::optional<dnnl::reorder> residual_in, int threads)
      : conv(std::move(conv)),
        src_in(std::move(src_in)),
        dst_out(std::move(dst_out)),
        residual_in(std::move(residual_in)),
        threads(threads) {}
  dnnl::convolution_forward conv;
  dnnl::reorder src_in, dst_out;
  std::optional<dnnl::reorder> residual_in;  // NHWC residual into the nChw16c output, for the sum post-op
  int threads;
};

}  // namespace

absl::StatusOr<std::shared_ptr<const OnednnWinogradDescriptor>> Conv2dOnednnWinogradNhwc::Describe(
    const Conv2dProblem& problem) const {
  return descriptors_.Get(problem, [this](const Conv2dProblem& p) { return MakeDescriptor(p, name()); });
}

absl::Status Conv2dOnednnWinogradNhwc::CanImplement(const Conv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  CONVOY_RETURN_IF_ERROR(CheckShape(problem, name()));
  return Describe(problem).status();
}

absl::StatusOr<std::string> Conv2dOnednnWinogradNhwc::Implementation(const Conv2dProblem& problem) const {
  CONVOY_ASSIGN_OR_RETURN(auto descriptor, Describe(problem));
  return descriptor->impl;
}

int Conv2dOnednnWinogradNhwc::HeuristicScore(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  const bool f2x2 = descriptor.ok() && absl::StrContains((*descriptor)->impl, "wino_2x3");
  return f2x2 && problem.p() * problem.q() >= 14 * 14 ? 45 : 35;
}

size_t Conv2dOnednnWinogradNhwc::WorkspaceBytes(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? (*descriptor)->bytes : 0;
}

size_t Conv2dOnednnWinogradNhwc::PackedFilterBytes(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? (*descriptor)->pd.weights_desc().get_size() : 0;
}

std::string Conv2dOnednnWinogradNhwc::PackedFilterLayout(const Conv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? onednn::LayoutString((*descriptor)->pd.weights_desc()) : "";
}

absl::Status Conv2dOnednnWinogradNhwc::PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                                                  const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  // oneDNN 2.6 reorders into its Winograd weights format from plain oihw only (not from the [K, R, S, C] strides of
  // an NHWC problem's filter), so the filter goes through oihw first. Plan time: the copy is allocated here.
  const memory::desc oihw({problem.k, problem.c, 3, 3}, memory::data_type::f32, memory::format_tag::oihw);
  std::vector<float> plain(size_t(problem.k) * problem.c * 9);
  CONVOY_RETURN_IF_ERROR(onednn::Reorder(d->user_weights, filter, oihw, plain.data(), context));
  return onednn::Reorder(oihw, plain.data(), d->pd.weights_desc(), packed, context);
}

absl::StatusOr<std::unique_ptr<AlgorithmState>> Conv2dOnednnWinogradNhwc::Prepare(
    const Conv2dProblem& problem, const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  const int threads = onednn::UseContextThreads(context);
  try {
    const dnnl::engine& engine = onednn::Engine();
    dnnl::reorder src_in(dnnl::reorder::primitive_desc(engine, d->nhwc_src, engine, d->pd.src_desc()));
    dnnl::reorder dst_out(dnnl::reorder::primitive_desc(engine, d->pd.dst_desc(), engine, d->nhwc_dst));
    std::optional<dnnl::reorder> residual_in;
    if (d->residual) {
      residual_in.emplace(dnnl::reorder::primitive_desc(engine, d->nhwc_dst, engine, d->pd.dst_desc()));
    }
    return std::unique_ptr<AlgorithmState>(new WinogradState(dnnl::convolution_forward(d->pd), std::move(src_in),
                                                             std::move(dst_out), std::move(residual_in), threads));
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, d->impl);
  }
}

absl::Status Conv2dOnednnWinogradNhwc::Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                                           const ExecutionContext& context) const {
  const auto* state = dynamic_cast<const WinogradState*>(workspace.state);
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(name(), ": Run without the state of Prepare (the primitives are made once, at plan time)"));
  }
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  if (workspace.bytes < d->bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name(), " needs ", d->bytes, " workspace bytes for ",
                                                   problem.ToString(), ", got ", workspace.bytes));
  }
  if (d->residual && args.residual == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": the epilogue of ", problem.ToString(),
                                                   " adds a residual, and the residual pointer is null"));
  }
  char* base = static_cast<char*>(workspace.data);
  absl::Status status;
  auto run = [&](int threads) {
    omp_set_num_threads(threads < state->threads ? threads : state->threads);
    try {
      memory x = onednn::Wrap(d->nhwc_src, args.x), y = onednn::Wrap(d->nhwc_dst, args.y);
      memory src16 = onednn::Wrap(d->pd.src_desc(), base + d->src_offset);
      memory dst16 = onednn::Wrap(d->pd.dst_desc(), base + d->dst_offset);
      std::unordered_map<int, memory> conv_args = {
          {DNNL_ARG_SRC, src16},
          {DNNL_ARG_WEIGHTS, onednn::Wrap(d->pd.weights_desc(), args.w)},
          {DNNL_ARG_DST, dst16},
      };
      if (d->post_ops.conv_bias) conv_args.emplace(DNNL_ARG_BIAS, onednn::Wrap(d->bias, args.bias));
      const size_t scratchpad_bytes = d->pd.scratchpad_desc().get_size();
      if (scratchpad_bytes > 0) conv_args.emplace(DNNL_ARG_SCRATCHPAD, onednn::Wrap(d->pd.scratchpad_desc(), base));
      static thread_local dnnl::stream stream(onednn::Engine());
      state->src_in.execute(stream, x, src16);
      if (state->residual_in) {
        memory residual = onednn::Wrap(d->nhwc_dst, args.residual);
        state->residual_in->execute(stream, residual, dst16);
      }
      state->conv.execute(stream, conv_args);
      state->dst_out.execute(stream, dst16, y);
      stream.wait();
    } catch (const dnnl::error& error) {
      status = onednn::FromError(error, d->impl);
    }
  };
  if (context.thread_pool != nullptr) {
    context.thread_pool->RunReserved(run);
  } else {
    run(1);
  }
  return status;
}

std::string Conv2dOnednnWinogradNhwc::LaunchSummary(const Conv2dProblem& problem) const {
  return onednn::ImplementationSummary(Describe(problem));
}

// Only where oneDNN dispatches its AVX-512 kernels: elsewhere 2.6 has no Winograd kernel, and an algorithm that
// declines every problem would only lengthen every tuning run.
const bool kOnednnWinogradRegistered = [] {
  if (onednn::HasAvx512Kernels()) {
    OpRegistry<Conv2dOp>::Global().Register(std::make_unique<Conv2dOnednnWinogradNhwc>());
  }
  return true;
}();

}  // namespace convoy::cpu
