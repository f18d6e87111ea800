// Reference spatial resize: one output element at a time, the separable weighted sum over the taps of both axes
// accumulated in double and normalised by the product of the two weight sums (resize_sampling.h picks the taps).
#include "kernels/common/resize_sampling.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// One axis of one output coordinate: the source indices and their weights (normalised), or a single index.
struct AxisSamples {
  bool extrapolates = false;
  std::vector<int> index;
  std::vector<double> weight;
};

AxisSamples Sample(const ResizeAxis& a, int o) {
  AxisSamples s;
  const float x = ResizeSourceCoordinate(a, o);
  if (ResizeExtrapolates(a, x)) {
    s.extrapolates = true;
    return s;
  }
  if (a.mode == ResizeMode::kNearest) {
    s.index.push_back(ResizeNearestIndex(a, x));
    s.weight.push_back(1.0);
    return s;
  }
  const ResizeTaps taps = ResizeTapsOf(a, x);
  double sum = 0.0;
  for (int t = 0; t < taps.count; ++t) {
    s.index.push_back(ResizeTapIndex(a, taps, t));
    s.weight.push_back(ResizeTapWeight(a, taps, t));
    sum += s.weight.back();
  }
  for (double& w : s.weight) w = sum != 0.0 ? w / sum : 0.0;
  return s;
}

}  // namespace

absl::Status Resize(const ResizeProblem& p, const ResizeArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const TensorDesc x_desc = TensorDesc::Image(p.dtype, p.n, p.c, p.h, p.w, p.layout);
  const TensorDesc y_desc = TensorDesc::Image(p.dtype, p.n, p.c, p.out_h, p.out_w, p.layout);
  for (int oy = 0; oy < p.out_h; ++oy) {
    const AxisSamples sy = Sample(ResizeAxisH(p), oy);
    for (int ox = 0; ox < p.out_w; ++ox) {
      const AxisSamples sx = Sample(ResizeAxisW(p), ox);
      for (int n = 0; n < p.n; ++n)
        for (int c = 0; c < p.c; ++c) {
          double acc = 0.0;
          if (sy.extrapolates || sx.extrapolates) {
            acc = p.extrapolation_value;
          } else {
            for (size_t i = 0; i < sy.index.size(); ++i)
              for (size_t j = 0; j < sx.index.size(); ++j) {
                acc += sy.weight[i] * sx.weight[j] *
                       LoadAsFloat(args.x, p.dtype, x_desc.Offset4(n, c, sy.index[i], sx.index[j]));
              }
          }
          StoreFromFloat(args.y, p.dtype, y_desc.Offset4(n, c, oy, ox), static_cast<float>(acc));
        }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
