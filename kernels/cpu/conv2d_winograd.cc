// CPU Winograd conv2d F(2x2,3x3) and F(4x4,3x3); see conv2d_winograd.h.
#include "kernels/cpu/conv2d_winograd.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/registry/check_workspace.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace cpu {
namespace {

// A chunk has at least this many tiles (GEMM columns), even when that exceeds the chunk budget.
constexpr int64_t kMinChunkTiles = 16;

// The transform matrices (Lavin & Gray, "Fast Algorithms for Convolutional Neural Networks", 2016).
template <int kTile>
struct WinogradMatrices;

template <>
struct WinogradMatrices<2> {
  static constexpr float kBt[4][4] = {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}};
  static constexpr float kG[4][3] = {{1, 0, 0}, {0.5f, 0.5f, 0.5f}, {0.5f, -0.5f, 0.5f}, {0, 0, 1}};
  static constexpr float kAt[2][4] = {{1, 1, 1, 0}, {0, 1, -1, -1}};
};

template <>
struct WinogradMatrices<4> {
  static constexpr float kBt[6][6] = {{4, 0, -5, 0, 1, 0},  {0, -4, -4, 1, 1, 0}, {0, 4, -4, -1, 1, 0},
                                      {0, -2, -1, 2, 1, 0}, {0, 2, -1, -2, 1, 0}, {0, 4, 0, -5, 0, 1}};
  static constexpr float kG[6][3] = {{1.0f / 4, 0, 0},
                                     {-1.0f / 6, -1.0f / 6, -1.0f / 6},
                                     {-1.0f / 6, 1.0f / 6, -1.0f / 6},
                                     {1.0f / 24, 1.0f / 12, 1.0f / 6},
                                     {1.0f / 24, -1.0f / 12, 1.0f / 6},
                                     {0, 0, 1}};
  static constexpr float kAt[4][6] = {
      {1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}};
};

// out[ROWS][ROWS] = mat[ROWS][COLS] * in[COLS][COLS] * mat^T. Sizes are compile-time, so the loops unroll and the
// zero entries of the matrices fold away.
template <int kRows, int kCols>
inline void Sandwich(const float (&mat)[kRows][kCols], const float (&in)[kCols][kCols], float (&out)[kRows][kRows]) {
  float tmp[kRows][kCols];
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < kCols; ++j) {
      float sum = 0.0f;
#pragma GCC unroll 8
      for (int k = 0; k < kCols; ++k) {
        if (mat[i][k] != 0.0f) sum += mat[i][k] * in[k][j];
      }
      tmp[i][j] = sum;
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < kRows; ++i) {
#pragma GCC unroll 8
    for (int j = 0; j < kRows; ++j) {
      float sum = 0.0f;
#pragma GCC unroll 8
      for (int k = 0; k < kCols; ++k) {
        if (mat[j][k] != 0.0f) sum += tmp[i][k] * mat[j][k];
      }
      out[i][j] = sum;
    }
  }
}

// Tile geometry and buffers of one Run.
struct WinogradCall {
  const Conv2dProblem* p;
  int tiles_h, tiles_w;   // output tiles per image
  int64_t chunk_tiles;    // tiles per chunk (columns of the GEMMs)
  const void* x;
  const float* u;         // packed filter [alpha^2][K][C]
  void* y;
  EpilogueOperands epilogue;
  float* v;               // [alpha^2][C][chunk_tiles]
  float* m;               // [alpha^2][K][chunk_tiles]
};

int64_t ChunkTiles(const Conv2dProblem& p, int alpha, int64_t total_tiles, int64_t chunk_floats) {
  const int64_t per_tile = int64_t{alpha} * alpha * (p.c + p.k);
  return std::min(total_tiles, std::max(kMinChunkTiles, chunk_floats / per_tile));
}

