// CPU INT8 conv2d on oneDNN's convolution primitive; see quantized_conv2d_onednn.h.
#include "kernels/cpu/quantized_conv2d_onednn.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/align.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/quantized_arithmetic.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

using dnnl::memory;

struct OnednnQuantizedConvDescriptor {
  // One of the two: the convolution primitive, or (a 1x1 convolution as a GEMM) the matmul primitive.
  dnnl::convolution_forward::primitive_desc conv_pd;
  dnnl::matmul::primitive_desc matmul_pd;
  bool as_matmul() const { return static_cast<bool>(matmul_pd); }
  const dnnl::primitive_desc& pd() const {
    return as_matmul() ? static_cast<const dnnl::primitive_desc&>(matmul_pd) : conv_pd;
  }
  memory::desc src, dst, user_weights, bias, scales;
  memory::desc scalar;             // one FP32 value: the conv's zero point before a fused add
  int conv_zero_point_post_op = -1;  // the binary_add post-op adding it, or -1
  std::string impl;
};

namespace {

memory::data_type Int8TypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8: return memory::data_type::u8;
    case DataType::kInt8: return memory::data_type::s8;
    default: return memory::data_type::f32;  // the FP32 output (Validate admits nothing else)
  }
}

// Whether the source zero point is folded into the bias instead of the attribute: an unpadded convolution (every tap
// inside the image, so sum (x - zp) w = sum x w - zp sum_w[k] exactly) whose sum x w and compensation zp sum_w[k]
// stay below 2^23 in magnitude (255 * 128 per tap), so that FP32 holds them, and the bias plus the compensation,
// exactly: oneDNN's float(acc) + float(bias) is then what it is with the attribute, for any bias below 2^23.
bool FoldsSourceZeroPoint(const QuantizedConv2dProblem& p) {
  if (p.epilogue.src_zero_point == 0) return false;
  if (p.pad_top != 0 || p.pad_bottom != 0 || p.pad_left != 0 || p.pad_right != 0) return false;
  const int64_t taps = int64_t{p.c_per_group()} * p.r * p.s;
  return 255 * 128 * taps < (int64_t{1} << 23);
}

// Where the per-channel compensation -zp * sum_w[k] (INT32) lies in the packed filter, and the adjusted bias in the
// workspace: after oneDNN's packed weights and its scratchpad.
size_t CompensationOffset(const OnednnQuantizedConvDescriptor& d) { return AlignUp(d.pd().weights_desc().get_size()); }
size_t AdjustedBiasOffset(const OnednnQuantizedConvDescriptor& d) { return AlignUp(d.pd().scratchpad_desc().get_size()); }

memory::desc ImageDesc(DataType dtype, int64_t n, int64_t c, int64_t h, int64_t w, Layout layout) {
  return memory::desc({n, c, h, w}, Int8TypeOf(dtype), onednn::ActivationTag(StoredLayout(layout, c)));
}

// The INT8 filter as the problem stores it (Conv2dProblem's convention): [K, C/g, R, S] for NCHW and NCHW8c,
// [K, R, S, C/g] for NHWC; grouped problems see it as [g, K/g, C/g, R, S].
memory::desc UserWeightsDesc(const QuantizedConv2dProblem& p) {
  const memory::dim g = p.groups, o = p.k / p.groups, i = p.c_per_group(), r = p.r, s = p.s;
  const bool hwc = p.layout == Layout::kNHWC;
  const memory::dims ois = hwc ? memory::dims{r * s * i, 1, s * i, i} : memory::dims{i * r * s, r * s, s, 1};
  if (p.groups == 1) return memory::desc({o, i, r, s}, memory::data_type::s8, ois);
  return memory::desc({g, o, i, r, s}, memory::data_type::s8, {o * i * r * s, ois[0], ois[1], ois[2], ois[3]});
}

