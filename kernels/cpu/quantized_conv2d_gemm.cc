#include "kernels/cpu/quantized_conv2d_gemm.h"

#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/per_isa_registration.h"
#include "kernels/cpu/quantized_arithmetic.h"
#include "kernels/cpu/quantized_amx_tiles.h"
#include "kernels/cpu/quantized_gemm_tiles.h"
#include "kernels/registry/check_workspace.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int kBlock = kQuantizedGemmBlockChannels;
constexpr int64_t kChunkBytes = 192 * 1024;  // the widened receptive fields of one chunk of rows

const QuantizedGemmTiles& TilesFor(CpuIsa isa) {
  return ForCpuIsa(isa, kQuantizedGemmTilesBaseline, kQuantizedGemmTilesAvx2, kQuantizedGemmTilesAvx512);
}

QuantizedTileType TileType(DataType t) {
  switch (t) {
    case DataType::kUInt8: return QuantizedTileType::kUInt8;
    case DataType::kInt8: return QuantizedTileType::kInt8;
    default: return QuantizedTileType::kFloat32;
  }
}

// How a problem is cut: the GEMM is [M = N*P*Q rows] x [reduction] x [K/groups channels] per group; work items are
// (group, chunk of rows, range of channel blocks).
struct Tiling {
  int64_t rows = 0;        // M
  int64_t reduction = 0;   // R*S*C/groups
  int64_t padded = 0;      // the reduction rounded up to pairs: the widened row's stride
  int64_t blocks = 0;      // 16-channel blocks per group
  int64_t chunk_rows = 0;  // rows per chunk, a multiple of the register tile's
  int64_t chunks = 0;
  int64_t splits = 1;           // channel-block ranges per chunk
  int64_t blocks_per_split = 0;  // a multiple of the register tile's blocks
  int64_t items = 0;
  size_t slot_floats = 0;  // one chunk's widened rows and one register tile's sums
};

Tiling PlanTiling(const QuantizedConv2dProblem& p, const QuantizedGemmTiles& tiles, int threads) {
  Tiling t;
  t.rows = int64_t{p.n} * p.p() * p.q();
  t.reduction = int64_t{p.r} * p.s * p.c_per_group();
  t.padded = (t.reduction + 1) / 2 * 2;
  t.blocks = (p.k_per_group() + kBlock - 1) / kBlock;
  const int64_t fit = std::max<int64_t>(1, kChunkBytes / (t.padded * 2) / tiles.max_rows) * tiles.max_rows;
  t.chunk_rows = std::min(fit, (t.rows + tiles.max_rows - 1) / tiles.max_rows * tiles.max_rows);
  t.chunks = (t.rows + t.chunk_rows - 1) / t.chunk_rows;
  const int64_t units = (t.blocks + tiles.max_blocks - 1) / tiles.max_blocks;
  const int64_t pieces = int64_t{p.groups} * t.chunks;
  if (pieces < 2 * int64_t{threads}) t.splits = std::min(units, (2 * int64_t{threads} + pieces - 1) / pieces);
  t.blocks_per_split = (units + t.splits - 1) / t.splits * tiles.max_blocks;
  t.splits = (t.blocks + t.blocks_per_split - 1) / t.blocks_per_split;
  t.items = pieces * t.splits;
  const size_t bytes = static_cast<size_t>(t.chunk_rows * t.padded * 2) +
                       static_cast<size_t>(tiles.max_rows) * kBlock * tiles.max_blocks * 4;
  t.slot_floats = (bytes + 3) / 4;
  return t;
}

int64_t BlockStride(const Tiling& t) { return t.padded / 2 * 2 * kBlock; }  // int16 per packed block

// Output pixel m of [N*P*Q] as image, row and column.
struct OutputPixel {
  int n, oh, ow;
};
OutputPixel PixelOf(const QuantizedConv2dProblem& p, int64_t m) {
  const int64_t pq = int64_t{p.p()} * p.q();
  const int n = static_cast<int>(m / pq);
  const int rest = static_cast<int>(m - n * pq);
  return {n, rest / p.q(), rest % p.q()};
}

