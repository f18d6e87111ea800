// The tiled-GEMM drivers behind the CPU im2col and 1x1 conv2d algorithms; see conv2d_gemm_common.h.
#include "kernels/cpu/conv2d_gemm_common.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/gemm_tile.h"

namespace convoy {
namespace cpu {
namespace {

// Floats of one gathered B tile we aim for: about 1 MB, what one core's L2 holds on current x86 server parts.
constexpr int64_t kOperandTileFloats = 256 * 1024;
constexpr int kMinPixelTile = 16;
constexpr int kMinChannelTile = 16;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Floor division that rounds toward minus infinity for negative numerators.
int64_t FloorDiv(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

// ceil(total / pieces), rounded up to a multiple of 16 (64-byte aligned pieces) when that still leaves `pieces`
// non-empty pieces.
int64_t RoundedPiece(int64_t total, int64_t pieces) {
  const int64_t piece = CeilDiv(total, pieces);
  const int64_t rounded = CeilDiv(piece, 16) * 16;
  return rounded * (pieces - 1) < total ? rounded : piece;
}

int64_t GemmDepth(const Conv2dProblem& p) { return int64_t{p.c_per_group()} * p.r * p.s; }

// Everything a tile needs, resolved once per Run.
struct ConvGemmCall {
  const Conv2dProblem* p;
  const ConvGemmTiling* tiling;
  ConvGemmOperand operand;
  const void* x;
  const float* w;  // FP32 filter
  void* y;
  EpilogueOperands epilogue;
  int64_t pq;      // output pixels per image
  int64_t depth;   // GEMM reduction length
};

// Output-pixel range of column `q` that reads inside the input for filter column s: [lo, hi).
void ValidRange(const Conv2dProblem& p, int s, int64_t* lo, int64_t* hi) {
  const int64_t offset = int64_t{s} * p.dilation_w - p.pad_left;  // iw = q * stride + offset
  *lo = std::max<int64_t>(0, CeilDiv(std::max<int64_t>(0, -offset), p.stride_w));
  *hi = std::min<int64_t>(p.q(), FloorDiv(p.w - 1 - offset, p.stride_w) + 1);
  if (*hi < *lo) *hi = *lo;
}

// col[(c*R + r)*S + s][j - j0] = x[n, g*Cg + c, ih, iw] for output pixels j in [j0, j0 + count) (NCHW).
template <typename LoadFn>
void GatherNchwColumns(const ConvGemmCall& call, int n, int g, int64_t j0, int count, LoadFn load, float* col) {
  const Conv2dProblem& p = *call.p;
  const int q_out = p.q();
  for (int c = 0; c < p.c_per_group(); ++c) {
    const int64_t plane = (int64_t{n} * p.c + int64_t{g} * p.c_per_group() + c) * p.h * p.w;  // x[n, c, :, :]
    for (int r = 0; r < p.r; ++r) {
      for (int s = 0; s < p.s; ++s) {
        float* row = col + ((int64_t{c} * p.r + r) * p.s + s) * count;  // col[crs][0:count]
        int64_t q_lo, q_hi;
        ValidRange(p, s, &q_lo, &q_hi);
        for (int64_t j = j0; j < j0 + count;) {
          const int64_t oh = j / q_out, q0 = j % q_out;
          const int64_t q1 = std::min<int64_t>(q_out, q0 + (j0 + count - j));
          float* out = row + (j - j0) - q0;  // out[q] for q in [q0, q1)
          const int64_t ih = oh * p.stride_h - p.pad_top + int64_t{r} * p.dilation_h;
          const int64_t lo = std::clamp(q_lo, q0, q1), hi = std::clamp(q_hi, lo, q1);
          if (ih < 0 || ih >= p.h) {
            std::fill(out + q0, out + q1, 0.0f);
          } else {
            std::fill(out + q0, out + lo, 0.0f);
            const int64_t base = plane + ih * p.w + int64_t{s} * p.dilation_w - p.pad_left;
            for (int64_t q = lo; q < hi; ++q) out[q] = load(base + q * p.stride_w);
            std::fill(out + hi, out + q1, 0.0f);
          }
          j += q1 - q0;
        }
      }
    }
  }
}

// col[m - m0][(r*S + s)*Cg + c] = x[n, g*Cg + c, ih, iw] for output rows m in [m0, m0 + count) of all images (NHWC).
template <typename LoadFn>
void GatherNhwcRows(const ConvGemmCall& call, int g, int64_t m0, int count, LoadFn load, float* col) {
  const Conv2dProblem& p = *call.p;
  const int cg = p.c_per_group();
  for (int64_t m = m0; m < m0 + count; ++m) {
    const int64_t n = m / call.pq, oh = (m % call.pq) / p.q(), ow = m % p.q();
    float* out = col + (m - m0) * call.depth;
    for (int r = 0; r < p.r; ++r) {
      const int64_t ih = oh * p.stride_h - p.pad_top + int64_t{r} * p.dilation_h;
      for (int s = 0; s < p.s; ++s, out += cg) {
        const int64_t iw = ow * p.stride_w - p.pad_left + int64_t{s} * p.dilation_w;
        if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) {
          std::fill(out, out + cg, 0.0f);
          continue;
        }
        const int64_t base = ((n * p.h + ih) * p.w + iw) * p.c + int64_t{g} * cg;  // x[n, ih, iw, g*Cg]
        for (int c = 0; c < cg; ++c) out[c] = load(base + c);
      }
    }
  }
}

// Calls gather(load) with an element loader specialised for FP32 inputs (the fast path) or any other dtype.
template <typename GatherFn>
void WithLoader(const void* x, DataType dtype, GatherFn gather) {
  if (dtype == DataType::kFloat32) {
    const float* xf = static_cast<const float*>(x);
    gather([xf](int64_t i) { return xf[i]; });
  } else {
    gather([x, dtype](int64_t i) { return LoadAsFloat(x, dtype, static_cast<size_t>(i)); });
  }
}

struct TileIndex {
  int n = 0, g = 0, channel_block = 0;
  int64_t pixel_block = 0;
};

// NCHW tile: output channels [k0, k0 + kt) of group g, pixels [j0, j0 + jt) of image n.
void RunNchwTile(const ConvGemmCall& call, const TileIndex& t, float* scratch) {
  const Conv2dProblem& p = *call.p;
  const int64_t j0 = t.pixel_block * call.tiling->pixel_tile;
  const int jt = static_cast<int>(std::min<int64_t>(call.tiling->pixel_tile, call.pq - j0));
  const int k0 = t.channel_block * call.tiling->channel_tile;
  const int kt = std::min(call.tiling->channel_tile, p.k_per_group() - k0);
  const int first_channel = t.g * p.k_per_group() + k0;
  const bool fp32 = p.dtype == DataType::kFloat32;
  const float* b;  // [depth, jt] with leading dimension ldb
  int ldb = jt;
  if (call.operand == ConvGemmOperand::kDirect && fp32) {
    b = static_cast<const float*>(call.x) + (int64_t{t.n} * p.c + int64_t{t.g} * p.c_per_group()) * call.pq + j0;
    ldb = static_cast<int>(call.pq);
  } else if (call.operand == ConvGemmOperand::kDirect) {
    for (int c = 0; c < p.c_per_group(); ++c) {
      const int64_t row = (int64_t{t.n} * p.c + int64_t{t.g} * p.c_per_group() + c) * call.pq + j0;
      LoadRowAsFloat(call.x, p.dtype, row, jt, scratch + int64_t{c} * jt);
    }
    b = scratch;
  } else {
    WithLoader(call.x, p.dtype, [&](auto load) { GatherNchwColumns(call, t.n, t.g, j0, jt, load, scratch); });
    b = scratch;
  }
  const int64_t y0 = (int64_t{t.n} * p.k + first_channel) * call.pq + j0;  // y[n, first_channel, j0]
  float* acc = fp32 ? static_cast<float*>(call.y) + y0 : scratch + call.depth * jt;
  const int ldc = fp32 ? static_cast<int>(call.pq) : jt;
  SgemmRowMajor(false, false, kt, jt, static_cast<int>(call.depth), call.w + int64_t{first_channel} * call.depth,
                static_cast<int>(call.depth), b, ldb, acc, ldc);
  for (int k = 0; k < kt; ++k) {
    ApplyChannelEpilogue(call.epilogue, first_channel + k, acc + int64_t{k} * ldc, jt, call.y, y0 + k * call.pq);
  }
}

// NHWC tile: output channels [k0, k0 + kt) of group g, output rows [m0, m0 + mt) counted over all images.
void RunNhwcTile(const ConvGemmCall& call, const TileIndex& t, float* scratch) {
  const Conv2dProblem& p = *call.p;
  const int64_t rows = int64_t{p.n} * call.pq;
  const int64_t m0 = t.pixel_block * call.tiling->pixel_tile;
  const int mt = static_cast<int>(std::min<int64_t>(call.tiling->pixel_tile, rows - m0));
  const int k0 = t.channel_block * call.tiling->channel_tile;
  const int kt = std::min(call.tiling->channel_tile, p.k_per_group() - k0);
  const int first_channel = t.g * p.k_per_group() + k0;
  const bool fp32 = p.dtype == DataType::kFloat32;
  const float* a;  // [mt, depth] with leading dimension lda
  int lda = static_cast<int>(call.depth);
  if (call.operand == ConvGemmOperand::kDirect && fp32) {
    a = static_cast<const float*>(call.x) + m0 * p.c + int64_t{t.g} * p.c_per_group();
    lda = p.c;
  } else if (call.operand == ConvGemmOperand::kDirect) {
    for (int m = 0; m < mt; ++m) {
      LoadRowAsFloat(call.x, p.dtype, (m0 + m) * p.c + int64_t{t.g} * p.c_per_group(), p.c_per_group(),
                     scratch + int64_t{m} * call.depth);
    }
    a = scratch;
  } else {
    WithLoader(call.x, p.dtype, [&](auto load) { GatherNhwcRows(call, t.g, m0, mt, load, scratch); });
    a = scratch;
  }
  const int64_t y0 = m0 * p.k + first_channel;  // y[m0, first_channel]
  float* acc = fp32 ? static_cast<float*>(call.y) + y0 : scratch + call.depth * mt;
  const int ldc = fp32 ? p.k : kt;
  SgemmRowMajor(false, true, mt, kt, static_cast<int>(call.depth), a, lda,
                call.w + int64_t{first_channel} * call.depth, static_cast<int>(call.depth), acc, ldc);
  for (int m = 0; m < mt; ++m) {
    ApplyPixelEpilogue(call.epilogue, first_channel, acc + int64_t{m} * ldc, kt, call.y, y0 + int64_t{m} * p.k);
  }
}

TileIndex DecodeTile(const Conv2dProblem& p, const ConvGemmTiling& tiling, int64_t tile) {
  TileIndex t;
  t.channel_block = static_cast<int>(tile % tiling.channel_blocks);
  tile /= tiling.channel_blocks;
  t.g = static_cast<int>(tile % p.groups);
  tile /= p.groups;
  if (p.layout == Layout::kNCHW) {
    t.pixel_block = tile % tiling.pixel_blocks;
    t.n = static_cast<int>(tile / tiling.pixel_blocks);
  } else {
    t.pixel_block = tile;  // NHWC pixel blocks already span the images
  }
  return t;
}

}  // namespace

ConvGemmTiling PlanConvGemmTiling(const Conv2dProblem& p, ConvGemmOperand operand, int threads) {
  ConvGemmTiling t;
  const int64_t depth = GemmDepth(p);
  const int64_t pixels = p.layout == Layout::kNCHW ? int64_t{p.p()} * p.q() : int64_t{p.n} * p.p() * p.q();
  const int64_t images = p.layout == Layout::kNCHW ? p.n : 1;
  if (operand == ConvGemmOperand::kDirect && p.dtype == DataType::kFloat32) {
    const int64_t units = images * p.groups;
    const int64_t pieces = units % std::max(1, threads) == 0 ? 1 : std::max(1, threads);
    t.pixel_blocks = 1;
    t.pixel_tile = static_cast<int>(pixels);
    t.channel_blocks = 1;
    t.channel_tile = p.k_per_group();
    if (pieces > 1 && pixels < 2 * int64_t{p.k_per_group()}) {
      t.channel_tile = static_cast<int>(RoundedPiece(p.k_per_group(), pieces));
      t.channel_blocks = static_cast<int>(CeilDiv(p.k_per_group(), t.channel_tile));
    } else if (pieces > 1) {
      t.pixel_tile = static_cast<int>(RoundedPiece(pixels, pieces));
      t.pixel_blocks = CeilDiv(pixels, t.pixel_tile);
    }
    t.tiles = units * t.pixel_blocks * t.channel_blocks;
    return t;  // scratch_floats 0: the sgemm reads the input and writes the output in place
  }
  int64_t tile = std::max<int64_t>(kMinPixelTile, kOperandTileFloats / std::max<int64_t>(1, depth) / 16 * 16);
  tile = std::min(tile, pixels);
  // Balance the blocks: 100 pixels become two tiles of 50, not 96 + 4.
  t.pixel_blocks = CeilDiv(pixels, tile);
  t.pixel_tile = static_cast<int>(CeilDiv(pixels, t.pixel_blocks));
  // Too few tiles to keep every thread busy twice over: split the output channels too.
  const int64_t tiles_without_split = images * p.groups * t.pixel_blocks;
  const int64_t wanted = 2 * int64_t{ScratchSlotCount()};
  const int max_channel_blocks = std::max(1, p.k_per_group() / kMinChannelTile);
  t.channel_blocks = static_cast<int>(
      std::clamp<int64_t>(CeilDiv(wanted, tiles_without_split), 1, max_channel_blocks));
  t.channel_tile = static_cast<int>(CeilDiv(p.k_per_group(), t.channel_blocks));
  t.channel_blocks = static_cast<int>(CeilDiv(p.k_per_group(), t.channel_tile));
  t.tiles = tiles_without_split * t.channel_blocks;
  const bool fp32 = p.dtype == DataType::kFloat32;
  const bool needs_operand = operand == ConvGemmOperand::kIm2col || !fp32;
  t.scratch_floats = (needs_operand ? static_cast<size_t>(depth) * t.pixel_tile : 0) +
                     (fp32 ? 0 : static_cast<size_t>(t.channel_tile) * t.pixel_tile);
  return t;
}

size_t ConvGemmWorkspaceBytes(const Conv2dProblem& problem, ConvGemmOperand operand) {
  const ConvGemmTiling tiling = PlanConvGemmTiling(problem, operand, ScratchSlotCount());
  return tiling.scratch_floats == 0 ? 0 : ScratchWorkspaceBytes(tiling.scratch_floats);
}

size_t ConvGemmPackedFilterBytes(const Conv2dProblem& problem) {
  return problem.dtype == DataType::kFloat32 ? 0 : static_cast<size_t>(problem.filter_elements()) * sizeof(float);
}

absl::Status RunConvGemm(const Conv2dProblem& problem, const Conv2dArgs& args, ConvGemmOperand operand,
                         Workspace workspace, const ExecutionContext& context) {
  if (context.thread_pool == nullptr) return absl::InvalidArgumentError("CPU conv2d needs a thread pool");
  const ConvGemmTiling tiling = PlanConvGemmTiling(problem, operand, context.thread_pool->num_threads());
  if (tiling.scratch_floats > 0) CONVOY_RETURN_IF_ERROR(ScratchSlots::Check(workspace.bytes, tiling.scratch_floats));
  ScratchSlots slots(workspace.data, workspace.bytes, tiling.scratch_floats);
  ConvGemmCall call{&problem, &tiling, operand, args.x, static_cast<const float*>(args.w), args.y,
                    EpilogueOperands{problem.epilogue, args.scale, args.bias, args.residual, problem.dtype},
                    int64_t{problem.p()} * problem.q(), GemmDepth(problem)};
  context.thread_pool->ParallelFor(tiling.tiles, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    for (int64_t tile = begin; tile < end; ++tile) {
      const TileIndex t = DecodeTile(problem, tiling, tile);
      if (problem.layout == Layout::kNCHW) {
        RunNchwTile(call, t, lease.data());
      } else {
        RunNhwcTile(call, t, lease.data());
      }
    }
  });
  return absl::OkStatus();
}

}  // namespace cpu
}  // namespace convoy