// The requantization. Multipliers fixed with the problem (epilogue.scales) become the primitive's output scales,
// which its kernels apply with one multiply while storing the accumulator; run-time multipliers (args.scale) become a
// per-channel binary multiply post-op (oneDNN 2.6 has no convolution taking run-time output scales), which costs
// 1.1-1.6x on ResNet-50's 1x1 layers at batch 1 (docs/performance.md). Both compute the same FP32 product
// float(acc) + float(bias), times scale[k]. Then the post-ops: the residual sum with its scale and zero point, ReLU, and
// for an 8-bit output with a zero point a round half to even (without one, the conversion to 8 bits rounds half to
// even itself); the zero points are primitive attributes. oneDNN then computes
// dst = saturate(round(round((acc + bias) * scale[k] [+ sum_scale * (dst - sum_zp)] [relu]) + dst_zp)).
// The explicit round makes the zero point's FP32 add exact: without it oneDNN rounds v + dst_zp, which differs from
// round(v) + dst_zp (QuantizedEpilogue, onnxruntime's QLinearConv) where v lies within an FP32 ulp of 256 of a tie,
// a few outputs in 100000, and the difference travels through a deep network's later layers.
// The add's own result for the conv's 8-bit value c and the residual r, saturated to y's type: onnxruntime's
// QLinearAdd, rint(fma(a, ra, fma(b, rb, fixed))) with the conv as a or b.
float AddOf(const QuantizedConv2dProblem& p, const QuantizedAddFactors& f, float c, float r) {
  const bool conv_is_a = p.fused_add == QuantizedFusedAdd::kConvIsA;
  const float a = conv_is_a ? c : r, b = conv_is_a ? r : c;
  return std::clamp(std::nearbyint(std::fmaf(a, f.ra, std::fmaf(b, f.rb, f.fixed))), QuantizedLowest(p.add.y_type),
                    QuantizedHighest(p.add.y_type));
}

// The fused add with the conv's zero point folded away (FoldConvZeroPoint): the conv's rounded value u = rint(v) is
// clipped to [lowest - zp, highest - zp] (u + zp saturated, less zp), then one eltwise_linear, u * r_conv + folded,
// then the sum post-op, r * r_residual + that, rounded by the store. Four eltwise/sum post-ops: no binary one, which
// oneDNN 2.6's brgconv runs 5-12 % slower on ResNet-50's block ends on AMX (kernels/benchmarks:int8_fused_add_forms).
// `folded` replaces fixed + zp * r_conv, which FP32 cannot hold exactly in general: it is the constant among that
// sum's FP32 neighbours for which every pair of 8-bit operands gives the add's own saturated result; NaN when none
// does, and then AppendFusedAdd builds the unfolded chain.
float FoldConvZeroPoint(const QuantizedConv2dProblem& p) {
  const QuantizedAddFactors f = QuantizedAddFactorsOf(p.add);
  const bool conv_is_a = p.fused_add == QuantizedFusedAdd::kConvIsA;
  const float r_conv = conv_is_a ? f.ra : f.rb, r_residual = conv_is_a ? f.rb : f.ra;
  const float zp = static_cast<float>(p.epilogue.dst_zero_point);
  const DataType residual_type = conv_is_a ? p.add.b_type : p.add.a_type;
  const float y_lo = QuantizedLowest(p.add.y_type), y_hi = QuantizedHighest(p.add.y_type);
  auto exact = [&](float folded) {
    for (float c = QuantizedLowest(p.conv_type()); c <= QuantizedHighest(p.conv_type()); c += 1.f) {
      const float conv_term = std::fmaf(c - zp, r_conv, folded);
      for (float r = QuantizedLowest(residual_type); r <= QuantizedHighest(residual_type); r += 1.f) {
        const float fused = std::clamp(std::nearbyint(std::fmaf(r, r_residual, conv_term)), y_lo, y_hi);
        if (fused != AddOf(p, f, c, r)) return false;
      }
    }
    return true;
  };
  const float nearest = std::fmaf(zp, r_conv, f.fixed);
  float up = nearest, down = nearest;
  for (int ulps = 0; ulps <= 8; ++ulps) {
    if (exact(up)) return up;
    if (ulps > 0 && exact(down)) return down;
    up = std::nextafterf(up, INFINITY);
    down = std::nextafterf(down, -INFINITY);
  }
  return NAN;
}