// Depthwise layers (one input and one output channel per group, windows of up to kMaxDepthwiseTaps taps; the QDQ
// plans' global average pools among them) run per output pixel across the channels instead: the GEMM would fill one
// of each 16-channel block. Their packed filter holds the weights in pairs of taps, int16 [taps / 2][K][2] (an odd
// window padded with a zero tap); the scratch one pixel's sums [K] and a row of K bytes of the source zero point,
// which padding taps read.
constexpr int kMaxDepthwiseTaps = 64;

bool IsDepthwise(const QuantizedConv2dProblem& p) {
  return p.groups == p.c && p.k == p.c && p.r * p.s <= kMaxDepthwiseTaps;
}

int DepthwiseTaps(const QuantizedConv2dProblem& p) { return (p.r * p.s + 1) / 2 * 2; }  // even

size_t DepthwiseSlotFloats(const QuantizedConv2dProblem& p) { return static_cast<size_t>(p.k) + (p.k + 3) / 4; }

void RunDepthwise(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args, const QuantizedTileEpilogue& e,
                  const QuantizedGemmTiles& tiles, ScratchSlots& slots, ThreadPool& pool) {
  const int64_t rows = int64_t{p.n} * p.p() * p.q();
  const int taps = DepthwiseTaps(p);
  const uint8_t* x = static_cast<const uint8_t*>(args.x);  // one byte per element (UINT8 or INT8)
  const int16_t* w = reinterpret_cast<const int16_t*>(args.w);
  pool.ParallelFor(rows, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    int32_t* acc = reinterpret_cast<int32_t*>(lease.data());
    uint8_t* zero_point_row = reinterpret_cast<uint8_t*>(acc + p.k);
    std::memset(zero_point_row, static_cast<uint8_t>(p.epilogue.src_zero_point), p.k);
    const void* tap[kMaxDepthwiseTaps];
    tap[taps - 1] = zero_point_row;  // the zero-weight tap of an odd window, if any (overwritten otherwise)
    for (int64_t m = begin; m < end; ++m) {
      const auto [n, oh, ow] = PixelOf(p, m);
      for (int r = 0; r < p.r; ++r) {
        const int ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
        for (int s = 0; s < p.s; ++s) {
          const int iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
          const bool inside = ih >= 0 && ih < p.h && iw >= 0 && iw < p.w;
          tap[r * p.s + s] = inside ? x + ((int64_t{n} * p.h + ih) * p.w + iw) * p.c : zero_point_row;
        }
      }
      tiles.depthwise(tap, taps, p.src_type == DataType::kUInt8, p.epilogue.src_zero_point, w, p.k, acc);
      tiles.epilogue(e, acc, p.k, 1, 0, p.k, m * p.k, p.k, args.y);
    }
  }, /*min_chunk=*/16);
}

