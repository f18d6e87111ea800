// Reference layer normalization along the middle axis of a dense [outer, axis, inner] tensor: mean and variance in
// double (two passes), y = (x - mean) / sqrt(variance + epsilon) * scale + bias.
#include <cmath>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status LayerNorm(const LayerNormProblem& p, const LayerNormArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  CONVOY_RETURN_IF_ERROR(
      internal::CheckNotNull(name, {{"args.x", args.x}, {"args.scale", args.scale}, {"args.y", args.y}}));
  if (p.has_bias) CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.bias (has_bias)", args.bias}}));
  if (p.write_stats) {
    CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(
        name, {{"args.mean (write_stats)", args.mean}, {"args.inv_std_dev (write_stats)", args.inv_std_dev}}));
  }
  for (int64_t o = 0; o < p.outer; ++o) {
    for (int64_t i = 0; i < p.inner; ++i) {
      const int64_t base = o * p.axis * p.inner + i;  // element (o, 0, i); the axis has stride `inner`
      double sum = 0.0;
      for (int64_t a = 0; a < p.axis; ++a) sum += LoadAsFloat(args.x, p.dtype, base + a * p.inner);
      const double mean = sum / static_cast<double>(p.axis);
      double squares = 0.0;
      for (int64_t a = 0; a < p.axis; ++a) {
        const double d = LoadAsFloat(args.x, p.dtype, base + a * p.inner) - mean;
        squares += d * d;
      }
      const double inv_std_dev = 1.0 / std::sqrt(squares / static_cast<double>(p.axis) + p.epsilon);
      for (int64_t a = 0; a < p.axis; ++a) {
        double v = (LoadAsFloat(args.x, p.dtype, base + a * p.inner) - mean) * inv_std_dev * args.scale[a];
        if (p.has_bias) v += args.bias[a];
        StoreFromFloat(args.y, p.dtype, base + a * p.inner, static_cast<float>(v));
      }
      if (p.write_stats) {
        StoreFromFloat(args.mean, p.dtype, o * p.inner + i, static_cast<float>(mean));
        StoreFromFloat(args.inv_std_dev, p.dtype, o * p.inner + i, static_cast<float>(inv_std_dev));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