// The fused add as post-ops on v (the requantized value after the ReLU), reproducing the separate steps. Folded
// (`folded` not NaN): round, clip with the zero point's shifted bounds, eltwise_linear with the folded constant, sum;
// the store rounds. Unfolded: round, add the conv's zero point (a scalar binary_add: a second eltwise_linear in one
// chain takes the first one's constants in oneDNN 2.6's brgconv, checked on the AVX-512 VNNI Xeon) and saturate to its
// type (c, an integer in FP32), then eltwise_linear, which oneDNN 2.6 evaluates as one FMA, c * r_conv + fixed, and
// the sum post-op, one FMA with the residual read from the destination, r * r_residual + that. Either way no
// destination zero point (y's is inside the constant), rounding and saturation on the store. Unfolded, with the conv
// as the add's second operand that is the add's own order, fma(r, ra, fma(c, rb, fixed)); as its first operand the
// FMAs come in the other order (ExactConvFirstOrder). Returns the index of the zero point's binary_add post-op, or -1
// when there is none.
int AppendFusedAdd(const QuantizedConv2dProblem& p, float folded, const memory::desc& scalar, dnnl::post_ops& ops) {
  const QuantizedAddFactors f = QuantizedAddFactorsOf(p.add);
  const bool conv_is_a = p.fused_add == QuantizedFusedAdd::kConvIsA;
  const DataType residual_type = conv_is_a ? p.add.b_type : p.add.a_type;
  const float zp = static_cast<float>(p.epilogue.dst_zero_point);
  ops.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
  int zero_point_index = -1;
  if (!std::isnan(folded)) {
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, QuantizedLowest(p.conv_type()) - zp, QuantizedHighest(p.conv_type()) - zp);
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, conv_is_a ? f.ra : f.rb, folded);
  } else {
    if (p.epilogue.dst_zero_point != 0) {
      zero_point_index = ops.len();
      ops.append_binary(dnnl::algorithm::binary_add, scalar);
    }
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_clip, QuantizedLowest(p.conv_type()), QuantizedHighest(p.conv_type()));
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, conv_is_a ? f.ra : f.rb, f.fixed);
  }
  ops.append_sum(conv_is_a ? f.rb : f.ra, 0, Int8TypeOf(residual_type));
  // The add's own rounding is the store's: its output is 8-bit (Validate: dst_type is the add's y_type), and the
  // conversion to 8 bits rounds half to even (vcvtps2dq in the MXCSR's default mode) and saturates, as rint and the
  // saturation do. An eltwise_round here would round twice, and costs 6-13 % of the layer in brgconv's AMX epilogue
  // (kernels/benchmarks:int8_fused_add_forms, "the store rounding").
  return zero_point_index;
}

// Unfolded, with the conv as the add's first operand, oneDNN's post-ops compute rint(fma(r, rb, fma(c, ra, fixed)))
// where the add computes rint(fma(c, ra, fma(r, rb, fixed))): the two differ where the sum lies within an FP32
// rounding of a tie. Every pair of 8-bit values is tried (at most 65536): OK when both orders give the same saturated
// result for all of them (13 of ResNet-50's 16 residual adds in a QDQ file from onnxruntime's quantizer), else how
// many differ.
absl::Status ExactConvFirstOrder(const QuantizedConv2dProblem& p) {
  const QuantizedAddFactors f = QuantizedAddFactorsOf(p.add);
  const float lo = QuantizedLowest(p.add.y_type), hi = QuantizedHighest(p.add.y_type);
  int differ = 0;
  for (float c = QuantizedLowest(p.add.a_type); c <= QuantizedHighest(p.add.a_type); c += 1.f) {
    for (float r = QuantizedLowest(p.add.b_type); r <= QuantizedHighest(p.add.b_type); r += 1.f) {
      const float fused = std::clamp(std::nearbyint(std::fmaf(r, f.rb, std::fmaf(c, f.ra, f.fixed))), lo, hi);
      differ += AddOf(p, f, c, r) != fused;
    }
  }
  if (differ == 0) return absl::OkStatus();
  return absl::UnimplementedError(absl::StrCat(
      "with the convolution as the add's first operand oneDNN's post-ops would evaluate the add's two FMAs in the "
      "other order, which rounds ", differ, " pairs of 8-bit operands differently for ", p.add.ToString(),
      ", and no constant with the conv's zero point folded in reproduces the add either"));
}