// Widens rows [m0, m0 + rows) of group g's receptive fields into a ([rows][padded] int16), less the zero point.
void WidenRows(const QuantizedConv2dProblem& p, const Tiling& t, const QuantizedGemmTiles& tiles, const void* x,
               int g, int64_t m0, int64_t rows, int16_t* a) {
  const int cg = p.c_per_group();
  const bool is_unsigned = p.src_type == DataType::kUInt8;
  const uint8_t* bytes = static_cast<const uint8_t*>(x);
  for (int64_t i = 0; i < rows; ++i) {
    const auto [n, oh, ow] = PixelOf(p, m0 + i);
    int16_t* row = a + i * t.padded;
    const int iw0 = ow * p.stride_w - p.pad_left;
    // With one group and no dilation along W, a window row inside the image is S * C contiguous input bytes in
    // the reduction's order: one widening instead of S (the 3-channel stems' 7 or 3 taps of 3 bytes).
    const bool whole_rows = p.groups == 1 && p.dilation_w == 1 && iw0 >= 0 && iw0 + p.s <= p.w;
    for (int r = 0; r < p.r; ++r) {
      const int ih = oh * p.stride_h - p.pad_top + r * p.dilation_h;
      if (whole_rows && ih >= 0 && ih < p.h) {
        const int64_t offset = ((int64_t{n} * p.h + ih) * p.w + iw0) * p.c;
        tiles.widen(bytes + offset, is_unsigned, p.epilogue.src_zero_point, row + int64_t{r} * p.s * cg,
                    int64_t{p.s} * cg);
        continue;
      }
      for (int s = 0; s < p.s; ++s) {
        const int iw = ow * p.stride_w - p.pad_left + s * p.dilation_w;
        int16_t* tap = row + (int64_t{r} * p.s + s) * cg;
        if (ih < 0 || ih >= p.h || iw < 0 || iw >= p.w) {
          std::memset(tap, 0, sizeof(int16_t) * cg);  // padding reads as the zero point: (zp - zp) = 0
          continue;
        }
        const int64_t offset = ((int64_t{n} * p.h + ih) * p.w + iw) * p.c + int64_t{g} * cg;
        tiles.widen(bytes + offset, is_unsigned, p.epilogue.src_zero_point, tap, cg);
      }
    }
    if (t.padded > t.reduction) row[t.reduction] = 0;
  }
}

// INVALID_ARGUMENT naming the algorithm when Run lacks a thread pool or an argument the problem needs.
absl::Status CheckRunArguments(absl::string_view algorithm, const QuantizedConv2dProblem& p,
                               const QuantizedConv2dArgs& args, const ExecutionContext& context) {
  if (context.thread_pool == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": needs a thread pool"));
  }
  const QuantizedEpilogue& ep = p.epilogue;
  const bool has_residual = ep.residual != ResidualMode::kNone || p.fused_add != QuantizedFusedAdd::kNone;
  if (args.x == nullptr || args.w == nullptr || args.y == nullptr || (ep.has_bias && args.bias == nullptr) ||
      (ep.scales.empty() && args.scale == nullptr) || (has_residual && args.residual == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat(algorithm, ": a required argument is null for ", p.ToString()));
  }
  return absl::OkStatus();
}

// The epilogue of the problem's outputs as the tile loops take it (everything but the sums).
QuantizedTileEpilogue TileEpilogueOf(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args) {
  const QuantizedEpilogue& ep = p.epilogue;
  QuantizedTileEpilogue e;
  e.bias = ep.has_bias ? args.bias : nullptr;
  e.scale = ep.scales.empty() ? args.scale : ep.scales.data();
  if (ep.residual != ResidualMode::kNone) {
    e.residual = args.residual;
    e.residual_scale = ep.residual_scale;
    e.residual_zero_point = static_cast<float>(ep.residual_zero_point);
  }
  e.relu = ep.relu;
  e.output_type = TileType(p.dst_type);
  e.dst_zero_point = static_cast<float>(ep.dst_zero_point);
  e.conv_lo = QuantizedLowest(p.conv_type());
  e.conv_hi = QuantizedHighest(p.conv_type());
  if (p.fused_add != QuantizedFusedAdd::kNone) {
    const QuantizedAddProblem& q = p.add;
    const bool conv_is_a = p.fused_add == QuantizedFusedAdd::kConvIsA;
    e.fused_add = conv_is_a ? 1 : 2;
    e.add_operand = args.residual;
    e.add_operand_type = TileType(conv_is_a ? q.b_type : q.a_type);
    const QuantizedAddFactors factors = QuantizedAddFactorsOf(q);
    e.ra = factors.ra;
    e.rb = factors.rb;
    e.add_fixed = factors.fixed;
    e.add_lo = QuantizedLowest(q.y_type);
    e.add_hi = QuantizedHighest(q.y_type);
  }

  return e;
}

}  // namespace

QuantizedConv2dGemmNhwc::QuantizedConv2dGemmNhwc(CpuIsa isa)
    : isa_(isa),
      name_(isa == CpuIsa::kBaseline ? "cpu.quantized_conv2d.gemm_nhwc"
                                     : absl::StrCat("cpu.quantized_conv2d.gemm_nhwc_", CpuIsaName(isa))) {}

