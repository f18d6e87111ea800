// FP32 building blocks shared by the GEMM-based CPU algorithms (conv2d im2col / 1x1 / Winograd, and GEMM itself):
//
//   SgemmRowMajor        OpenBLAS sgemm, always single-threaded inside the calling thread (see below);
//   LoadRowAsFloat / StoreRowFromFloat   convert a run of FP32/FP16/BF16 elements to and from FP32;
//   ApplyChannelEpilogue / ApplyPixelEpilogue   the fused epilogue over one hot row of accumulators, then the store;
//   ScratchSlots         per-thread scratch carved out of the caller's workspace (Run never allocates).
//
// Threading policy: our ThreadPool splits every conv/GEMM into independent tiles and each tile calls sgemm on one
// thread. OpenBLAS's own threads are switched off (openblas_set_num_threads(1), once per process, on first use):
// two thread pools busy-waiting on two cores slow each other down, and our tiles keep the fused epilogue on the core
// that just produced the tile. docs/kernels.md records the measurement behind this choice.
#ifndef CONVOY_KERNELS_CPU_GEMM_TILE_H_
#define CONVOY_KERNELS_CPU_GEMM_TILE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "kernels/common/dtype.h"
#include "kernels/common/epilogue.h"
#include "kernels/cpu/activation_loops.h"

namespace convoy {
namespace cpu {

// C[m, n] = op(A)[m, k] * op(B)[k, n], row-major, beta = 0. op(X) = X^T when trans_x.
void SgemmRowMajor(bool trans_a, bool trans_b, int m, int n, int k, const float* a, int lda, const float* b, int ldb,
                   float* c, int ldc);

// Switches OpenBLAS to one thread per call (idempotent). SgemmRowMajor calls it; exposed for the benchmark.
void UseSingleThreadedBlas();

// dst[i] = src[offset + i] as float, for i in [0, count). src holds `dtype` elements.
void LoadRowAsFloat(const void* src, DataType dtype, int64_t offset, int64_t count, float* dst);
// dst[offset + i] = src[i] rounded to `dtype`.
void StoreRowFromFloat(const float* src, int64_t count, void* dst, DataType dtype, int64_t offset);

// What the epilogue needs besides the accumulators: the problem's epilogue and the per-call pointers.
struct EpilogueOperands {
  Epilogue epilogue;
  const float* scale = nullptr;     // [channels] when epilogue.has_scale
  const float* bias = nullptr;      // [channels] when epilogue.has_bias
  const void* residual = nullptr;   // output-shaped, `dtype`, when epilogue.residual != kNone
  DataType dtype = DataType::kFloat32;  // of the output and the residual
};

// y[offset + j] = epilogue(acc[j]) for j in [0, count), every element in output channel `channel` (an NCHW row).
// acc may alias y + offset when the output is FP32.
void ApplyChannelEpilogue(const EpilogueOperands& ops, int channel, const float* acc, int64_t count, void* y,
                          int64_t offset);
// y[offset + j] = epilogue(acc[j]) where element j belongs to channel channel0 + j (an NHWC pixel or a GEMM row).
void ApplyPixelEpilogue(const EpilogueOperands& ops, int channel0, const float* acc, int64_t count, void* y,
                        int64_t offset);

// Number of per-thread scratch slots algorithms size their workspace for: the default pool's thread count (at most
// 64). A Run on a bigger pool still works: the extra threads wait for a free slot.
int ScratchSlotCount();

// Hands out disjoint slices of one workspace to concurrently running ParallelFor chunks. A chunk takes a slot for
// its whole duration with a Lease; there are never more concurrent chunks than pool threads.
class ScratchSlots {
 public:
  // Splits `workspace` into slots of slot_floats floats (64-byte aligned). Fails when not even one slot fits.
  static absl::Status Check(size_t workspace_bytes, size_t slot_floats);
  ScratchSlots(void* workspace, size_t workspace_bytes, size_t slot_floats);

  class Lease {
   public:
    Lease(ScratchSlots* owner, int slot) : owner_(owner), slot_(slot) {}
    ~Lease() {
      if (owner_ != nullptr) owner_->Release(slot_);
    }
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    // Null when the slots are empty (an algorithm that needs no scratch for this problem).
    float* data() const { return owner_ == nullptr ? nullptr : owner_->base_ + owner_->stride_floats_ * slot_; }

   private:
    ScratchSlots* owner_;
    int slot_;
  };
  // Blocks (yielding) until a slot is free. With slot_floats == 0 returns an empty lease at once.
  Lease Acquire();

  static size_t AlignedSlotFloats(size_t slot_floats) { return (slot_floats + 15) / 16 * 16; }

 private:
  void Release(int slot);
  float* base_;
  size_t stride_floats_;
  int slots_;
  std::atomic<uint64_t> busy_{0};
};

// Bytes of a workspace holding ScratchSlotCount() slots of slot_floats floats.
size_t ScratchWorkspaceBytes(size_t slot_floats);

// Converts a filter of `count` FP16/BF16/FP32 elements to FP32 (the packed filter of the GEMM algorithms for
// reduced-precision problems).
void ConvertFilterToFloat(const void* filter, DataType dtype, int64_t count, float* packed);

}  // namespace cpu
}  // namespace convoy

#endif  // CONVOY_KERNELS_CPU_GEMM_TILE_H_