dnnl::primitive_attr MakeQuantizedAttr(const QuantizedConv2dProblem& p, float folded, OnednnQuantizedConvDescriptor& d) {
  const memory::desc& scales = d.scales;
  const QuantizedEpilogue& e = p.epilogue;
  dnnl::post_ops ops;
  if (e.scales.empty()) ops.append_binary(dnnl::algorithm::binary_mul, scales);
  if (e.residual == ResidualMode::kBeforeActivation) {
    ops.append_sum(e.residual_scale, e.residual_zero_point, memory::data_type::undef);
  }
  if (e.relu) ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
  if (p.fused_add != QuantizedFusedAdd::kNone) {
    d.conv_zero_point_post_op = AppendFusedAdd(p, folded, d.scalar, ops);
  } else if (p.dst_type != DataType::kFloat32 && e.dst_zero_point != 0) {
    // Rounded, then the zero point added to the integer (exact in FP32), then the conversion saturates. Without a
    // zero point the conversion to 8 bits rounds half to even itself (vcvtps2dq in the MXCSR's default mode), after
    // the saturation the same clamp: the post-op would round twice. Not the destination zero-point attribute, which
    // keeps oneDNN 2.6 off its brgconv kernels (the header).
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_round, 0.f, 0.f);
    ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, 1.f, static_cast<float>(e.dst_zero_point));
  }
  dnnl::primitive_attr attr = onednn::MakeAttr(ops);
  if (!e.scales.empty()) {
    const bool common = std::all_of(e.scales.begin(), e.scales.end(), [&](float v) { return v == e.scales[0]; });
    // Mask bit 1: one scale per output channel (dimension 1 of the destination); 0: one for all.
    attr.set_output_scales(common ? 0 : 1 << 1, common ? std::vector<float>{e.scales[0]} : e.scales);
  }
  if (e.src_zero_point != 0 && !FoldsSourceZeroPoint(p)) attr.set_zero_points(DNNL_ARG_SRC, 0, {e.src_zero_point});
  return attr;
}

// The descriptors of `p` as oneDNN's matmul: src [m, c], weights [c, k] (the problem's [k, c] filter read
// transposed), bias, scales and the scalar [1, k] / [1, 1], dst [m, k], m = n*h*w. Same attributes as the convolution.
absl::Status DescribeMatmul(const QuantizedConv2dProblem& p, float folded, OnednnQuantizedConvDescriptor& d) {
  const memory::dim m = int64_t{p.n} * p.h * p.w;
  d.src = memory::desc({m, p.c}, Int8TypeOf(p.src_type), memory::format_tag::ab);
  d.dst = memory::desc({m, p.k}, Int8TypeOf(p.dst_type), memory::format_tag::ab);
  d.user_weights = memory::desc({p.c, p.k}, memory::data_type::s8, memory::format_tag::ba);
  d.scales = memory::desc({1, p.k}, memory::data_type::f32, memory::format_tag::ab);
  d.scalar = memory::desc({1, 1}, memory::data_type::f32, memory::format_tag::ab);
  if (p.epilogue.has_bias || FoldsSourceZeroPoint(p)) {
    d.bias = memory::desc({1, p.k}, memory::data_type::s32, memory::format_tag::ab);
  }
  const memory::desc weights_any({p.c, p.k}, memory::data_type::s8, memory::format_tag::any);
  dnnl::matmul::desc desc(d.src, weights_any, d.bias, d.dst);
  d.matmul_pd = dnnl::matmul::primitive_desc(desc, MakeQuantizedAttr(p, folded, d), onednn::Engine(),
                                             /*allow_empty=*/true);
  if (!d.matmul_pd) {
    return absl::UnimplementedError(absl::StrCat("oneDNN ", onednn::Version(), " has no INT8 matmul for ",
                                                 p.ToString()));
  }
  CONVOY_RETURN_IF_ERROR(onednn::CheckPrimitiveCreates<dnnl::matmul>(d.matmul_pd));
  d.impl = d.matmul_pd.impl_info_str();
  return absl::OkStatus();
}