absl::Status QuantizedConv2dGemmNhwc::CanImplement(const QuantizedConv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.layout != Layout::kNHWC) return absl::UnimplementedError(absl::StrCat(name_, ": NHWC only"));
  const int64_t reduction = int64_t{problem.r} * problem.s * problem.c_per_group();
  if (reduction > kMaxReduction) {
    return absl::UnimplementedError(absl::StrCat(name_, ": R*S*C/groups = ", reduction, " exceeds ", kMaxReduction,
                                                 " (the int32 sum could overflow)"));
  }
  return absl::OkStatus();
}

int QuantizedConv2dGemmNhwc::HeuristicScore(const QuantizedConv2dProblem&) const {
  switch (isa_) {
    case CpuIsa::kAvx512: return -2;
    case CpuIsa::kAvx2: return -3;
    case CpuIsa::kBaseline: break;
  }
  return -4;
}

size_t QuantizedConv2dGemmNhwc::WorkspaceBytes(const QuantizedConv2dProblem& problem) const {
  if (IsDepthwise(problem)) return ScratchWorkspaceBytes(DepthwiseSlotFloats(problem));
  return ScratchWorkspaceBytes(PlanTiling(problem, TilesFor(isa_), ScratchSlotCount()).slot_floats);
}

size_t QuantizedConv2dGemmNhwc::PackedFilterBytes(const QuantizedConv2dProblem& problem) const {
  if (IsDepthwise(problem)) return static_cast<size_t>(int64_t{DepthwiseTaps(problem)} * problem.k * 2);
  const Tiling t = PlanTiling(problem, TilesFor(isa_), 1);
  return static_cast<size_t>(int64_t{problem.groups} * t.blocks * BlockStride(t) * 2);
}

std::string QuantizedConv2dGemmNhwc::PackedFilterLayout(const QuantizedConv2dProblem& problem) const {
  if (IsDepthwise(problem)) return "RS/2,K,2rs int16";
  return "G,K/16,RSC/2,16k,2rsc int16";
}

absl::Status QuantizedConv2dGemmNhwc::PackFilter(const QuantizedConv2dProblem& problem, const void* filter,
                                                void* packed, const ExecutionContext&) const {
  CONVOY_RETURN_IF_ERROR(CanImplement(problem));
  const int8_t* w = static_cast<const int8_t*>(filter);  // [K, R, S, C/groups]: a channel's row is the reduction
  if (IsDepthwise(problem)) {
    const int taps = problem.r * problem.s;
    int16_t* out = static_cast<int16_t*>(packed);  // [taps / 2][K][2]
    for (int k = 0; k < problem.k; ++k) {
      for (int t = 0; t < DepthwiseTaps(problem); ++t) {
        out[((int64_t{t} / 2) * problem.k + k) * 2 + t % 2] = t < taps ? w[int64_t{k} * taps + t] : 0;
      }
    }
    return absl::OkStatus();
  }
  const Tiling t = PlanTiling(problem, TilesFor(isa_), 1);
  int16_t* out = static_cast<int16_t*>(packed);
  const int kg = problem.k_per_group();
  for (int g = 0; g < problem.groups; ++g) {
    for (int64_t b = 0; b < t.blocks; ++b) {
      int16_t* block = out + (int64_t{g} * t.blocks + b) * BlockStride(t);
      for (int64_t pair = 0; pair < t.padded / 2; ++pair) {
        for (int c = 0; c < kBlock; ++c) {
          const int64_t channel = b * kBlock + c;  // within the group
          for (int half = 0; half < 2; ++half) {
            const int64_t red = 2 * pair + half;
            block[(pair * kBlock + c) * 2 + half] =
                channel < kg && red < t.reduction ? w[(int64_t{g} * kg + channel) * t.reduction + red] : 0;
          }
        }
      }
    }
  }
  return absl::OkStatus();
}

