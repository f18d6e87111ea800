// CPU max pooling on NHWC tensors; see pool2d_max_nhwc.h.
#include "kernels/cpu/pool2d_max_nhwc.h"

#include <cstdint>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/common/pool_window.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/per_isa_registration.h"
#include "kernels/cpu/pool2d_max_rows.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

const MaxRowKernels& MaxRowKernelsFor(CpuIsa isa) {
  return ForCpuIsa(isa, kMaxRowKernelsBaseline, kMaxRowKernelsAvx2, kMaxRowKernelsAvx512);
}

// Every output pixel of `p` (T: float or the BF16 bits): the window's input pixels inside the image, then their
// maximum over the C channels.
template <typename T, typename Rows>
void PoolPixels(const Pool2dProblem& p, const T* x, T* y, Rows rows, ThreadPool& pool) {
  const int P = p.p(), Q = p.q();
  const int64_t C = p.c;
  pool.ParallelFor(int64_t{p.n} * P * Q, [&](int64_t begin, int64_t end) {
    const T* taps[CpuMaxPoolNhwcAlgorithm::kMaxTaps];
    for (int64_t pixel = begin; pixel < end; ++pixel) {
      const int ox = static_cast<int>(pixel % Q), oy = static_cast<int>(pixel / Q % P);
      const int64_t n = pixel / (int64_t{Q} * P);
      const PoolTaps along_h = PoolTapsAlong(oy * p.stride_h - p.pad_top, p.r, p.dilation_h, p.h, p.pad_bottom);
      const PoolTaps along_w = PoolTapsAlong(ox * p.stride_w - p.pad_left, p.s, p.dilation_w, p.w, p.pad_right);
      int count = 0;
      for (int ty = 0; ty < along_h.count; ++ty) {
        const int64_t iy = along_h.first + ty * p.dilation_h;
        for (int tx = 0; tx < along_w.count; ++tx) {
          const int64_t ix = along_w.first + tx * p.dilation_w;
          taps[count++] = x + ((n * p.h + iy) * p.w + ix) * C;
        }
      }
      rows(taps, count, y + pixel * C, C);
    }
  });
}

}  // namespace

CpuMaxPoolNhwcAlgorithm::CpuMaxPoolNhwcAlgorithm(CpuIsa isa)
    : isa_(isa),
      name_(isa == CpuIsa::kBaseline ? "cpu.pool2d.max_nhwc" : absl::StrCat("cpu.pool2d.max_nhwc_", CpuIsaName(isa))) {}

absl::Status CpuMaxPoolNhwcAlgorithm::CanImplement(const Pool2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.mode != PoolMode::kMax) {
    return absl::UnimplementedError(absl::StrCat(name_, ": windowed max pooling only"));
  }
  if (problem.layout != Layout::kNHWC) return absl::UnimplementedError(absl::StrCat(name_, ": NHWC only"));
  if (problem.dtype != DataType::kFloat32 && problem.dtype != DataType::kBFloat16) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": FP32 and BF16 only, got ", DataTypeName(problem.dtype)));
  }
  if (problem.r * problem.s > kMaxTaps) {
    return absl::UnimplementedError(
        absl::StrCat(name_, ": windows of up to ", kMaxTaps, " taps, got ", problem.r, "x", problem.s));
  }
  return absl::OkStatus();
}

int CpuMaxPoolNhwcAlgorithm::HeuristicScore(const Pool2dProblem&) const {
  switch (isa_) {
    case CpuIsa::kAvx512: return 20;
    case CpuIsa::kAvx2: return 15;
    case CpuIsa::kBaseline: break;
  }
  return 0;
}

absl::Status CpuMaxPoolNhwcAlgorithm::Run(const Pool2dProblem& p, const Pool2dArgs& args, Workspace,
                                          const ExecutionContext& context) const {
  const MaxRowKernels& kernels = MaxRowKernelsFor(isa_);
  if (p.dtype == DataType::kFloat32) {
    PoolPixels(p, static_cast<const float*>(args.x), static_cast<float*>(args.y), kernels.fp32,
               *context.thread_pool);
  } else {
    PoolPixels(p, static_cast<const uint16_t*>(args.x), static_cast<uint16_t*>(args.y), kernels.bf16,
               *context.thread_pool);
  }
  return absl::OkStatus();
}

CONVOY_REGISTER_PER_ISA_ALGORITHM(Pool2dOp, CpuMaxPoolNhwcAlgorithm);

}  // namespace convoy::cpu
