#include "kernels/testing/op_case_traits.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace convoy::testing {
namespace {

constexpr Tolerance kExact{0.0, 0.0};

int64_t Image(int n, int c, int h, int w) { return int64_t{n} * c * h * w; }

// Inputs shared by conv2d and GEMM: data, weight, then the FP32 per-channel bias/scale and the residual.
std::vector<BufferSpec> WithEpilogueOperands(std::vector<BufferSpec> specs, const Epilogue& e, DataType dtype,
                                             int channels, int64_t output_elements) {
  specs.push_back({"bias", DataType::kFloat32, e.has_bias ? channels : 0});
  specs.push_back({"scale", DataType::kFloat32, e.has_scale ? channels : 0, 0.5f, 1.5f});
  specs.push_back({"residual", dtype, e.residual != ResidualMode::kNone ? output_elements : 0});
  return specs;
}

}  // namespace

// ---- conv2d ----
std::vector<BufferSpec> OpCaseTraits<Conv2dProblem>::Inputs(const Conv2dProblem& p) {
  return WithEpilogueOperands({{"x", p.dtype, p.input_desc().num_elements()}, {"w", p.dtype, p.filter_elements()}},
                              p.epilogue, p.dtype, p.k, p.output_desc().num_elements());
}
std::vector<BufferSpec> OpCaseTraits<Conv2dProblem>::Outputs(const Conv2dProblem& p) {
  return {{"y", p.dtype, p.output_desc().num_elements()}};
}
Conv2dArgs OpCaseTraits<Conv2dProblem>::MakeArgs(const Conv2dProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return Conv2dArgs{in[0], in[1], static_cast<const float*>(in[2]), static_cast<const float*>(in[3]), in[4], out[0]};
}
Tolerance OpCaseTraits<Conv2dProblem>::TolerancePerOutput(const Conv2dProblem& p) {
  return ToleranceFor(p.dtype, double{1.0} * p.c_per_group() * p.r * p.s, p.allow_tf32);
}

// ---- gemm ----
std::vector<BufferSpec> OpCaseTraits<GemmProblem>::Inputs(const GemmProblem& p) {
  return WithEpilogueOperands({{"a", p.dtype, int64_t{p.m} * p.k}, {"b", p.dtype, int64_t{p.n} * p.k}}, p.epilogue,
                              p.dtype, p.n, int64_t{p.m} * p.n);
}
std::vector<BufferSpec> OpCaseTraits<GemmProblem>::Outputs(const GemmProblem& p) {
  return {{"y", p.dtype, int64_t{p.m} * p.n}};
}
GemmArgs OpCaseTraits<GemmProblem>::MakeArgs(const GemmProblem&, const std::vector<void*>& in,
                                             const std::vector<void*>& out) {
  return GemmArgs{in[0], in[1], static_cast<const float*>(in[2]), static_cast<const float*>(in[3]), in[4], out[0]};
}
Tolerance OpCaseTraits<GemmProblem>::TolerancePerOutput(const GemmProblem& p) {
  return ToleranceFor(p.dtype, p.k, p.allow_tf32);
}