absl::Status QuantizedConv2dGemmNhwc::Run(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args,
                                          Workspace workspace, const ExecutionContext& context) const {
  CONVOY_RETURN_IF_ERROR(CheckRunArguments(name_, p, args, context));
  const QuantizedGemmTiles& tiles = TilesFor(isa_);
  const bool depthwise = IsDepthwise(p);
  const Tiling t = PlanTiling(p, tiles, context.thread_pool->num_threads());
  const size_t slot_floats = depthwise ? DepthwiseSlotFloats(p) : t.slot_floats;
  CONVOY_RETURN_IF_ERROR(ScratchSlots::Check(workspace.bytes, slot_floats));
  ScratchSlots slots(workspace.data, workspace.bytes, slot_floats);

  const QuantizedTileEpilogue e = TileEpilogueOf(p, args);

  if (depthwise) {
    RunDepthwise(p, args, e, tiles, slots, *context.thread_pool);
    return absl::OkStatus();
  }
  const int kg = p.k_per_group();
  const int64_t block_stride = BlockStride(t);
  const int16_t* filter = reinterpret_cast<const int16_t*>(args.w);
  context.thread_pool->ParallelFor(t.items, [&](int64_t begin, int64_t end) {
    ScratchSlots::Lease lease = slots.Acquire();
    int16_t* a = reinterpret_cast<int16_t*>(lease.data());
    int32_t* acc = reinterpret_cast<int32_t*>(a + t.chunk_rows * t.padded);
    int64_t widened = -1;  // the (group, chunk) whose rows `a` holds
    for (int64_t item = begin; item < end; ++item) {
      const int64_t split = item % t.splits;
      const int64_t piece = item / t.splits;
      const int g = static_cast<int>(piece / t.chunks);
      const int64_t m0 = (piece % t.chunks) * t.chunk_rows;
      const int64_t rows = std::min(t.chunk_rows, t.rows - m0);
      if (piece != widened) {
        WidenRows(p, t, tiles, args.x, g, m0, rows, a);
        widened = piece;
      }
      const int64_t block_end = std::min(t.blocks, (split + 1) * t.blocks_per_split);
      for (int64_t b = split * t.blocks_per_split; b < block_end; b += tiles.max_blocks) {
        const int blocks = static_cast<int>(std::min<int64_t>(tiles.max_blocks, block_end - b));
        const int16_t* packed = filter + (int64_t{g} * t.blocks + b) * block_stride;
        const int64_t channel0 = b * kBlock;  // within the group
        const int64_t count = std::min<int64_t>(int64_t{blocks} * kBlock, kg - channel0);
        for (int64_t r0 = 0; r0 < rows; r0 += tiles.max_rows) {
          const int tile_rows = static_cast<int>(std::min<int64_t>(tiles.max_rows, rows - r0));
          tiles.accumulate(a + r0 * t.padded, t.padded, tile_rows, packed, block_stride, blocks, t.padded / 2, acc);
          tiles.epilogue(e, acc, int64_t{blocks} * kBlock, tile_rows, int64_t{g} * kg + channel0, count,
                         (m0 + r0) * p.k + int64_t{g} * kg + channel0, p.k, args.y);
        }
      }
    }
  });
  return absl::OkStatus();
}

std::string QuantizedConv2dGemmNhwc::LaunchSummary(const QuantizedConv2dProblem& problem) const {
  const QuantizedGemmTiles& tiles = TilesFor(isa_);
  if (IsDepthwise(problem)) {
    return absl::StrCat("depthwise: ", problem.r * problem.s, " taps x ", problem.k, " channels per output pixel");
  }
  const Tiling t = PlanTiling(problem, tiles, ScratchSlotCount());
  return absl::StrCat(tiles.max_rows, "x", tiles.max_blocks * kBlock, " register tile, ", t.items, " items of ",
                      t.chunk_rows, " rows x ", t.blocks_per_split * kBlock, " channels, reduction ", t.reduction);
}

CONVOY_REGISTER_PER_ISA_ALGORITHM(QuantizedConv2dOp, QuantizedConv2dGemmNhwc);

// ---- The AMX 1x1 convolution -------------------------------------------------------------------------------------

