// Launchers of hopper_kernels.cu: small sm_90a kernels that drive one Hopper instruction each, for the emulation's
// tests (hopper_emulation_test.cc). Built by the emulation and by nvcc for sm_90a (proves the PTX assembles).
// Pointers are device pointers; every launcher returns the launch's cudaError_t.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_HOPPER_KERNELS_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_HOPPER_KERNELS_H_

#include <cstdint>

#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/tensor_map_host.h"

namespace convoy::cuda_emulation_testdata {

// The planted mistakes the probes can make (kNone: a correct kernel).
enum class HopperMistake {
  kNone,
  kMissingProxyFence,      // generic stores into the operands, no fence.proxy.async before the wgmma
  kProxyFenceByOneThread,  // every thread stores into the operands, only thread 0 executes fence.proxy.async
  kMissingWgmmaWait,       // reads the accumulators after commit_group without wgmma.wait_group
  kMissingWgmmaFence,      // no wgmma.fence before the first wgmma
  kWrongMbarrierParity,    // waits on parity 1 for the first phase (passes before the copy landed)
  kMissingMbarrierFence,   // no fence after mbarrier.init before the bulk copy uses it
  kReleaseBeforeWait,      // refills a stage with a bulk copy while the wgmma reading it is in flight
  kOneThreadRelease,       // the stage's empty barrier counts 1 arrival: thread 0 releases it after its own wait
  kNonUniformSetMaxNReg,   // half the warpgroup asks for another register count
  kOverIncrease,           // setmaxnreg.inc asks for more registers than setmaxnreg.dec released
  kUnalignedDynamicShared,  // the bulk copy lands at the dynamic shared base without rounding it up to 1024 bytes
  kMisalignedWarpgroup,    // warps 2-5 issue the wgmma (not a warpgroup: those start at warp 4w)
};

// One wgmma.mma_async.m64n64k16 (f16, f32 accumulate) by a block of `threads` threads (128: one warpgroup): the
// kernel copies a_image / b_image (bytes of shared memory, laid out by the test) into dynamic shared memory at offsets
// 0 and a_bytes (both 1024-byte aligned), makes the descriptors from the given (leading, stride, swizzle) fields and
// writes each thread's 32 accumulators to d[thread * 32 + v]. transpose_a / transpose_b select MN-major operands.
// `a_in_registers`: A comes from a_registers[thread * 4 + i] instead (register-source wgmma).
struct WgmmaProbe {
  const uint8_t* a_image = nullptr;
  int a_bytes = 0;
  const uint8_t* b_image = nullptr;
  int b_bytes = 0;
  uint32_t a_leading = 0, a_stride = 0, b_leading = 0, b_stride = 0;
  int a_swizzle = 0, b_swizzle = 0;
  bool transpose_a = false, transpose_b = false;
  bool a_in_registers = false;
  const uint32_t* a_registers = nullptr;
  int threads = 128;
  HopperMistake mistake = HopperMistake::kNone;
};
cudaError_t LaunchWgmmaProbe(const WgmmaProbe& probe, float* d, cudaStream_t stream);

// The integer form: wgmma.mma_async.m64n64k32.s32.s8.s8 (or .u8.s8 when a_unsigned) over the probe's operands (8-bit,
// K-major: transpose_a / transpose_b are ignored), issued twice, the second accumulating onto the first (so d holds
// twice the product, proving scale-d); d[thread * 32 + v] the int32 accumulators.
cudaError_t LaunchWgmmaInt8Probe(const WgmmaProbe& probe, bool a_unsigned, int32_t* d, cudaStream_t stream);

// A bulk tensor copy of `map` (2D tiled at coordinates c[0..1], or 4D im2col at c[0..3] with offsets) into shared
// memory, waited on an mbarrier (with expect_tx of `bytes`), then the raw shared bytes [0, bytes) copied to out.
cudaError_t LaunchTmaProbe(const CUtensorMap& map, bool im2col, const int32_t* coordinates, const uint16_t* offsets,
                           uint32_t bytes, uint8_t* out, HopperMistake mistake, cudaStream_t stream);

// A two-stage producer/consumer pipeline: warpgroup 1 (one thread) loads k_tiles 64x64 f16 tiles of a [64, 64 *
// k_tiles] row-major matrix (map: 2D tiled, box 64x64, 128B swizzle) and the same tiles of b; warpgroup 0 multiplies
// them with wgmma (m64n64k16, 4 per tile) and writes d = a * b^T as [64][64] floats; every consumer thread arrives on
// the stage's empty barrier (count 128) after its wgmma.wait_group. 256 threads.
cudaError_t LaunchWgmmaPipeline(const CUtensorMap& a_map, const CUtensorMap& b_map, int k_tiles, float* d,
                                HopperMistake mistake, cudaStream_t stream);

// setmaxnreg by a block of 384 threads, 168 registers each at entry (three warpgroups: dec 40 / inc 232 / inc 232, the
// split of the Hopper conv kernels), out[t] = 1 for every thread that ran on.
cudaError_t LaunchSetMaxNRegProbe(int* out, HopperMistake mistake, cudaStream_t stream);

}  // namespace convoy::cuda_emulation_testdata

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TESTDATA_HOPPER_KERNELS_H_
