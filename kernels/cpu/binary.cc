#include "kernels/cpu/binary.h"

#include <algorithm>

#include "kernels/cpu/activation.h"
#include "kernels/cpu/convert_element.h"
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

}  // namespace

absl::Status CpuBinaryAlgorithm::Run(const BinaryProblem& p, const BinaryArgs& args, Workspace,
                                     const ExecutionContext& context) const {
  return DispatchFloatStorage(p.dtype, [&](auto storage) {
    using S = decltype(storage);
    using T = typename S::T;
    DispatchOp<S>(p, static_cast<const T*>(args.a), static_cast<const T*>(args.b), static_cast<T*>(args.y),
                  *context.thread_pool);
    return absl::OkStatus();
  });
}

CONVOY_REGISTER_ALGORITHM(BinaryElementwiseOp, CpuBinaryAlgorithm);

}  // namespace convoy::cpu