template <int kTile>
void InputTransform(const WinogradCall& call, int64_t tile, int64_t column, int c) {
  constexpr int kAlpha = kTile + 2;
  const Conv2dProblem& p = *call.p;
  const int64_t per_image = int64_t{call.tiles_h} * call.tiles_w;
  const int64_t n = tile / per_image, th = (tile % per_image) / call.tiles_w, tw = tile % call.tiles_w;
  const int64_t ih0 = th * kTile - p.pad_top, iw0 = tw * kTile - p.pad_left;  // top-left input of the tile
  const int64_t plane = (n * p.c + c) * p.h * p.w;                              // x[n, c, 0, 0]
  float d[kAlpha][kAlpha];
  for (int i = 0; i < kAlpha; ++i) {
    const int64_t ih = ih0 + i;
    for (int j = 0; j < kAlpha; ++j) {
      const int64_t iw = iw0 + j;
      const bool inside = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w;
      d[i][j] = inside ? (p.dtype == DataType::kFloat32
                              ? static_cast<const float*>(call.x)[plane + ih * p.w + iw]
                              : LoadAsFloat(call.x, p.dtype, static_cast<size_t>(plane + ih * p.w + iw)))
                       : 0.0f;
    }
  }
  float v[kAlpha][kAlpha];
  Sandwich(WinogradMatrices<kTile>::kBt, d, v);
  const int64_t xi_stride = int64_t{p.c} * call.chunk_tiles;
  float* out = call.v + int64_t{c} * call.chunk_tiles + column;  // V[0][c][column]
  for (int i = 0; i < kAlpha; ++i) {
    for (int j = 0; j < kAlpha; ++j) out[(i * kAlpha + j) * xi_stride] = v[i][j];
  }
}

template <int kTile>
void OutputTransform(const WinogradCall& call, int64_t tile, int64_t column, int k) {
  constexpr int kAlpha = kTile + 2;
  const Conv2dProblem& p = *call.p;
  const int64_t xi_stride = int64_t{p.k} * call.chunk_tiles;
  const float* in = call.m + int64_t{k} * call.chunk_tiles + column;  // M[0][k][column]
  float mt[kAlpha][kAlpha];
  for (int i = 0; i < kAlpha; ++i) {
    for (int j = 0; j < kAlpha; ++j) mt[i][j] = in[(i * kAlpha + j) * xi_stride];
  }
  float out[kTile][kTile];
  Sandwich(WinogradMatrices<kTile>::kAt, mt, out);
  const int64_t per_image = int64_t{call.tiles_h} * call.tiles_w;
  const int64_t n = tile / per_image, th = (tile % per_image) / call.tiles_w, tw = tile % call.tiles_w;
  const int64_t oh0 = th * kTile, ow0 = tw * kTile;
  const int rows = static_cast<int>(std::min<int64_t>(kTile, p.p() - oh0));
  const int cols = static_cast<int>(std::min<int64_t>(kTile, p.q() - ow0));
  for (int i = 0; i < rows; ++i) {
    const int64_t y_offset = ((n * p.k + k) * p.p() + oh0 + i) * p.q() + ow0;  // y[n, k, oh0 + i, ow0]
    ApplyChannelEpilogue(call.epilogue, k, out[i], cols, call.y, y_offset);
  }
}

// The three phases for tiles [first, first + count).
template <int kTile>
void RunChunk(const WinogradCall& call, int64_t first, int64_t count, ThreadPool& pool) {
  constexpr int kAlpha = kTile + 2;
  const Conv2dProblem& p = *call.p;
  pool.ParallelFor(int64_t{p.c} * count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) InputTransform<kTile>(call, first + i % count, i % count, static_cast<int>(i / count));
  });
  const int64_t ld = call.chunk_tiles;
  pool.ParallelFor(kAlpha * kAlpha, [&](int64_t begin, int64_t end) {
    for (int64_t xi = begin; xi < end; ++xi) {
      SgemmRowMajor(false, false, p.k, static_cast<int>(count), p.c, call.u + xi * p.k * p.c, p.c,
                    call.v + xi * p.c * ld, static_cast<int>(ld), call.m + xi * p.k * ld, static_cast<int>(ld));
    }
  });
  pool.ParallelFor(int64_t{p.k} * count, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) OutputTransform<kTile>(call, first + i % count, i % count, static_cast<int>(i / count));
  });
}

}  // namespace

template <int kTile>
absl::string_view Conv2dWinograd<kTile>::name() const {
  return kTile == 2 ? "cpu.conv2d.winograd_f2x2_3x3_nchw" : "cpu.conv2d.winograd_f4x4_3x3_nchw";
}

