// The tiled-GEMM drivers behind the CPU conv2d algorithms that reduce a convolution to OpenBLAS sgemm calls
// (conv2d_im2col_gemm.cc and conv2d_1x1_gemm.cc). Each splits the output into independent tiles (image, group,
// block of output pixels, block of output channels), and for each tile on one pool thread: builds the FP32 B operand
// (im2col of the tile's receptive fields, or the input rows themselves for a 1x1 conv), runs one single-threaded
// sgemm, and applies the fused epilogue to the tile while it is still in cache.
//
// NCHW: Y_g[K/g, P*Q] = W_g[K/g, C/g*R*S] x col[C/g*R*S, P*Q] per image, tiles over columns (pixels).
// NHWC: Y_g[N*P*Q, K/g] = col[N*P*Q, R*S*C/g] x W_g[K/g, R*S*C/g]^T, tiles over rows (pixels of all images).
//
// FP16/BF16 problems compute in FP32: the filter is converted once (the packed filter), input tiles are converted
// as they are gathered, accumulators go to a scratch tile and are rounded on store.
#ifndef CONVOY_KERNELS_CPU_CONV2D_GEMM_COMMON_H_
#define CONVOY_KERNELS_CPU_CONV2D_GEMM_COMMON_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"

namespace convoy {
namespace cpu {

// How the B operand of each tile is produced.
enum class ConvGemmOperand {
  kIm2col,  // gather receptive fields (any R, S, stride, dilation, padding)
  kDirect,  // 1x1, stride 1, no padding: the input already is the operand
};

// How a problem is cut into tiles. Only the FP32 direct (1x1) plan depends on `threads`, and it needs no scratch, so
// WorkspaceBytes (default pool size) and Run (the pool at hand) always agree on the workspace.
struct ConvGemmTiling {
  int pixel_tile = 0;     // output pixels per tile (columns for NCHW, rows for NHWC)
  int64_t pixel_blocks = 0;
  int channel_tile = 0;   // output channels (of one group) per tile
  int channel_blocks = 0;
  int64_t tiles = 0;      // total independent tiles
  size_t scratch_floats = 0;  // per-thread scratch
};

// FP32 kDirect: each (image, group) is one big sgemm, cut into exactly `threads` pieces unless the (image, group)
// count already is a multiple of `threads` (single-threaded OpenBLAS is only fast on long GEMMs): over output
// channels when the image has fewer than twice as many pixels as the group has channels, else over pixels.
// Everything else: L2-sized pixel tiles, split over output channels until every thread has about two tiles.
ConvGemmTiling PlanConvGemmTiling(const Conv2dProblem& problem, ConvGemmOperand operand, int threads);

// Workspace for Run: ScratchSlotCount() slots of the tiling's scratch (0 when no tile needs scratch).
size_t ConvGemmWorkspaceBytes(const Conv2dProblem& problem, ConvGemmOperand operand);

// Packed filter of reduced-precision problems: the filter as FP32, same layout. 0 for FP32 problems.
size_t ConvGemmPackedFilterBytes(const Conv2dProblem& problem);

// Runs the convolution. args.w is FP32 (the raw filter of an FP32 problem or the packed one otherwise).
absl::Status RunConvGemm(const Conv2dProblem& problem, const Conv2dArgs& args, ConvGemmOperand operand,
                         Workspace workspace, const ExecutionContext& context);

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_CONV2D_GEMM_COMMON_H_
