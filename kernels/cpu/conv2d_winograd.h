// CPU Winograd conv2d for 3x3, stride 1, dilation 1, groups 1, NCHW (any padding), FP32 transforms:
//
//   "cpu.conv2d.winograd_f2x2_3x3_nchw"  F(2x2, 3x3): 4x4 transform tiles, 2.25x fewer multiplies than direct;
//   "cpu.conv2d.winograd_f4x4_3x3_nchw"  F(4x4, 3x3): 6x6 transform tiles, 4x fewer, slightly larger rounding error.
//
// PackFilter transforms the filter once into U[alpha*alpha][K][C] (U = G g G^T). Run cuts the N*tiles output tiles
// into chunks that fit the workspace and for each chunk runs three parallel phases on the pool: input transform
// (V[xi][C][T] = B^T d B), alpha*alpha independent OpenBLAS GEMMs M[xi] = U[xi] x V[xi] split across threads, then
// the output transform (Y = A^T m A) with the fused epilogue applied to each finished tile row before its store.
// FP16/BF16 problems read and write through FP32 conversions; everything in between is FP32.
#ifndef CONVOY_KERNELS_CPU_CONV2D_WINOGRAD_H_
#define CONVOY_KERNELS_CPU_CONV2D_WINOGRAD_H_

#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

// kTile: output tile edge (2 or 4).
template <int kTile>
class Conv2dWinograd final : public Conv2dAlgorithm {
 public:
  static constexpr int kAlpha = kTile + 2;  // transform tile edge
  // Floats of the per-chunk transform buffers V and M together (the workspace). The default, 8 MB, lets the GEMMs
  // have a few hundred tile columns on mid-sized layers; tests pass a small value to exercise many chunks.
  static constexpr int64_t kDefaultChunkFloats = 2 * 1024 * 1024;
  explicit Conv2dWinograd(int64_t chunk_floats = kDefaultChunkFloats) : chunk_floats_(chunk_floats) {}
  absl::string_view name() const override;
  Backend backend() const override { return Backend::kCpu; }
  absl::Status CanImplement(const Conv2dProblem& problem) const override;
  size_t WorkspaceBytes(const Conv2dProblem& problem) const override;
  size_t PackedFilterBytes(const Conv2dProblem& problem) const override;
  absl::Status PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                          const ExecutionContext& context) const override;
  absl::Status Run(const Conv2dProblem& problem, const Conv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override;
  // Above im2col when the GEMMs have enough channels to amortise the transforms.
  int HeuristicScore(const Conv2dProblem& problem) const override;

 private:
  int64_t chunk_floats_;
};

using Conv2dWinogradF2x2 = Conv2dWinograd<2>;
using Conv2dWinogradF4x4 = Conv2dWinograd<4>;

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_WINOGRAD_H_