// `prefix`: take the first implementation whose name starts with it (empty: oneDNN's first choice); one that is
// oneDNN's first choice anyway is declined (the default algorithm runs it). `as_matmul`: the matmul form instead.
absl::StatusOr<std::shared_ptr<const OnednnQuantizedConvDescriptor>> MakeDescriptor(const QuantizedConv2dProblem& p,
                                                                                    const std::string& prefix,
                                                                                    bool as_matmul, float folded) {
  auto d = std::make_shared<OnednnQuantizedConvDescriptor>();
  if (as_matmul) {
    if (!IsPlainGemm(p)) {
      return absl::UnimplementedError(
          absl::StrCat("the matmul form takes 1x1, stride-1, unpadded, ungrouped NHWC convolutions, not ", p.ToString()));
    }
    try {
      CONVOY_RETURN_IF_ERROR(DescribeMatmul(p, folded, *d));
    } catch (const dnnl::error& error) {
      return onednn::FromError(error, p.ToString());
    }
    return std::shared_ptr<const OnednnQuantizedConvDescriptor>(std::move(d));
  }
  d->src = ImageDesc(p.src_type, p.n, p.c, p.h, p.w, p.layout);
  d->dst = ImageDesc(p.dst_type, p.n, p.k, p.p(), p.q(), p.layout);
  d->user_weights = UserWeightsDesc(p);
  d->scales = memory::desc({1, p.k, 1, 1}, memory::data_type::f32, memory::format_tag::abcd);
  d->scalar = memory::desc({1, 1, 1, 1}, memory::data_type::f32, memory::format_tag::abcd);
  if (p.epilogue.has_bias || FoldsSourceZeroPoint(p)) {
    d->bias = memory::desc({p.k}, memory::data_type::s32, memory::format_tag::a);
  }
  try {
    const memory::desc weights_any(d->user_weights.dims(), memory::data_type::s8, memory::format_tag::any);
    dnnl::convolution_forward::desc desc(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, d->src, weights_any, d->bias, d->dst,
        {p.stride_h, p.stride_w}, {p.dilation_h - 1, p.dilation_w - 1}, {p.pad_top, p.pad_left},
        {p.pad_bottom, p.pad_right});
    d->conv_pd = dnnl::convolution_forward::primitive_desc(desc, MakeQuantizedAttr(p, folded, *d), onednn::Engine(),
                                                      /*allow_empty=*/true);
    if (!d->conv_pd) {
      return absl::UnimplementedError(absl::StrCat("oneDNN ", onednn::Version(), " has no INT8 convolution for ",
                                                   p.ToString()));
    }
    if (!prefix.empty() && absl::StartsWith(d->conv_pd.impl_info_str(), prefix)) {
      return absl::UnimplementedError(absl::StrCat("oneDNN's first choice for ", p.ToString(), " is ",
                                                   d->conv_pd.impl_info_str(), " already"));
    }
    // As conv2d_onednn: walk past an implementation whose primitive cannot be created (and past those not named
    // `prefix`).
    std::vector<std::string> skipped;
    while (true) {
      const std::string impl = d->conv_pd.impl_info_str();
      const absl::Status created = absl::StartsWith(impl, prefix)
                                       ? onednn::CheckPrimitiveCreates<dnnl::convolution_forward>(d->conv_pd)
                                       : absl::UnimplementedError(absl::StrCat("not ", prefix));
      if (created.ok()) break;
      skipped.push_back(absl::StrCat(impl, " (", created.message(), ")"));
      if (!d->conv_pd.next_impl()) {
        return absl::UnimplementedError(absl::StrCat("oneDNN ", onednn::Version(), " has no usable INT8 convolution for ",
                                                     p.ToString(), "; skipped ", absl::StrJoin(skipped, ", ")));
      }
    }
    d->impl = d->conv_pd.impl_info_str();
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, p.ToString());
  }
  return std::shared_ptr<const OnednnQuantizedConvDescriptor>(std::move(d));
}

}  // namespace

absl::string_view QuantizedConv2dOnednnNhwc::name() const { return "cpu.quantized_conv2d.onednn_nhwc"; }

