// Reference quantized (INT8) conv2d: exact integer accumulation, then the requantization of QuantizedEpilogue, one
// output element at a time. The oracle of every INT8 convolution algorithm.
#include <algorithm>
#include <cmath>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

int64_t FilterOffset(const QuantizedConv2dProblem& p, int k, int c, int r, int s) {
  const int cg = p.c_per_group();
  if (p.layout != Layout::kNHWC) return ((int64_t{k} * cg + c) * p.r + r) * p.s + s;  // [K, C/g, R, S]
  return ((int64_t{k} * p.r + r) * p.s + s) * cg + c;                                 // [K, R, S, C/g]
}

// sum (x - src_zero_point) * w over one group's channels and taps of output (n, k, out_y, out_x); exact.
int64_t Accumulate(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args, const TensorDesc& x_desc, int n,
                   int k, int out_y, int out_x) {
  const int group = k / p.k_per_group();
  int64_t acc = 0;
  for (int c = 0; c < p.c_per_group(); ++c) {
    const int in_c = group * p.c_per_group() + c;
    for (int r = 0; r < p.r; ++r) {
      const int in_y = out_y * p.stride_h - p.pad_top + r * p.dilation_h;
      if (in_y < 0 || in_y >= p.h) continue;  // padding is the real value 0, i.e. the zero point: contributes 0
      for (int s = 0; s < p.s; ++s) {
        const int in_x = out_x * p.stride_w - p.pad_left + s * p.dilation_w;
        if (in_x < 0 || in_x >= p.w) continue;
        const int64_t x = static_cast<int64_t>(LoadAsFloat(args.x, p.src_type, x_desc.Offset4(n, in_c, in_y, in_x)));
        acc += (x - p.epilogue.src_zero_point) * int64_t{args.w[FilterOffset(p, k, c, r, s)]};
      }
    }
  }
  return acc;
}

float Lowest(DataType t) { return t == DataType::kUInt8 ? 0.0f : -128.0f; }
float Highest(DataType t) { return t == DataType::kUInt8 ? 255.0f : 127.0f; }

// onnxruntime's QLinearAdd of one pair of 8-bit values (a, b), saturated to y's type: the definition
// QuantizedAddElementwise computes (quantized_vector_loops.h), two FMAs on the raw values.
float QuantizedAddOf(const QuantizedAddProblem& q, float a, float b) {
  const float ra = q.a_scale / q.y_scale, rb = q.b_scale / q.y_scale;
  const float fixed = static_cast<float>(q.y_zero_point) -
                      std::fmaf(ra, static_cast<float>(q.a_zero_point), rb * static_cast<float>(q.b_zero_point));
  return std::clamp(std::nearbyint(std::fmaf(a, ra, std::fmaf(b, rb, fixed))), Lowest(q.y_type), Highest(q.y_type));
}

}  // namespace

absl::Status QuantizedConv2d(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  const QuantizedEpilogue& e = p.epilogue;
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.x", args.x}, {"args.w", args.w}, {"args.y", args.y}}));
  if (e.scales.empty()) CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.scale", args.scale}}));
  const float* scale = e.scales.empty() ? args.scale : e.scales.data();
  if (e.has_bias) CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.bias (has_bias)", args.bias}}));
  if (e.residual != ResidualMode::kNone || p.fused_add != QuantizedFusedAdd::kNone) {
    CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.residual", args.residual}}));
  }
  const bool conv_is_a = p.fused_add == QuantizedFusedAdd::kConvIsA;
  const DataType residual_type = conv_is_a ? p.add.b_type : p.add.a_type;
  const TensorDesc x_desc = p.input_desc(), y_desc = p.output_desc();
  const bool quantized_out = p.conv_type() != DataType::kFloat32;
  const float qmin = Lowest(p.conv_type()), qmax = Highest(p.conv_type());
  for (int n = 0; n < p.n; ++n) {
    for (int k = 0; k < p.k; ++k) {
      for (int out_y = 0; out_y < p.p(); ++out_y) {
        for (int out_x = 0; out_x < p.q(); ++out_x) {
          const int64_t y_offset = y_desc.Offset4(n, k, out_y, out_x);
          // Read before the store: y may alias the residual.
          const float r = e.residual == ResidualMode::kNone ? 0.0f : LoadAsFloat(args.residual, p.dst_type, y_offset);
          const float add_r =
              p.fused_add == QuantizedFusedAdd::kNone ? 0.0f : LoadAsFloat(args.residual, residual_type, y_offset);
          const int64_t acc = Accumulate(p, args, x_desc, n, k, out_y, out_x) + (e.has_bias ? args.bias[k] : 0);
          float v = static_cast<float>(acc) * scale[k];
          if (e.residual != ResidualMode::kNone) v += e.residual_scale * (r - static_cast<float>(e.residual_zero_point));
          if (e.relu) v = std::max(v, 0.0f);
          if (quantized_out) v = std::clamp(std::nearbyint(v) + static_cast<float>(e.dst_zero_point), qmin, qmax);
          if (p.fused_add != QuantizedFusedAdd::kNone) {
            v = conv_is_a ? QuantizedAddOf(p.add, v, add_r) : QuantizedAddOf(p.add, add_r, v);
          }
          StoreFromFloat(args.y, p.dst_type, y_offset, v);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
