#include "kernels/cpu/binary.h"

#include <algorithm>

#include <memory>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/activation.h"
#include "kernels/cpu/activation_loops.h"
#include "kernels/cpu/binary_rows.h"
#include "kernels/cpu/convert_element.h"
#include "kernels/cpu/per_isa_registration.h"
#include "kernels/registry/check_workspace.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 512;

template <BinaryOp kOp>
float Combine(float a, float b) {
  if constexpr (kOp == BinaryOp::kAdd) return a + b;
  if constexpr (kOp == BinaryOp::kSub) return a - b;
  if constexpr (kOp == BinaryOp::kMul) return a * b;
  return a / b;
}

// One contiguous row of n elements: b_row (n elements) when b varies along the row, else the constant b_value.
template <typename S, BinaryOp kOp>
void BinaryRow(const typename S::T* a, const typename S::T* b_row, float b_value, typename S::T* y, int64_t n,
               const Activation& activation) {
  float staged_a[kChunk], staged_b[kChunk];
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t m = std::min(kChunk, n - first);
    LoadRow<S>(a + first, m, staged_a);
    if (b_row != nullptr) {
      LoadRow<S>(b_row + first, m, staged_b);
      for (int64_t i = 0; i < m; ++i) staged_a[i] = Combine<kOp>(staged_a[i], staged_b[i]);
    } else {
      for (int64_t i = 0; i < m; ++i) staged_a[i] = Combine<kOp>(staged_a[i], b_value);
    }
    ApplyActivationInPlace(staged_a, m, activation);
    StoreRow<S>(staged_a, m, y + first);
  }
}

// One contiguous row of n elements (a multiple of the block) of a blocked tensor: pixels of kLayoutChannelBlock
// channels, b one value per channel of the block (`lanes`), the same for every pixel.
template <typename S, BinaryOp kOp>
void BinaryBlockedRow(const typename S::T* a, const float* lanes, typename S::T* y, int64_t n,
                      const Activation& activation) {
  constexpr int64_t kBlock = kLayoutChannelBlock;
  float staged_a[kChunk];
  for (int64_t first = 0; first < n; first += kChunk) {
    const int64_t m = std::min(kChunk, n - first);  // kChunk and n are multiples of the block
    LoadRow<S>(a + first, m, staged_a);
    for (int64_t i = 0; i < m; i += kBlock) {
      for (int64_t j = 0; j < kBlock; ++j) staged_a[i + j] = Combine<kOp>(staged_a[i + j], lanes[j]);
    }
    ApplyActivationInPlace(staged_a, m, activation);
    StoreRow<S>(staged_a, m, y + first);
  }
}

// NCHW8c: N*C/8 rows of H*W pixels x 8 channels, one per channel block. b is the matching row (kNone, b blocked
// too), a constant (kScalar), or 8 channel values repeated for every pixel of the row.
template <typename S, BinaryOp kOp>
void BlockedBinaryKernel(const BinaryProblem& p, const typename S::T* a, const typename S::T* b, typename S::T* y,
                         ThreadPool& pool) {
  constexpr int kBlock = kLayoutChannelBlock;
  const int64_t blocks = p.c / kBlock;
  const int64_t row_length = int64_t{p.h} * p.w * kBlock;
  pool.ParallelFor(int64_t{p.n} * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t offset = row * row_length;
      if (p.broadcast == BinaryBroadcast::kNone || p.broadcast == BinaryBroadcast::kScalar) {
        const bool none = p.broadcast == BinaryBroadcast::kNone;
        BinaryRow<S, kOp>(a + offset, none ? b + offset : nullptr, none ? 0.0f : S::Load(b, 0), y + offset,
                          row_length, p.activation);
        continue;
      }
      // kPerImageChannel: b[n * C + c]; kPerChannel: b[c], c = block * 8 + lane.
      const int64_t first_channel = p.broadcast == BinaryBroadcast::kPerImageChannel ? row * kBlock
                                                                                      : row % blocks * kBlock;
      float lanes[kBlock];
      for (int j = 0; j < kBlock; ++j) lanes[j] = S::Load(b, first_channel + j);
      BinaryBlockedRow<S, kOp>(a + offset, lanes, y + offset, row_length, p.activation);
    }
  });
}