// ---- pool2d ----
std::vector<BufferSpec> OpCaseTraits<Pool2dProblem>::Inputs(const Pool2dProblem& p) {
  return {{"x", p.dtype, p.input_desc().num_elements()}};
}
std::vector<BufferSpec> OpCaseTraits<Pool2dProblem>::Outputs(const Pool2dProblem& p) {
  return {{"y", p.dtype, p.output_desc().num_elements()}};
}
Pool2dArgs OpCaseTraits<Pool2dProblem>::MakeArgs(const Pool2dProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return Pool2dArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<Pool2dProblem>::TolerancePerOutput(const Pool2dProblem& p) {
  const bool global = p.mode == PoolMode::kGlobalAverage || p.mode == PoolMode::kGlobalMax;
  return ToleranceFor(p.dtype, global ? double{1.0} * p.h * p.w : double{1.0} * p.r * p.s);
}

// ---- batch norm ----
std::vector<BufferSpec> OpCaseTraits<BatchNormProblem>::Inputs(const BatchNormProblem& p) {
  return {{"x", p.dtype, p.desc().num_elements(), -3.0f, 3.0f},
          {"gamma", DataType::kFloat32, p.c, 0.5f, 1.5f},
          {"beta", DataType::kFloat32, p.c},
          {"mean", DataType::kFloat32, p.c},
          {"var", DataType::kFloat32, p.c, 0.1f, 2.0f}};
}
std::vector<BufferSpec> OpCaseTraits<BatchNormProblem>::Outputs(const BatchNormProblem& p) {
  return {{"y", p.dtype, p.desc().num_elements()}};
}
BatchNormArgs OpCaseTraits<BatchNormProblem>::MakeArgs(const BatchNormProblem&, const std::vector<void*>& in,
                                                       const std::vector<void*>& out) {
  return BatchNormArgs{in[0], static_cast<const float*>(in[1]), static_cast<const float*>(in[2]),
                       static_cast<const float*>(in[3]), static_cast<const float*>(in[4]), out[0]};
}
Tolerance OpCaseTraits<BatchNormProblem>::TolerancePerOutput(const BatchNormProblem& p) {
  return ToleranceFor(p.dtype, 4);
}

// ---- activation ----
std::vector<BufferSpec> OpCaseTraits<ActivationProblem>::Inputs(const ActivationProblem& p) {
  return {{"x", p.dtype, p.count, -6.0f, 6.0f}};
}
std::vector<BufferSpec> OpCaseTraits<ActivationProblem>::Outputs(const ActivationProblem& p) {
  return {{"y", p.dtype, p.count}};
}
ActivationArgs OpCaseTraits<ActivationProblem>::MakeArgs(const ActivationProblem&, const std::vector<void*>& in,
                                                         const std::vector<void*>& out) {
  return ActivationArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<ActivationProblem>::TolerancePerOutput(const ActivationProblem& p) {
  return ToleranceFor(p.dtype, 1);
}

// ---- binary ----
std::vector<BufferSpec> OpCaseTraits<BinaryProblem>::Inputs(const BinaryProblem& p) {
  // Divisors stay away from zero so the quotient's rounding is comparable.
  const bool div = p.op == BinaryOp::kDiv;
  return {{"a", p.dtype, p.desc().num_elements()}, {"b", p.dtype, p.b_elements(), div ? 0.5f : -1.0f, div ? 2.0f : 1.0f}};
}
std::vector<BufferSpec> OpCaseTraits<BinaryProblem>::Outputs(const BinaryProblem& p) {
  return {{"y", p.dtype, p.desc().num_elements()}};
}
BinaryArgs OpCaseTraits<BinaryProblem>::MakeArgs(const BinaryProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return BinaryArgs{in[0], in[1], out[0]};
}
Tolerance OpCaseTraits<BinaryProblem>::TolerancePerOutput(const BinaryProblem& p) { return ToleranceFor(p.dtype, 1); }

// ---- concat ----
std::vector<BufferSpec> OpCaseTraits<ConcatProblem>::Inputs(const ConcatProblem& p) {
  std::vector<BufferSpec> specs;
  for (size_t i = 0; i < p.channels.size(); ++i) {
    specs.push_back({absl::StrCat("input", i), p.dtype, Image(p.n, p.channels[i], p.h, p.w)});
  }
  return specs;
}
std::vector<BufferSpec> OpCaseTraits<ConcatProblem>::Outputs(const ConcatProblem& p) {
  return {{"y", p.dtype, Image(p.n, p.total_channels(), p.h, p.w)}};
}
ConcatArgs OpCaseTraits<ConcatProblem>::MakeArgs(const ConcatProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return ConcatArgs{std::vector<const void*>(in.begin(), in.end()), out[0]};
}
Tolerance OpCaseTraits<ConcatProblem>::TolerancePerOutput(const ConcatProblem&) { return kExact; }

// ---- split ----
std::vector<BufferSpec> OpCaseTraits<SplitProblem>::Inputs(const SplitProblem& p) {
  return {{"x", p.dtype, Image(p.n, p.total_channels(), p.h, p.w)}};
}
std::vector<BufferSpec> OpCaseTraits<SplitProblem>::Outputs(const SplitProblem& p) {
  std::vector<BufferSpec> specs;
  for (size_t i = 0; i < p.channels.size(); ++i) {
    specs.push_back({absl::StrCat("output", i), p.dtype, Image(p.n, p.channels[i], p.h, p.w)});
  }
  return specs;
}
SplitArgs OpCaseTraits<SplitProblem>::MakeArgs(const SplitProblem&, const std::vector<void*>& in,
                                               const std::vector<void*>& out) {
  return SplitArgs{in[0], out};
}
Tolerance OpCaseTraits<SplitProblem>::TolerancePerOutput(const SplitProblem&) { return kExact; }

// ---- channel shuffle ----
std::vector<BufferSpec> OpCaseTraits<ChannelShuffleProblem>::Inputs(const ChannelShuffleProblem& p) {
  return {{"x", p.dtype, Image(p.n, p.c, p.h, p.w)}};
}
std::vector<BufferSpec> OpCaseTraits<ChannelShuffleProblem>::Outputs(const ChannelShuffleProblem& p) {
  return {{"y", p.dtype, Image(p.n, p.c, p.h, p.w)}};
}
ChannelShuffleArgs OpCaseTraits<ChannelShuffleProblem>::MakeArgs(const ChannelShuffleProblem&,
                                                                 const std::vector<void*>& in,
                                                                 const std::vector<void*>& out) {
  return ChannelShuffleArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<ChannelShuffleProblem>::TolerancePerOutput(const ChannelShuffleProblem&) { return kExact; }

// ---- softmax ----
std::vector<BufferSpec> OpCaseTraits<SoftmaxProblem>::Inputs(const SoftmaxProblem& p) {
  return {{"x", p.dtype, p.outer * p.axis * p.inner, -8.0f, 8.0f}};
}
std::vector<BufferSpec> OpCaseTraits<SoftmaxProblem>::Outputs(const SoftmaxProblem& p) {
  return {{"y", p.dtype, p.outer * p.axis * p.inner}};
}
SoftmaxArgs OpCaseTraits<SoftmaxProblem>::MakeArgs(const SoftmaxProblem&, const std::vector<void*>& in,
                                                   const std::vector<void*>& out) {
  return SoftmaxArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<SoftmaxProblem>::TolerancePerOutput(const SoftmaxProblem& p) {
  // Outputs are probabilities in [0, 1]: the absolute floor is relative to the largest (1), not to sqrt(axis).
  return ToleranceFor(p.dtype, 1);
}

// ---- pad ----
std::vector<BufferSpec> OpCaseTraits<PadProblem>::Inputs(const PadProblem& p) {
  return {{"x", p.dtype, Image(p.n, p.c, p.h, p.w)}};
}
std::vector<BufferSpec> OpCaseTraits<PadProblem>::Outputs(const PadProblem& p) {
  return {{"y", p.dtype, Image(p.n, p.c, p.out_h(), p.out_w())}};
}
PadArgs OpCaseTraits<PadProblem>::MakeArgs(const PadProblem&, const std::vector<void*>& in,
                                           const std::vector<void*>& out) {
  return PadArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<PadProblem>::TolerancePerOutput(const PadProblem&) { return kExact; }

// ---- convert ----
std::vector<BufferSpec> OpCaseTraits<ConvertProblem>::Inputs(const ConvertProblem& p) {
  return {{"x", p.src_dtype, Image(p.n, p.c, p.h, p.w), -100.0f, 100.0f}};
}
std::vector<BufferSpec> OpCaseTraits<ConvertProblem>::Outputs(const ConvertProblem& p) {
  return {{"y", p.dst_dtype, Image(p.n, p.output_c(), p.h, p.w)}};
}
ConvertArgs OpCaseTraits<ConvertProblem>::MakeArgs(const ConvertProblem&, const std::vector<void*>& in,
                                                   const std::vector<void*>& out) {
  return ConvertArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<ConvertProblem>::TolerancePerOutput(const ConvertProblem&) { return kExact; }

// ---- preprocess ----
std::vector<BufferSpec> OpCaseTraits<PreprocessProblem>::Inputs(const PreprocessProblem& p) {
  return {{"x", DataType::kUInt8, Image(p.n, p.c, p.h, p.w)}};
}
std::vector<BufferSpec> OpCaseTraits<PreprocessProblem>::Outputs(const PreprocessProblem& p) {
  return {{"y", p.dst_dtype, Image(p.n, p.output_c(), p.h, p.w)}};
}
PreprocessArgs OpCaseTraits<PreprocessProblem>::MakeArgs(const PreprocessProblem&, const std::vector<void*>& in,
                                                         const std::vector<void*>& out) {
  return PreprocessArgs{static_cast<const uint8_t*>(in[0]), out[0]};
}
Tolerance OpCaseTraits<PreprocessProblem>::TolerancePerOutput(const PreprocessProblem& p) {
  return ToleranceFor(p.dst_dtype, 1);
}

// ---- transpose ----
std::vector<BufferSpec> OpCaseTraits<TransposeProblem>::Inputs(const TransposeProblem& p) {
  // Integer types get a wide range, so that misplaced elements differ (UINT8 takes all bytes regardless).
  const float range = IsFloatingPoint(p.dtype) ? 1.0f : 1000.0f;
  return {{"x", p.dtype, p.num_elements(), -range, range}};
}
std::vector<BufferSpec> OpCaseTraits<TransposeProblem>::Outputs(const TransposeProblem& p) {
  return {{"y", p.dtype, p.num_elements()}};
}
TransposeArgs OpCaseTraits<TransposeProblem>::MakeArgs(const TransposeProblem&, const std::vector<void*>& in,
                                                       const std::vector<void*>& out) {
  return TransposeArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<TransposeProblem>::TolerancePerOutput(const TransposeProblem&) { return kExact; }

// ---- resize ----
std::vector<BufferSpec> OpCaseTraits<ResizeProblem>::Inputs(const ResizeProblem& p) {
  return {{"x", p.dtype, Image(p.n, p.c, p.h, p.w)}};
}
std::vector<BufferSpec> OpCaseTraits<ResizeProblem>::Outputs(const ResizeProblem& p) {
  return {{"y", p.dtype, Image(p.n, p.c, p.out_h, p.out_w)}};
}
ResizeArgs OpCaseTraits<ResizeProblem>::MakeArgs(const ResizeProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return ResizeArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<ResizeProblem>::TolerancePerOutput(const ResizeProblem& p) {
  // Nearest copies elements; linear and cubic sum weighted taps (cubic weights are partly negative, so the sum of
  // their magnitudes, not the output, bounds the rounding error: 16 terms covers both axes' taps).
  return p.mode == ResizeMode::kNearest ? kExact : ToleranceFor(p.dtype, 16);
}

// ---- argmax ----
std::vector<BufferSpec> OpCaseTraits<ArgMaxProblem>::Inputs(const ArgMaxProblem& p) {
  return {{"x", p.dtype, p.outer * p.axis * p.inner, -4.0f, 4.0f}};
}
std::vector<BufferSpec> OpCaseTraits<ArgMaxProblem>::Outputs(const ArgMaxProblem& p) {
  return {{"y", p.index_dtype, p.outer * p.inner}};
}
ArgMaxArgs OpCaseTraits<ArgMaxProblem>::MakeArgs(const ArgMaxProblem&, const std::vector<void*>& in,
                                                 const std::vector<void*>& out) {
  return ArgMaxArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<ArgMaxProblem>::TolerancePerOutput(const ArgMaxProblem&) { return kExact; }

// ---- layer norm ----
// Inputs with an offset (mean far from 0) so a kernel that skips the centering pass or loses precision shows.
std::vector<BufferSpec> OpCaseTraits<LayerNormProblem>::Inputs(const LayerNormProblem& p) {
  return {{"x", p.dtype, p.outer * p.axis * p.inner, 1.0f, 5.0f},
          {"scale", DataType::kFloat32, p.axis, 0.5f, 1.5f},
          {"bias", DataType::kFloat32, p.has_bias ? p.axis : 0}};
}
std::vector<BufferSpec> OpCaseTraits<LayerNormProblem>::Outputs(const LayerNormProblem& p) {
  const int64_t stats = p.write_stats ? p.outer * p.inner : 0;
  return {{"y", p.dtype, p.outer * p.axis * p.inner}, {"mean", p.dtype, stats}, {"inv_std_dev", p.dtype, stats}};
}
LayerNormArgs OpCaseTraits<LayerNormProblem>::MakeArgs(const LayerNormProblem&, const std::vector<void*>& in,
                                                       const std::vector<void*>& out) {
  return LayerNormArgs{in[0], static_cast<const float*>(in[1]), static_cast<const float*>(in[2]), out[0], out[1],
                       out[2]};
}
Tolerance OpCaseTraits<LayerNormProblem>::TolerancePerOutput(const LayerNormProblem& p) {
  // Normalized outputs are O(1); the mean and variance each sum `axis` terms.
  return ToleranceFor(p.dtype, static_cast<double>(p.axis));
}

// ---- conv transpose 2d ----
std::vector<BufferSpec> OpCaseTraits<ConvTranspose2dProblem>::Inputs(const ConvTranspose2dProblem& p) {
  return {{"x", p.dtype, Image(p.n, p.c, p.h, p.w)},
          {"w", p.dtype, int64_t{p.c} * (p.k / p.groups) * p.r * p.s},
          {"bias", DataType::kFloat32, p.has_bias ? p.k : 0}};
}
std::vector<BufferSpec> OpCaseTraits<ConvTranspose2dProblem>::Outputs(const ConvTranspose2dProblem& p) {
  return {{"y", p.dtype, Image(p.n, p.k, p.out_h, p.out_w)}};
}
ConvTranspose2dArgs OpCaseTraits<ConvTranspose2dProblem>::MakeArgs(const ConvTranspose2dProblem&,
                                                                   const std::vector<void*>& in,
                                                                   const std::vector<void*>& out) {
  return ConvTranspose2dArgs{in[0], in[1], static_cast<const float*>(in[2]), out[0]};
}
Tolerance OpCaseTraits<ConvTranspose2dProblem>::TolerancePerOutput(const ConvTranspose2dProblem& p) {
  // At most C/groups * R * S products per output (fewer where the stride skips taps).
  return ToleranceFor(p.dtype, double{1.0} * (p.c / p.groups) * p.r * p.s);
}

// ---- unary ----
// Log and Sqrt read positive values, Reciprocal values away from 0; the rest [-4, 4) (both sides of every kink).
std::vector<BufferSpec> OpCaseTraits<UnaryProblem>::Inputs(const UnaryProblem& p) {
  const bool positive = p.kind == UnaryKind::kLog || p.kind == UnaryKind::kSqrt || p.kind == UnaryKind::kReciprocal;
  return {{"x", p.dtype, p.count, positive ? 0.25f : -4.0f, 4.0f}};
}
std::vector<BufferSpec> OpCaseTraits<UnaryProblem>::Outputs(const UnaryProblem& p) {
  return {{"y", p.dtype, p.count}};
}
UnaryArgs OpCaseTraits<UnaryProblem>::MakeArgs(const UnaryProblem&, const std::vector<void*>& in,
                                               const std::vector<void*>& out) {
  return UnaryArgs{in[0], out[0]};
}
Tolerance OpCaseTraits<UnaryProblem>::TolerancePerOutput(const UnaryProblem& p) {
  switch (p.kind) {
    case UnaryKind::kAbs:
    case UnaryKind::kNeg:
    case UnaryKind::kFloor:
    case UnaryKind::kCeil:
    case UnaryKind::kRound:
    case UnaryKind::kSign:
      return kExact;
    default: return ToleranceFor(p.dtype, 1);
  }
}

}  // namespace convoy::testing
