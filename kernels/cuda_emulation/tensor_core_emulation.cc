// mma.sync / ldmatrix / cp.async emulation (see tensor_core_emulation.h). Fragment layouts follow the PTX ISA's
// "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8" figures: with g = lane / 4 and t = lane % 4,
//   A (row-major, 16 x K): register i holds rows g (+8 for odd i) and columns 2t, 2t+1 (+8 for i >= 2) [16-bit], or
//                          row g (+8 for odd i), column t (+4 for i >= 2) [tf32];
//   B ("col", K x 8):      register i holds rows (k) 2t, 2t+1 (+8 for i = 1) [16-bit] or t (+4) [tf32], column g;
//   C/D (16 x 8 float):    element i is row g (+8 for i >= 2), column 2t + (i & 1).
// 16-bit pairs are packed with the lower column (or row) in the low half of the register.
// "Matrix Fragments for mma.m16n8k32" (8-bit integers, four per register, the lowest k in the lowest byte):
//   A (row-major, 16 x 32): register i holds row g (+8 for odd i), columns 4t .. 4t+3 (+16 for i >= 2);
//   B ("col", 32 x 8):      register i holds rows (k) 4t .. 4t+3 (+16 for i = 1), column g;
//   C/D (16 x 8 s32):       as the float accumulators above.
#include "kernels/cuda_emulation/tensor_core_emulation.h"

#include <cstring>
#include <string>

#include "absl/strings/str_format.h"
#include "kernels/cuda_emulation/float16.h"

