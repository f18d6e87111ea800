// FP32 building blocks shared by the GEMM-based CPU algorithms; see gemm_tile.h.
#include "kernels/cpu/gemm_tile.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "kernels/common/thread_pool.h"

namespace convoy {
namespace cpu {
namespace {

constexpr int64_t kEpilogueChunk = 256;  // floats converted and finished at a time (stays in L1)

}  // namespace

void UseSingleThreadedBlas() {
  static std::once_flag once;
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

void SgemmRowMajor(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                   float* c, int ldc) {
  UseSingleThreadedBlas();
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              a, lda, b, ldb, 0.0f, c, ldc);
}

void LoadRowAsFloat(const void* src, DataType dtype, int64_t offset, int64_t count, float* dst) {
  switch (dtype) {
    case DataType::kFloat32:
      std::memcpy(dst, static_cast<const float*>(src) + offset, sizeof(float) * count);
      return;
    case DataType::kFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      for (int64_t i = 0; i < count; ++i) dst[i] = HalfBitsToFloat(s[i]);
      return;
    }
    case DataType::kBFloat16: {
      const uint16_t* s = static_cast<const uint16_t*>(src) + offset;
      for (int64_t i = 0; i < count; ++i) dst[i] = BFloat16BitsToFloat(s[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < count; ++i) dst[i] = LoadAsFloat(src, dtype, static_cast<size_t>(offset + i));
  }
}

void StoreRowFromFloat(const float* src, int64_t count, void* dst, DataType dtype, int64_t offset) {
  switch (dtype) {
    case DataType::kFloat32: {
      float* d = static_cast<float*>(dst) + offset;
      if (d != src) std::memmove(d, src, sizeof(float) * count);
      return;
    }
    case DataType::kFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      for (int64_t i = 0; i < count; ++i) d[i] = FloatToHalfBits(src[i]);
      return;
    }
    case DataType::kBFloat16: {
      uint16_t* d = static_cast<uint16_t*>(dst) + offset;
      for (int64_t i = 0; i < count; ++i) d[i] = FloatToBFloat16Bits(src[i]);
      return;
    }
    default:
      for (int64_t i = 0; i < count; ++i) StoreFromFloat(dst, dtype, static_cast<size_t>(offset + i), src[i]);
  }
}

namespace {

// The shared body of both epilogues: channel_step 0 means one channel for the whole run, 1 one channel per element.
void ApplyEpilogueRun(const EpilogueOperands& ops, int channel0, int channel_step, const float* acc, int64_t count,
                      void* y, int64_t offset) {
  const Epilogue& e = ops.epilogue;
  const bool trivial = !e.has_scale && !e.has_bias && e.residual == ResidualMode::kNone &&
                       e.activation.kind == ActivationKind::kIdentity;
  if (trivial && ops.dtype == DataType::kFloat32 && acc == static_cast<float*>(y) + offset) return;
  float values[kEpilogueChunk];
  float residual[kEpilogueChunk];
  for (int64_t j0 = 0; j0 < count; j0 += kEpilogueChunk) {
    const int64_t n = std::min(kEpilogueChunk, count - j0);
    const int first = channel0 + static_cast<int>(j0) * channel_step;
    std::memcpy(values, acc + j0, sizeof(float) * n);
    if (e.has_scale) {
      for (int64_t j = 0; j < n; ++j) values[j] *= ops.scale[first + j * channel_step];
    }
    if (e.has_bias) {
      for (int64_t j = 0; j < n; ++j) values[j] += ops.bias[first + j * channel_step];
    }
    if (e.residual != ResidualMode::kNone) LoadRowAsFloat(ops.residual, ops.dtype, offset + j0, n, residual);
    if (e.residual == ResidualMode::kBeforeActivation) {
      for (int64_t j = 0; j < n; ++j) values[j] += residual[j];
    }
    ApplyActivationInPlace(values, n, e.activation);
    if (e.residual == ResidualMode::kAfterActivation) {
      for (int64_t j = 0; j < n; ++j) values[j] += residual[j];
    }
    StoreRowFromFloat(values, n, y, ops.dtype, offset + j0);
  }
}

}  // namespace

void ApplyChannelEpilogue(const EpilogueOperands& ops, int channel, const float* acc, int64_t count, void* y,
                          int64_t offset) {
  ApplyEpilogueRun(ops, channel, 0, acc, count, y, offset);
}

void ApplyPixelEpilogue(const EpilogueOperands& ops, int channel0, const float* acc, int64_t count, void* y,
                        int64_t offset) {
  ApplyEpilogueRun(ops, channel0, 1, acc, count, y, offset);
}

int ScratchSlotCount() { return std::min(64, std::max(1, ThreadPool::DefaultThreadCount())); }

size_t ScratchWorkspaceBytes(size_t slot_floats) {
  return ScratchSlots::AlignedSlotFloats(slot_floats) * sizeof(float) * ScratchSlotCount();
}

absl::Status ScratchSlots::Check(size_t workspace_bytes, size_t slot_floats) {
  const size_t need = AlignedSlotFloats(slot_floats) * sizeof(float);
  if (workspace_bytes < need) {
    return absl::InvalidArgumentError(
        absl::StrCat("workspace of ", workspace_bytes, " bytes is smaller than one thread's scratch (", need, ")"));
  }
  return absl::OkStatus();
}

ScratchSlots::ScratchSlots(void* workspace, size_t workspace_bytes, size_t slot_floats)
    : base_(static_cast<float*>(workspace)),
      stride_floats_(AlignedSlotFloats(slot_floats)),
      slots_(static_cast<int>(std::min<size_t>(64, workspace_bytes / (std::max<size_t>(1, AlignedSlotFloats(
                                                                         slot_floats)) * sizeof(float))))) {}

ScratchSlots::Lease ScratchSlots::Acquire() {
  if (stride_floats_ == 0) return Lease(nullptr, 0);
  for (;;) {
    uint64_t busy = busy_.load(std::memory_order_relaxed);
    for (int slot = 0; slot < slots_; ++slot) {
      const uint64_t bit = uint64_t{1} << slot;
      if (busy & bit) continue;
      if (busy_.compare_exchange_weak(busy, busy | bit, std::memory_order_acquire)) return Lease(this, slot);
      slot = -1;  // busy was reloaded by the failed exchange: rescan from the first slot
    }
    std::this_thread::yield();
  }
}

void ScratchSlots::Release(int slot) { busy_.fetch_and(~(uint64_t{1} << slot), std::memory_order_release); }

void ConvertFilterToFloat(const void* filter, DataType dtype, int64_t count, float* packed) {
  LoadRowAsFloat(filter, dtype, 0, count, packed);
}

}  // namespace cpu
}  // namespace convoy