template <int kTile>
absl::Status Conv2dWinograd<kTile>::CanImplement(const Conv2dProblem& p) const {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  if (p.layout != Layout::kNCHW) return absl::UnimplementedError(absl::StrCat(name(), " takes NCHW only"));
  if (p.r != 3 || p.s != 3 || p.stride_h != 1 || p.stride_w != 1 || p.dilation_h != 1 || p.dilation_w != 1 ||
      p.groups != 1) {
    return absl::UnimplementedError(
        absl::StrCat(name(), " needs a 3x3 filter, stride 1, dilation 1 and groups 1, got ", p.ToString()));
  }
  return absl::OkStatus();
}

template <int kTile>
int Conv2dWinograd<kTile>::HeuristicScore(const Conv2dProblem& p) const {
  const bool enough_channels = p.c >= 32 && p.k >= 32;
  if (!enough_channels) return 5;
  return kTile == 4 && p.p() >= 8 && p.q() >= 8 ? 25 : 15;
}

template <int kTile>
size_t Conv2dWinograd<kTile>::WorkspaceBytes(const Conv2dProblem& p) const {
  const int64_t tiles = int64_t{p.n} * ((p.p() + kTile - 1) / kTile) * ((p.q() + kTile - 1) / kTile);
  return static_cast<size_t>(ChunkTiles(p, kAlpha, tiles, chunk_floats_)) * kAlpha * kAlpha * (p.c + p.k) * sizeof(float);
}

template <int kTile>
size_t Conv2dWinograd<kTile>::PackedFilterBytes(const Conv2dProblem& p) const {
  return size_t{kAlpha} * kAlpha * p.k * p.c * sizeof(float);
}

template <int kTile>
absl::Status Conv2dWinograd<kTile>::PackFilter(const Conv2dProblem& p, const void* filter, void* packed,
                                               const ExecutionContext& context) const {
  float* u = static_cast<float*>(packed);
  const int64_t xi_stride = int64_t{p.k} * p.c;
  for (int64_t kc = 0; kc < xi_stride; ++kc) {  // kc = k * C + c; the filter lies as [K, C, 3, 3]
    float g[3][3];
    for (int i = 0; i < 9; ++i) g[i / 3][i % 3] = LoadAsFloat(filter, p.dtype, static_cast<size_t>(kc * 9 + i));
    float transformed[kAlpha][kAlpha];
    Sandwich(WinogradMatrices<kTile>::kG, g, transformed);
    for (int xi = 0; xi < kAlpha * kAlpha; ++xi) u[xi * xi_stride + kc] = transformed[xi / kAlpha][xi % kAlpha];
  }
  return absl::OkStatus();
}

template <int kTile>
absl::Status Conv2dWinograd<kTile>::Run(const Conv2dProblem& p, const Conv2dArgs& args, Workspace workspace,
                                        const ExecutionContext& context) const {
  if (context.thread_pool == nullptr) return absl::InvalidArgumentError("CPU conv2d needs a thread pool");
  CONVOY_RETURN_IF_ERROR(CheckWorkspaceBytes(name(), workspace, WorkspaceBytes(p)));
  WinogradCall call;
  call.p = &p;
  call.tiles_h = (p.p() + kTile - 1) / kTile;
  call.tiles_w = (p.q() + kTile - 1) / kTile;
  const int64_t total = int64_t{p.n} * call.tiles_h * call.tiles_w;
  call.chunk_tiles = ChunkTiles(p, kAlpha, total, chunk_floats_);
  call.x = args.x;
  call.u = static_cast<const float*>(args.w);
  call.y = args.y;
  call.epilogue = EpilogueOperands{p.epilogue, args.scale, args.bias, args.residual, p.dtype};
  call.v = static_cast<float*>(workspace.data);
  call.m = call.v + int64_t{kAlpha} * kAlpha * p.c * call.chunk_tiles;
  for (int64_t first = 0; first < total; first += call.chunk_tiles) {
    RunChunk<kTile>(call, first, std::min(call.chunk_tiles, total - first), *context.thread_pool);
  }
  return absl::OkStatus();
}

template class Conv2dWinograd<2>;
template class Conv2dWinograd<4>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dWinogradF2x2);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dWinogradF4x4);

}  // namespace cpu
}  // namespace convoy