// Rows: NCHW has N*C rows of H*W (b constant per row unless kNone); NHWC has N*H*W rows of C (b a row unless
// kScalar or kNone, where kNone's row is the matching slice of b).
template <typename S, BinaryOp kOp>
void BinaryKernel(const BinaryProblem& p, const typename S::T* a, const typename S::T* b, typename S::T* y,
                  ThreadPool& pool) {
  if (p.layout == Layout::kNCHW8c) return BlockedBinaryKernel<S, kOp>(p, a, b, y, pool);
  const int64_t plane = int64_t{p.h} * p.w;
  const bool nchw = p.layout == Layout::kNCHW;
  const int64_t rows = nchw ? int64_t{p.n} * p.c : int64_t{p.n} * plane;
  const int64_t row_length = nchw ? plane : p.c;
  pool.ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t offset = row * row_length;
      const typename S::T* b_row = nullptr;
      int64_t b_index = 0;  // when b is constant along the row
      switch (p.broadcast) {
        case BinaryBroadcast::kNone: b_row = b + offset; break;
        case BinaryBroadcast::kPerImageChannel:
          if (nchw) b_index = row; else b_row = b + row / plane * p.c;
          break;
        case BinaryBroadcast::kPerChannel:
          if (nchw) b_index = row % p.c; else b_row = b;
          break;
        case BinaryBroadcast::kScalar: b_index = 0; break;
      }
      const float b_value = b_row == nullptr ? S::Load(b, b_index) : 0.0f;
      BinaryRow<S, kOp>(a + offset, b_row, b_value, y + offset, row_length, p.activation);
    }
  }, nchw ? 1 : std::max<int64_t>(1, 256 / row_length));
}

template <typename S>
void DispatchOp(const BinaryProblem& p, const typename S::T* a, const typename S::T* b, typename S::T* y,
                ThreadPool& pool) {
  switch (p.op) {
    case BinaryOp::kAdd: return BinaryKernel<S, BinaryOp::kAdd>(p, a, b, y, pool);
    case BinaryOp::kSub: return BinaryKernel<S, BinaryOp::kSub>(p, a, b, y, pool);
    case BinaryOp::kMul: return BinaryKernel<S, BinaryOp::kMul>(p, a, b, y, pool);
    case BinaryOp::kDiv: return BinaryKernel<S, BinaryOp::kDiv>(p, a, b, y, pool);
  }
}

// ---- FP32: the per-instruction-set row kernels ------------------------------------------------------------------

static_assert(static_cast<int>(BinaryOp::kAdd) == 0 && static_cast<int>(BinaryOp::kSub) == 1 &&
                  static_cast<int>(BinaryOp::kMul) == 2 && static_cast<int>(BinaryOp::kDiv) == 3,
              "BinaryRowKernels index its arrays in BinaryOp's order");

constexpr int64_t kPieceElements = 8192;    // outputs computed, then activated, at a time (32 KiB: in L1/L2)
constexpr int64_t kMinTaskElements = 8192;  // a thread pool task is at least this many outputs

const BinaryRowKernels& RowKernelsFor(CpuIsa isa) {
  return ForCpuIsa(isa, kBinaryRowKernelsBaseline, kBinaryRowKernelsAvx2, kBinaryRowKernelsAvx512);
}

// `rows` rows of `row_length` outputs over the pool; compute(first, last) writes rows [first, last) of y, in pieces
// of at most kPieceElements, each activated right after it is written.
template <typename Compute>
void ForEachPiece(int64_t rows, int64_t row_length, const Activation& activation, float* y, ThreadPool& pool,
                  const Compute& compute) {
  const bool activate = activation.kind != ActivationKind::kIdentity;
  const int64_t piece_rows = std::max<int64_t>(1, kPieceElements / row_length);
  pool.ParallelFor(rows, [&](int64_t begin, int64_t end) {
    for (int64_t first = begin; first < end; first += piece_rows) {
      const int64_t last = std::min(end, first + piece_rows);
      compute(first, last);
      if (activate) ApplyActivationInPlace(y + first * row_length, (last - first) * row_length, activation);
    }
  }, std::max<int64_t>(1, kMinTaskElements / row_length));
}