absl::StatusOr<std::shared_ptr<const OnednnQuantizedConvDescriptor>> QuantizedConv2dOnednnNhwc::Describe(
    const QuantizedConv2dProblem& problem) const {
  return descriptors_.Get(problem, [this](const QuantizedConv2dProblem& p) {
    return MakeDescriptor(p, implementation_prefix_, as_matmul_,
                          p.fused_add == QuantizedFusedAdd::kNone ? NAN : FusedAddFormCached(p).folded);
  });
}

absl::Status QuantizedConv2dOnednnNhwc::CanImplement(const QuantizedConv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  CONVOY_RETURN_IF_ERROR(onednn::CheckExactInt8Products());
  if (problem.layout != Layout::kNHWC) return absl::UnimplementedError(absl::StrCat(name(), " takes NHWC only"));
  if (problem.fused_add != QuantizedFusedAdd::kNone) {
    const FusedAddForm form = FusedAddFormCached(problem);
    if (std::isnan(form.folded)) CONVOY_RETURN_IF_ERROR(form.unfolded);
  }
  CONVOY_ASSIGN_OR_RETURN(auto descriptor, Describe(problem));
  return onednn::RejectReferenceImplementation(descriptor->impl, name());
}

QuantizedConv2dOnednnNhwc::FusedAddForm QuantizedConv2dOnednnNhwc::FusedAddFormCached(
    const QuantizedConv2dProblem& problem) const {
  std::pair<QuantizedAddProblem, QuantizedFusedAdd> key(problem.add, problem.fused_add);
  key.first.count = 1;  // the forms depend on the quantization alone
  {
    convoy::MutexLock lock(&forms_mu_);
    if (auto it = fused_add_forms_.find(key); it != fused_add_forms_.end()) return it->second;
  }
  FusedAddForm form;
  form.folded = FoldConvZeroPoint(problem);
  if (std::isnan(form.folded) && problem.fused_add == QuantizedFusedAdd::kConvIsA) {
    form.unfolded = ExactConvFirstOrder(problem);
  }
  convoy::MutexLock lock(&forms_mu_);
  return fused_add_forms_.emplace(key, std::move(form)).first->second;
}

std::string QuantizedConv2dOnednnNhwc::LaunchSummary(const QuantizedConv2dProblem& problem) const {
  std::string summary = onednn::ImplementationSummary(Describe(problem));
  if (FoldsSourceZeroPoint(problem)) absl::StrAppend(&summary, ", source zero point in the bias");
  if (problem.fused_add == QuantizedFusedAdd::kNone) return summary;
  return absl::StrCat(summary, FoldsConvZeroPoint(problem) ? ", add with the conv's zero point folded"
                                                           : ", add with the conv's zero point as a binary post-op");
}

absl::StatusOr<std::string> QuantizedConv2dOnednnNhwc::Implementation(const QuantizedConv2dProblem& problem) const {
  CONVOY_ASSIGN_OR_RETURN(auto descriptor, Describe(problem));
  return descriptor->impl;
}

size_t QuantizedConv2dOnednnNhwc::WorkspaceBytes(const QuantizedConv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  if (!descriptor.ok()) return 0;
  if (!FoldsSourceZeroPoint(problem)) return (*descriptor)->pd().scratchpad_desc().get_size();
  return AdjustedBiasOffset(**descriptor) + sizeof(int32_t) * problem.k;
}

size_t QuantizedConv2dOnednnNhwc::PackedFilterBytes(const QuantizedConv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  if (!descriptor.ok()) return 0;
  if (!FoldsSourceZeroPoint(problem)) return (*descriptor)->pd().weights_desc().get_size();
  return CompensationOffset(**descriptor) + sizeof(int32_t) * problem.k;
}

std::string QuantizedConv2dOnednnNhwc::PackedFilterLayout(const QuantizedConv2dProblem& problem) const {
  auto descriptor = Describe(problem);
  return descriptor.ok() ? onednn::LayoutString((*descriptor)->pd().weights_desc()) : "";
}

