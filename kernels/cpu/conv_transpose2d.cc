#include "kernels/cpu/conv_transpose2d.h"

#include "kernels/cpu/convert_element.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

// Floor division and its remainder test for a possibly negative numerator and a positive divisor.
inline bool DividesExactly(int64_t numerator, int64_t divisor, int64_t& quotient) {
  if (numerator < 0) return false;  // before the input's first row or column
  quotient = numerator / divisor;
  return quotient * divisor == numerator;
}

// The output plane of image n and output channel k ([out_h, out_w]).
template <typename S>
void ConvTransposePlane(const ConvTranspose2dProblem& p, const ConvTranspose2dArgs& args, int64_t n, int64_t k) {
  const auto* x = static_cast<const typename S::T*>(args.x);
  const auto* w = static_cast<const typename S::T*>(args.w);
  auto* y = static_cast<typename S::T*>(args.y);
  const bool nhwc = p.layout == Layout::kNHWC;
  const int64_t c_per_group = p.c / p.groups, k_per_group = p.k / p.groups;
  const int64_t g = k / k_per_group, kk = k % k_per_group;
  for (int64_t oy = 0; oy < p.out_h; ++oy)
    for (int64_t ox = 0; ox < p.out_w; ++ox) {
      float acc = p.has_bias ? args.bias[k] : 0.0f;
      for (int64_t r = 0; r < p.r; ++r) {
        int64_t iy;
        if (!DividesExactly(oy + p.pad_top - r * p.dilation_h, p.stride_h, iy) || iy >= p.h) continue;
        for (int64_t s = 0; s < p.s; ++s) {
          int64_t ix;
          if (!DividesExactly(ox + p.pad_left - s * p.dilation_w, p.stride_w, ix) || ix >= p.w) continue;
          for (int64_t cc = 0; cc < c_per_group; ++cc) {
            const int64_t c = g * c_per_group + cc;
            const int64_t xi = nhwc ? ((n * p.h + iy) * p.w + ix) * p.c + c : ((n * p.c + c) * p.h + iy) * p.w + ix;
            acc += S::Load(x, xi) * S::Load(w, ((c * k_per_group + kk) * p.r + r) * p.s + s);
          }
        }
      }
      const int64_t yi = nhwc ? ((n * p.out_h + oy) * p.out_w + ox) * p.k + k : ((n * p.k + k) * p.out_h + oy) * p.out_w + ox;
      S::Store(y, yi, acc);
    }
}

}  // namespace

absl::Status CpuConvTranspose2dAlgorithm::Run(const ConvTranspose2dProblem& p, const ConvTranspose2dArgs& args,
                                              Workspace, const ExecutionContext& context) const {
  if (absl::Status valid = p.Validate(); !valid.ok()) return valid;
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr || (p.has_bias && args.bias == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(name(), ": ", p.ToString(), ": null x, w or y, or a null bias"));
  }
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    context.thread_pool->ParallelFor(int64_t{p.n} * p.k, [&](int64_t begin, int64_t end) {
      for (int64_t plane = begin; plane < end; ++plane) ConvTransposePlane<S>(p, args, plane / p.k, plane % p.k);
    });
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(ConvTranspose2dOp, CpuConvTranspose2dAlgorithm);

}  // namespace convoy::cpu