void RunFp32Rows(const BinaryProblem& p, const float* a, const float* b, float* y, const BinaryRowKernels& kernels,
                 ThreadPool& pool) {
  const int op = static_cast<int>(p.op);
  const auto same_shape = kernels.same_shape[op];
  const auto scalar = kernels.scalar[op];
  const auto repeated = kernels.repeated[op];
  const int64_t plane = int64_t{p.h} * p.w;
  if (p.broadcast == BinaryBroadcast::kNone || p.broadcast == BinaryBroadcast::kScalar) {
    // Flat over the buffer in any layout: rows of one element.
    const int64_t n = p.desc().num_elements();
    const bool none = p.broadcast == BinaryBroadcast::kNone;
    return ForEachPiece(n, 1, p.activation, y, pool, [&](int64_t first, int64_t last) {
      if (none) {
        same_shape(a + first, b + first, y + first, last - first);
      } else {
        scalar(a + first, b[0], y + first, last - first);
      }
    });
  }
  const bool per_image = p.broadcast == BinaryBroadcast::kPerImageChannel;  // else kPerChannel: b[c]
  switch (p.layout) {
    case Layout::kNCHW:
      // N*C planes [n, c] of H*W, each with the one value b[n*C + c] or b[c].
      return ForEachPiece(int64_t{p.n} * p.c, plane, p.activation, y, pool, [&](int64_t first, int64_t last) {
        for (int64_t row = first; row < last; ++row) {
          scalar(a + row * plane, b[per_image ? row : row % p.c], y + row * plane, plane);
        }
      });
    case Layout::kNHWC:
      // N*H*W pixels [n, h, w] of C channels; b's row is the image's (b + n*C) or the one row b.
      return ForEachPiece(int64_t{p.n} * plane, p.c, p.activation, y, pool, [&](int64_t first, int64_t last) {
        while (first < last) {
          const int64_t image = first / plane;
          const int64_t stop = per_image ? std::min(last, (image + 1) * plane) : last;
          repeated(a + first * p.c, per_image ? b + image * p.c : b, y + first * p.c, stop - first, p.c);
          first = stop;
        }
      });
    case Layout::kNCHW8c: {
      // N*C/8 planes [n, block] of H*W pixels x 8 channels; b's 8 values of the block.
      constexpr int64_t kBlock = kLayoutChannelBlock;
      const int64_t blocks = p.c / kBlock;
      const int64_t row_length = plane * kBlock;
      return ForEachPiece(int64_t{p.n} * blocks, row_length, p.activation, y, pool, [&](int64_t first, int64_t last) {
        for (int64_t row = first; row < last; ++row) {
          const float* lanes = b + (per_image ? row : row % blocks) * kBlock;  // [n, block] or [block] x 8
          repeated(a + row * row_length, lanes, y + row * row_length, plane, kBlock);
        }
      });
    }
  }
}

// ---- BF16: the same row kernels on FP32 pieces -------------------------------------------------------------------

constexpr int64_t kBf16PieceElements = 4096;  // one piece of a and b converted to FP32 on the stack (2 x 16 KiB)

// Pieces of the flat element order (whole pixels in NHWC, so b's row starts at a pixel) or 0 where a pixel does not
// fit a piece.
int64_t Bf16PieceElements(const BinaryProblem& p) {
  if (p.layout != Layout::kNHWC || p.broadcast == BinaryBroadcast::kNone || p.broadcast == BinaryBroadcast::kScalar) {
    return kBf16PieceElements;  // a multiple of NCHW8c's 8-channel pixels
  }
  return p.c <= kBf16PieceElements ? kBf16PieceElements / p.c * p.c : 0;
}

// Elements [first, first + n) of the flat output in FP32: a and y are that piece, b the piece of b (kNone) or all of
// b in FP32 (the broadcast forms).
void ComputePiece(const BinaryProblem& p, const BinaryRowKernels& kernels, int64_t first, int64_t n, float* a,
                  const float* b, float* y) {
  const int op = static_cast<int>(p.op);
  if (p.broadcast == BinaryBroadcast::kNone) return kernels.same_shape[op](a, b, y, n);
  if (p.broadcast == BinaryBroadcast::kScalar) return kernels.scalar[op](a, b[0], y, n);
  const bool per_image = p.broadcast == BinaryBroadcast::kPerImageChannel;
  const int64_t plane = int64_t{p.h} * p.w;
  const int64_t end = first + n;
  for (int64_t e = first; e < end;) {
    int64_t stop = 0;
    const int64_t at = e - first;
    switch (p.layout) {
      case Layout::kNCHW: {  // planes [n, c] of H*W, one b value each
        const int64_t row = e / plane;
        stop = std::min(end, (row + 1) * plane);
        kernels.scalar[op](a + at, b[per_image ? row : row % p.c], y + at, stop - e);
        break;
      }
      case Layout::kNHWC: {  // pixels of C channels, b's row of the image
        const int64_t image = e / (plane * p.c);
        stop = std::min(end, (image + 1) * plane * p.c);
        kernels.repeated[op](a + at, per_image ? b + image * p.c : b, y + at, (stop - e) / p.c, p.c);
        break;
      }
      case Layout::kNCHW8c: {  // planes [n, block] of 8-channel pixels, b's 8 values of the block
        constexpr int64_t kBlock = kLayoutChannelBlock;
        const int64_t blocks = p.c / kBlock;
        const int64_t row = e / (plane * kBlock);
        stop = std::min(end, (row + 1) * plane * kBlock);
        kernels.repeated[op](a + at, b + (per_image ? row : row % blocks) * kBlock, y + at, (stop - e) / kBlock,
                             kBlock);
        break;
      }
    }
    e = stop;
  }
}