namespace {

// CPUID leaf 7: EDX bit 24 AMX-TILE, bit 25 AMX-INT8. Linux grants a process the AMX tile data (XFEATURE 18) on
// request (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16 and later); without the grant the first tile instruction
// faults. Asked once per process; CONVOY_MAX_CPU_ISA below avx512 turns it off (the epilogue is AVX-512).
bool AmxInt8Usable() {
  static const bool usable = [] {
    if (!CpuSupports(CpuIsa::kAvx512)) return false;
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
    if ((edx & (1u << 24)) == 0 || (edx & (1u << 25)) == 0) return false;
    constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
  }();
  return usable;
}

int64_t AmxSteps(const QuantizedConv2dProblem& p) { return p.c / 64; }  // 64-channel steps of the reduction
int64_t AmxFilterBlocks(const QuantizedConv2dProblem& p) { return p.k / kBlock; }
size_t AmxSumsOffset(const QuantizedConv2dProblem& p) {  // the per-channel weight sums after the tiles
  return static_cast<size_t>(AmxFilterBlocks(p) * AmxSteps(p) * kAmxTileBytes);
}

}  // namespace

absl::Status QuantizedConv2dAmx1x1Nhwc::CanImplement(const QuantizedConv2dProblem& p) const {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  if (!AmxInt8Usable()) {
    return absl::UnimplementedError(absl::StrCat(name(), ": this CPU (or its OS) runs no AMX INT8 instructions"));
  }
  if (!IsPlainGemm(p)) {
    return absl::UnimplementedError(
        absl::StrCat(name(), ": takes 1x1, stride-1, unpadded, ungrouped NHWC convolutions, not ", p.ToString()));
  }
  if (p.c % 64 != 0 || p.k % kBlock != 0) {
    return absl::UnimplementedError(absl::StrCat(name(), ": needs input channels in multiples of 64 and output "
                                                 "channels in multiples of 16, got c=", p.c, " k=", p.k));
  }
  if (p.c > QuantizedConv2dGemmNhwc::kMaxReduction) {
    return absl::UnimplementedError(absl::StrCat(name(), ": c = ", p.c, " exceeds ",
                                                 QuantizedConv2dGemmNhwc::kMaxReduction,
                                                 " (the int32 sum could overflow)"));
  }
  return absl::OkStatus();
}

size_t QuantizedConv2dAmx1x1Nhwc::WorkspaceBytes(const QuantizedConv2dProblem& p) const {
  return sizeof(int32_t) * p.k;  // the bias less the source zero point's compensation
}

size_t QuantizedConv2dAmx1x1Nhwc::PackedFilterBytes(const QuantizedConv2dProblem& p) const {
  return AmxSumsOffset(p) + sizeof(int32_t) * p.k;
}

absl::Status QuantizedConv2dAmx1x1Nhwc::PackFilter(const QuantizedConv2dProblem& p, const void* filter,
                                                  void* packed, const ExecutionContext&) const {
  CONVOY_RETURN_IF_ERROR(CanImplement(p));
  const int8_t* w = static_cast<const int8_t*>(filter);  // [K, C]
  int8_t* out = static_cast<int8_t*>(packed);
  const int64_t steps = AmxSteps(p);
  for (int64_t b = 0; b < AmxFilterBlocks(p); ++b) {
    for (int64_t t = 0; t < steps; ++t) {
      int8_t* tile = out + (b * steps + t) * kAmxTileBytes;  // [16 groups of 4 channels][16 outputs][4]
      for (int group = 0; group < 16; ++group) {
        for (int j = 0; j < kBlock; ++j) {
          for (int i = 0; i < 4; ++i) {
            tile[group * 64 + 4 * j + i] = w[(b * kBlock + j) * p.c + t * 64 + 4 * group + i];
          }
        }
      }
    }
  }
  int32_t* sums = reinterpret_cast<int32_t*>(out + AmxSumsOffset(p));
  for (int k = 0; k < p.k; ++k) {
    int32_t sum = 0;
    for (int c = 0; c < p.c; ++c) sum += w[int64_t{k} * p.c + c];
    sums[k] = sum;
  }
  return absl::OkStatus();
}