namespace convoy::cuda_emulation {
namespace {

enum class MmaInput { kF16, kBf16, kTf32 };

struct MmaLane {
  const uint32_t* a;
  const uint32_t* b;
  float acc[4];
};

float Low16(uint32_t word, MmaInput input) {
  const uint16_t bits = static_cast<uint16_t>(word & 0xFFFFu);
  return input == MmaInput::kF16 ? HalfBitsToFloat(bits) : Bfloat16BitsToFloat(bits);
}
float High16(uint32_t word, MmaInput input) {
  const uint16_t bits = static_cast<uint16_t>(word >> 16);
  return input == MmaInput::kF16 ? HalfBitsToFloat(bits) : Bfloat16BitsToFloat(bits);
}
float Tf32(uint32_t word) { return BitsToFloat(word & 0xFFFFE000u); }

// Gathers the warp's fragments into A[16][K], B[K][8], C[16][8], multiplies, scatters D back into the lanes.
template <MmaInput kInput>
std::string ResolveMma(void* const payloads[kWarpSize], unsigned) {
  constexpr int kK = kInput == MmaInput::kTf32 ? 8 : 16;
  float a[16][kK], b[kK][8], c[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const MmaLane& in = *static_cast<const MmaLane*>(payloads[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      const int row = g + 8 * (i & 1);
      if (kInput == MmaInput::kTf32) {
        a[row][t + 4 * (i >> 1)] = Tf32(in.a[i]);
      } else {
        const int col = 2 * t + 8 * (i >> 1);
        a[row][col] = Low16(in.a[i], kInput);
        a[row][col + 1] = High16(in.a[i], kInput);
      }
      c[g + 8 * (i >> 1)][2 * t + (i & 1)] = in.acc[i];
    }
    for (int i = 0; i < 2; ++i) {
      if (kInput == MmaInput::kTf32) {
        b[t + 4 * i][g] = Tf32(in.b[i]);
      } else {
        b[2 * t + 8 * i][g] = Low16(in.b[i], kInput);
        b[2 * t + 8 * i + 1][g] = High16(in.b[i], kInput);
      }
    }
  }
  // D = C + sum over k of A * B, every output summed in the order c, k = 0, 1, ... (the loops run k outermost so the
  // 128 independent sums vectorize; the products of 16-bit or TF32 inputs are exact in double).
  double d[16][8];
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 8; ++col) d[row][col] = c[row][col];
  }
  for (int k = 0; k < kK; ++k) {
    for (int row = 0; row < 16; ++row) {
      const double a_rk = a[row][k];
      for (int col = 0; col < 8; ++col) d[row][col] += a_rk * double{b[k][col]};
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    MmaLane& out = *static_cast<MmaLane*>(payloads[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) out.acc[i] = static_cast<float>(d[g + 8 * (i >> 1)][2 * t + (i & 1)]);
  }
  return "";
}

// The 8-bit integer mma: A's bytes signed (s8) or unsigned (u8), B's signed.
enum class MmaIntegerA { kS8, kU8 };

struct MmaIntegerLane {
  const uint32_t* a;
  const uint32_t* b;
  int32_t acc[4];
};

int ByteOf(uint32_t word, int byte, bool is_signed) {
  const uint32_t bits = (word >> (8 * byte)) & 0xFFu;
  return is_signed ? static_cast<int>(static_cast<int8_t>(bits)) : static_cast<int>(bits);
}

template <MmaIntegerA kA>
std::string ResolveMmaInteger(void* const payloads[kWarpSize], unsigned) {
  int a[16][32], b[32][8];
  int64_t d[16][8];
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const MmaIntegerLane& in = *static_cast<const MmaIntegerLane*>(payloads[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      for (int byte = 0; byte < 4; ++byte) {
        a[g + 8 * (i & 1)][4 * t + 16 * (i >> 1) + byte] = ByteOf(in.a[i], byte, kA == MmaIntegerA::kS8);
      }
      d[g + 8 * (i >> 1)][2 * t + (i & 1)] = in.acc[i];
    }
    for (int i = 0; i < 2; ++i) {
      for (int byte = 0; byte < 4; ++byte) b[4 * t + 16 * i + byte][g] = ByteOf(in.b[i], byte, true);
    }
  }
  for (int k = 0; k < 32; ++k) {
    for (int row = 0; row < 16; ++row) {
      for (int col = 0; col < 8; ++col) d[row][col] += int64_t{a[row][k]} * b[k][col];
    }
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    MmaIntegerLane& out = *static_cast<MmaIntegerLane*>(payloads[lane]);
    const int g = lane / 4, t = lane % 4;
    for (int i = 0; i < 4; ++i) {
      // Wraps modulo 2^32 like the s32 accumulator (the conversion of an out-of-range value is modular in C++20 and
      // in every C++17 compiler this builds with).
      out.acc[i] = static_cast<int32_t>(static_cast<uint32_t>(d[g + 8 * (i >> 1)][2 * t + (i & 1)]));
    }
  }
  return "";
}

constexpr WarpCollectiveKind kMmaS8{"mma.sync.m16n8k32.s32.s8.s8.s32", &ResolveMmaInteger<MmaIntegerA::kS8>};
constexpr WarpCollectiveKind kMmaU8S8{"mma.sync.m16n8k32.s32.u8.s8.s32", &ResolveMmaInteger<MmaIntegerA::kU8>};

void MmaInteger(const WarpCollectiveKind& kind, int32_t acc[4], const uint32_t a[4], const uint32_t b[2],
                SourceLocation where) {
  MmaIntegerLane lane{a, b, {acc[0], acc[1], acc[2], acc[3]}};
  BlockScheduler::Current().WarpCollective(kind, 0xFFFFFFFFu, &lane, where);
  for (int i = 0; i < 4; ++i) acc[i] = lane.acc[i];
}

constexpr WarpCollectiveKind kMmaF16{"mma.sync.m16n8k16.f32.f16.f16.f32", &ResolveMma<MmaInput::kF16>};
constexpr WarpCollectiveKind kMmaBf16{"mma.sync.m16n8k16.f32.bf16.bf16.f32", &ResolveMma<MmaInput::kBf16>};
constexpr WarpCollectiveKind kMmaTf32{"mma.sync.m16n8k8.f32.tf32.tf32.f32", &ResolveMma<MmaInput::kTf32>};

void Mma(const WarpCollectiveKind& kind, float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  MmaLane lane{a, b, {acc[0], acc[1], acc[2], acc[3]}};
  BlockScheduler::Current().WarpCollective(kind, 0xFFFFFFFFu, &lane, where);
  for (int i = 0; i < 4; ++i) acc[i] = lane.acc[i];
}

struct LdMatrixLane {
  const void* row_address;
  int matrices;
  bool transpose;
  uint32_t out[4];
};

std::string ResolveLdMatrix(void* const payloads[kWarpSize], unsigned) {
  const LdMatrixLane& first = *static_cast<const LdMatrixLane*>(payloads[0]);
  uint16_t m[4][8][8];  // [matrix][row][column]
  for (int lane = 0; lane < kWarpSize; ++lane) {
    const LdMatrixLane& in = *static_cast<const LdMatrixLane*>(payloads[lane]);
    if (in.matrices != first.matrices || in.transpose != first.transpose) {
      return absl::StrFormat("lane %d asks for x%d%s but lane 0 for x%d%s", lane, in.matrices,
                             in.transpose ? ".trans" : "", first.matrices, first.transpose ? ".trans" : "");
    }
    if (lane < 8 * first.matrices) std::memcpy(m[lane / 8][lane % 8], in.row_address, 16);
  }
  for (int lane = 0; lane < kWarpSize; ++lane) {
    LdMatrixLane& out = *static_cast<LdMatrixLane*>(payloads[lane]);
    const int r = lane / 4, c = 2 * (lane % 4);
    for (int i = 0; i < first.matrices; ++i) {
      const uint16_t lo = first.transpose ? m[i][c][r] : m[i][r][c];
      const uint16_t hi = first.transpose ? m[i][c + 1][r] : m[i][r][c + 1];
      out.out[i] = static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
    }
  }
  return "";
}

constexpr WarpCollectiveKind kLdMatrix{"ldmatrix.sync.aligned.m8n8.shared.b16", &ResolveLdMatrix};

}  // namespace

void MmaM16N8K16F16F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  Mma(kMmaF16, acc, a, b, where);
}
void MmaM16N8K16Bf16F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  Mma(kMmaBf16, acc, a, b, where);
}
void MmaM16N8K8Tf32F32(float acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  Mma(kMmaTf32, acc, a, b, where);
}