absl::Status QuantizedConv2dOnednnNhwc::PackFilter(const QuantizedConv2dProblem& problem, const void* filter,
                                                        void* packed, const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  CONVOY_RETURN_IF_ERROR(onednn::Reorder(d->user_weights, filter, d->pd().weights_desc(), packed, context));
  if (!FoldsSourceZeroPoint(problem)) return absl::OkStatus();
  // -zp * sum_w[k]: output channel k's weights are contiguous in the problem's filter (K-major, whatever the groups).
  const int64_t taps = int64_t{problem.c_per_group()} * problem.r * problem.s;
  const int8_t* w = static_cast<const int8_t*>(filter);
  int32_t* compensation = reinterpret_cast<int32_t*>(static_cast<char*>(packed) + CompensationOffset(*d));
  for (int k = 0; k < problem.k; ++k) {
    int32_t sum = 0;
    for (int64_t i = 0; i < taps; ++i) sum += w[k * taps + i];
    compensation[k] = -problem.epilogue.src_zero_point * sum;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AlgorithmState>> QuantizedConv2dOnednnNhwc::Prepare(
    const QuantizedConv2dProblem& problem, const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  if (d->as_matmul()) return onednn::MakePrimitiveState<dnnl::matmul>(d->matmul_pd, d->impl, context);
  return onednn::MakePrimitiveState<dnnl::convolution_forward>(d->conv_pd, d->impl, context);
}

absl::Status QuantizedConv2dOnednnNhwc::Run(const QuantizedConv2dProblem& problem,
                                                 const QuantizedConv2dArgs& args, Workspace workspace,
                                                 const ExecutionContext& context) const {
  CONVOY_ASSIGN_OR_RETURN(const onednn::PrimitiveState* state, onednn::PreparedState(workspace, name()));
  CONVOY_ASSIGN_OR_RETURN(auto d, Describe(problem));
  const bool residual = problem.epilogue.residual != ResidualMode::kNone || problem.fused_add != QuantizedFusedAdd::kNone;
  if (residual && args.residual != args.y) {
    std::memcpy(args.y, args.residual, d->dst.get_size());  // the sum post-op accumulates onto the destination
  }
  try {
    std::unordered_map<int, memory> run_args = {
        {DNNL_ARG_SRC, onednn::Wrap(d->src, args.x)},
        {DNNL_ARG_WEIGHTS, onednn::Wrap(d->pd().weights_desc(), args.w)},
        {DNNL_ARG_DST, onednn::Wrap(d->dst, args.y)},
    };
    if (problem.epilogue.scales.empty()) {
      run_args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(0) | DNNL_ARG_SRC_1, onednn::Wrap(d->scales, args.scale));
    }
    if (FoldsSourceZeroPoint(problem)) {
      // The bias plus the compensation (both below 2^23 in the models this is for; the sum saturates to INT32).
      const int32_t* compensation =
          reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(args.w) + CompensationOffset(*d));
      int32_t* bias = reinterpret_cast<int32_t*>(static_cast<char*>(workspace.data) + AdjustedBiasOffset(*d));
      for (int k = 0; k < problem.k; ++k) {
        const int64_t sum = int64_t{problem.epilogue.has_bias ? args.bias[k] : 0} + compensation[k];
        bias[k] = static_cast<int32_t>(std::clamp<int64_t>(sum, INT32_MIN, INT32_MAX));
      }
      run_args.emplace(DNNL_ARG_BIAS, onednn::Wrap(d->bias, bias));
    } else if (problem.epilogue.has_bias) {
      run_args.emplace(DNNL_ARG_BIAS, onednn::Wrap(d->bias, args.bias));
    }
    const float conv_zero_point = static_cast<float>(problem.epilogue.dst_zero_point);  // lives through the run
    if (d->conv_zero_point_post_op >= 0) {
      run_args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(d->conv_zero_point_post_op) | DNNL_ARG_SRC_1,
                       onednn::Wrap(d->scalar, &conv_zero_point));
    }
    return onednn::Execute(*state, run_args, workspace, d->pd().scratchpad_desc().get_size(), context);
  } catch (const dnnl::error& error) {
    return onednn::FromError(error, problem.ToString());
  }
}

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedConv2dOnednnNhwc);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedConv2dOnednnNhwcJit);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedConv2dOnednnMatmulNhwc);

}  // namespace convoy::cpu