absl::Status QuantizedConv2dAmx1x1Nhwc::Run(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args,
                                            Workspace workspace, const ExecutionContext& context) const {
  CONVOY_RETURN_IF_ERROR(CheckRunArguments(name(), p, args, context));
  if (!AmxInt8Usable()) return absl::FailedPreconditionError(absl::StrCat(name(), ": no AMX INT8 on this CPU"));
  CONVOY_RETURN_IF_ERROR(CheckWorkspaceBytes(name(), workspace, WorkspaceBytes(p)));
  // The tiles multiply the source as it lies: sum (x - zp) w = sum x w - zp sum w, the second term per output channel
  // folded into the bias.
  QuantizedTileEpilogue e = TileEpilogueOf(p, args);
  const int32_t* sums = reinterpret_cast<const int32_t*>(static_cast<const int8_t*>(args.w) + AmxSumsOffset(p));
  int32_t* bias = static_cast<int32_t*>(workspace.data);
  const int64_t zp = p.epilogue.src_zero_point;
  for (int k = 0; k < p.k; ++k) {
    const int64_t folded = int64_t{p.epilogue.has_bias ? args.bias[k] : 0} - zp * sums[k];
    if (folded < INT32_MIN || folded > INT32_MAX) {
      return absl::OutOfRangeError(absl::StrCat(name(), ": output channel ", k, "'s bias less the source zero point's "
                                                "compensation, ", folded, ", does not fit int32"));
    }
    bias[k] = static_cast<int32_t>(folded);
  }
  e.bias = bias;
  const int64_t rows = int64_t{p.n} * p.h * p.w;
  const int64_t row_blocks = (rows + kAmxBlockRows - 1) / kAmxBlockRows;
  const int64_t column_blocks = (p.k + kAmxBlockChannels - 1) / kAmxBlockChannels;
  const int threads = context.thread_pool->num_threads();
  const int64_t splits =
      row_blocks >= 2 * threads ? 1 : std::min(column_blocks, (2 * int64_t{threads} + row_blocks - 1) / row_blocks);
  const int64_t columns_per_split = (column_blocks + splits - 1) / splits;
  const bool is_signed = p.src_type == DataType::kInt8;
  const int64_t steps = AmxSteps(p);
  const int8_t* filter = static_cast<const int8_t*>(args.w);
  const QuantizedGemmTiles& tiles = kQuantizedGemmTilesAvx512;
  context.thread_pool->ParallelFor(row_blocks * splits, [&](int64_t begin, int64_t end) {
    alignas(64) int32_t acc[kAmxBlockRows * kAmxBlockChannels];
    int configured = 0;
    for (int64_t item = begin; item < end; ++item) {
      const int64_t m0 = item / splits * kAmxBlockRows;
      const int block_rows = static_cast<int>(std::min<int64_t>(kAmxBlockRows, rows - m0));
      if (block_rows != configured) {
        AmxConfigureTiles(block_rows);
        configured = block_rows;
      }
      const int64_t split = item % splits;
      const int64_t column_end = std::min(column_blocks, (split + 1) * columns_per_split);
      for (int64_t column = split * columns_per_split; column < column_end; ++column) {
        const int64_t n0 = column * kAmxBlockChannels;
        const int blocks = p.k - n0 >= kAmxBlockChannels ? 2 : 1;
        AmxAccumulate(static_cast<const uint8_t*>(args.x) + m0 * p.c, p.c, block_rows, is_signed,
                      filter + n0 / kBlock * steps * kAmxTileBytes, steps, blocks, acc);
        tiles.epilogue(e, acc, kAmxBlockChannels, block_rows, n0, int64_t{blocks} * kBlock, m0 * p.k + n0, p.k,
                       args.y);
      }
    }
    if (configured != 0) AmxReleaseTiles();
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, QuantizedConv2dAmx1x1Nhwc);

}  // namespace convoy::cpu