// BF16 through the FP32 row kernels: each piece converted to FP32 with the instruction set's converts, computed and
// activated in FP32 and rounded back once, so the bits are the staged loop's (and the reference's). A broadcast b
// ([N*C] at most) is converted once into the workspace.
void RunBf16Rows(const BinaryProblem& p, const uint16_t* a, const uint16_t* b, uint16_t* y, float* b_float,
                 const BinaryRowKernels& kernels, ThreadPool& pool) {
  const int64_t piece = Bf16PieceElements(p);
  const int64_t count = p.desc().num_elements();
  const bool full_b = p.broadcast == BinaryBroadcast::kNone;
  if (!full_b) kernels.bf16_to_float(b, b_float, p.b_elements());
  pool.ParallelFor((count + piece - 1) / piece, [&](int64_t begin, int64_t end) {
    float staged_a[kBf16PieceElements], staged_b[kBf16PieceElements];
    for (int64_t index = begin; index < end; ++index) {
      const int64_t first = index * piece, n = std::min(piece, count - first);
      kernels.bf16_to_float(a + first, staged_a, n);
      if (full_b) kernels.bf16_to_float(b + first, staged_b, n);
      ComputePiece(p, kernels, first, n, staged_a, full_b ? staged_b : b_float, staged_a);
      ApplyActivationInPlace(staged_a, n, p.activation);
      kernels.float_to_bf16(staged_a, y + first, n);
    }
  });
}

bool RunsBf16Rows(const BinaryProblem& p) { return p.dtype == DataType::kBFloat16 && Bf16PieceElements(p) > 0; }

}  // namespace

absl::Status RunBinaryStaged(const BinaryProblem& p, const BinaryArgs& args, const ExecutionContext& context) {
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    DispatchOp<S>(p, static_cast<const T*>(args.a), static_cast<const T*>(args.b), static_cast<T*>(args.y),
                  *context.thread_pool);
    return absl::OkStatus();
  });
}

CpuBinaryAlgorithm::CpuBinaryAlgorithm(CpuIsa isa)
    : isa_(isa),
      name_(isa == CpuIsa::kBaseline ? "cpu.binary.elementwise"
                                     : absl::StrCat("cpu.binary.elementwise_", CpuIsaName(isa))) {}

absl::Status CpuBinaryAlgorithm::CanImplement(const BinaryProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (isa_ != CpuIsa::kBaseline && problem.dtype != DataType::kFloat32 && !RunsBf16Rows(problem)) {
    return absl::UnimplementedError(absl::StrCat(
        name_, " runs FP32, and BF16 with at most ", kBf16PieceElements, " channels per NHWC pixel; got ",
        DataTypeName(problem.dtype), " with ", problem.c, " channels (cpu.binary.elementwise runs it)"));
  }
  return absl::OkStatus();
}

size_t CpuBinaryAlgorithm::WorkspaceBytes(const BinaryProblem& problem) const {
  const bool converts_b = RunsBf16Rows(problem) && problem.broadcast != BinaryBroadcast::kNone;
  return converts_b ? sizeof(float) * static_cast<size_t>(problem.b_elements()) : 0;
}

int CpuBinaryAlgorithm::HeuristicScore(const BinaryProblem&) const {
  switch (isa_) {
    case CpuIsa::kAvx512: return 20;
    case CpuIsa::kAvx2: return 10;
    case CpuIsa::kBaseline: break;
  }
  return 0;
}

absl::Status CpuBinaryAlgorithm::Run(const BinaryProblem& p, const BinaryArgs& args, Workspace workspace,
                                     const ExecutionContext& context) const {
  if (RunsBf16Rows(p)) {
    CONVOY_RETURN_IF_ERROR(CheckWorkspaceBytes(name_, workspace, WorkspaceBytes(p)));
    RunBf16Rows(p, static_cast<const uint16_t*>(args.a), static_cast<const uint16_t*>(args.b),
                static_cast<uint16_t*>(args.y), static_cast<float*>(workspace.data), RowKernelsFor(isa_),
                *context.thread_pool);
    return absl::OkStatus();
  }
  if (p.dtype != DataType::kFloat32) return RunBinaryStaged(p, args, context);
  RunFp32Rows(p, static_cast<const float*>(args.a), static_cast<const float*>(args.b), static_cast<float*>(args.y),
              RowKernelsFor(isa_), *context.thread_pool);
  return absl::OkStatus();
}

CONVOY_REGISTER_PER_ISA_ALGORITHM(BinaryElementwiseOp, CpuBinaryAlgorithm);

}  // namespace convoy::cpu