void MmaM16N8K32S8S8S32(int32_t acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  MmaInteger(kMmaS8, acc, a, b, where);
}
void MmaM16N8K32U8S8S32(int32_t acc[4], const uint32_t a[4], const uint32_t b[2], SourceLocation where) {
  MmaInteger(kMmaU8S8, acc, a, b, where);
}

void LdMatrix(int matrices, bool transpose, uint32_t* out, const void* row_address, SourceLocation where) {
  BlockScheduler& scheduler = BlockScheduler::Current();
  const int lane = scheduler.current_lane();
  if (lane < 8 * matrices) {
    if (reinterpret_cast<uintptr_t>(row_address) % 16 != 0 || !scheduler.IsShared(row_address, 16)) {
      std::string message = absl::StrFormat(
          "ldmatrix (%s): lane %d's row address %p must be 16-byte aligned and inside declared shared memory",
          where.ToString(), lane, row_address);
      scheduler.FailCurrentThread(std::move(message));
    }
  }
  LdMatrixLane payload{row_address, matrices, transpose, {0, 0, 0, 0}};
  scheduler.WarpCollective(kLdMatrix, 0xFFFFFFFFu, &payload, where);
  for (int i = 0; i < matrices; ++i) out[i] = payload.out[i];
}

void CpAsync(void* shared_destination, const void* global_source, int copy_bytes, int source_bytes,
             SourceLocation where) {
  BlockScheduler& scheduler = BlockScheduler::Current();
  const uintptr_t destination = reinterpret_cast<uintptr_t>(shared_destination);
  const uintptr_t source = reinterpret_cast<uintptr_t>(global_source);
  if ((copy_bytes != 4 && copy_bytes != 8 && copy_bytes != 16) || source_bytes < 0 || source_bytes > copy_bytes) {
    std::string message = absl::StrFormat(
        "cp.async (%s): copy size %d / source size %d: expected 4, 8 or 16 "
        "and a source size in [0, copy size]",
        where.ToString(), copy_bytes, source_bytes);
    scheduler.FailCurrentThread(std::move(message));
  }
  if (destination % copy_bytes != 0 || !scheduler.IsShared(shared_destination, copy_bytes)) {
    std::string message =
        absl::StrFormat("cp.async (%s): destination %p must be %d-byte aligned and inside declared shared memory",
                        where.ToString(), shared_destination, copy_bytes);
    scheduler.FailCurrentThread(std::move(message));
  }
  if (source_bytes > 0 && source % copy_bytes != 0) {
    std::string message =
        absl::StrFormat("cp.async (%s): source %p is not %d-byte aligned", where.ToString(), global_source, copy_bytes);
    scheduler.FailCurrentThread(std::move(message));
  }
  PendingAsyncCopy copy{shared_destination, {}, copy_bytes, -1};
  std::memset(copy.bytes, 0, sizeof(copy.bytes));
  if (source_bytes > 0) std::memcpy(copy.bytes, global_source, source_bytes);
  scheduler.pending_async_copies().push_back(copy);
}

void CpAsyncCommitGroup() {
  BlockScheduler& scheduler = BlockScheduler::Current();
  const int64_t group = ++scheduler.committed_async_groups();
  for (PendingAsyncCopy& copy : scheduler.pending_async_copies()) {
    if (copy.group < 0) copy.group = group;
  }
}

void CpAsyncWaitGroup(int pending) {
  BlockScheduler& scheduler = BlockScheduler::Current();
  const int64_t complete_up_to = scheduler.committed_async_groups() - pending;
  std::vector<PendingAsyncCopy>& copies = scheduler.pending_async_copies();
  size_t kept = 0;
  for (PendingAsyncCopy& copy : copies) {
    if (copy.group >= 0 && copy.group <= complete_up_to) {
      std::memcpy(copy.destination, copy.bytes, copy.size);
    } else {
      copies[kept++] = copy;
    }
  }
  copies.resize(kept);
}

void CpAsyncWaitAll() {
  CpAsyncCommitGroup();
  CpAsyncWaitGroup(0);
}

uint32_t FloatToTf32Bits(float value) {
  const uint32_t bits = FloatBits(value);
  if ((bits & 0x7F800000u) == 0x7F800000u) return bits;  // inf and NaN pass through
  return (bits + 0x1000u) & 0xFFFFE000u;                 // ties away from zero on the magnitude
}

}  // namespace convoy::cuda_emulation
