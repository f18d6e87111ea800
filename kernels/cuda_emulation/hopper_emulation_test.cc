// The Hopper emulation against the PTX ISA: the matrix-descriptor bit fields, the swizzle patterns, the canonical
// shared-memory layouts and the wgmma register fragments are checked against tables and formulas written here from
// the ISA's own definitions (not from the emulation's code), by running small sm_90a kernels
// (testdata/hopper_kernels.cu); the bulk tensor copy (tiled and im2col, out-of-bounds fill, swizzle) against the
// ISA's im2col examples; mbarrier phases and transaction counts through a producer/consumer pipeline; and every
// planted mistake (wrong descriptor field, wrong swizzle mode, wrong mbarrier parity, missing proxy fence, missing
// wgmma wait or fence, a stage released before its wgmma retired, a split warpgroup, a non-uniform setmaxnreg) is
// caught.
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/hopper_emulation.h"
#include "kernels/cuda_emulation/tensor_map.h"
#include "kernels/cuda_emulation/test_device_buffer.h"
#include "kernels/cuda_emulation/testdata/hopper_kernels.h"

namespace convoy::cuda_emulation {
namespace {

namespace testdata = ::convoy::cuda_emulation_testdata;
using testdata::HopperMistake;
using ::testing::HasSubstr;

// ------------------------------------------------------------------------------------ tables from the PTX ISA

// Matrix descriptor format (ISA 9.7.15.5.1.2.2): bits 13-0 start address >> 4, 29-16 leading dimension byte offset
// >> 4, 45-32 stride dimension byte offset >> 4, 51-49 base offset, 63-62 swizzle (0 none, 1 128B, 2 64B, 3 32B).
TEST(MatrixDescriptorTest, FieldsSitWhereTheIsaPutsThem) {
  struct Row {
    uint64_t descriptor;
    uint32_t start, leading, stride;
    int base_offset, swizzle;
  };
  const Row table[] = {
      {0x0000000000000001ull, 16, 0, 0, 0, 0},
      {0x0000000000003FFFull, 0x3FFF0, 0, 0, 0, 0},
      {0x0000000000010000ull, 0, 16, 0, 0, 0},
      {0x0000000100000000ull, 0, 0, 16, 0, 0},
      {0x0000004000000000ull, 0, 0, 0x40000 >> 4 << 4 & 0x3FFF0, 0, 0},  // bit 38: stride bit 6 -> 1024 bytes
      {0x0002000000000000ull, 0, 0, 0, 1, 0},
      {0x000E000000000000ull, 0, 0, 0, 7, 0},
      {0x4000000000000000ull, 0, 0, 0, 0, 128},
      {0x8000000000000000ull, 0, 0, 0, 0, 64},
      {0xC000000000000000ull, 0, 0, 0, 0, 32},
  };
  for (const Row& row : table) {
    SCOPED_TRACE(::testing::Message() << std::hex << row.descriptor);
    const MatrixDescriptor d = DecodeMatrixDescriptor(row.descriptor);
    EXPECT_EQ(d.start_address, row.start);
    EXPECT_EQ(d.leading_byte_offset, row.leading);
    if (row.descriptor == 0x0000004000000000ull) {
      EXPECT_EQ(d.stride_byte_offset, 1024u);
    } else {
      EXPECT_EQ(d.stride_byte_offset, row.stride);
    }
    EXPECT_EQ(d.base_offset, row.base_offset);
    EXPECT_EQ(d.swizzle_bytes, row.swizzle);
    EXPECT_EQ(EncodeMatrixDescriptor(d), row.descriptor);
  }
}

// The swizzle patterns of the ISA's shared-memory layout figures: within each repeating pattern (256, 512, 1024
// bytes), the 16-byte chunk at position p of row r holds logical chunk table[r][p]. Rows are 32, 64, 128 bytes.
TEST(SwizzleTest, PatternsMatchTheIsaFigures) {
  const int k128[8][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5},
                          {3, 2, 1, 0, 7, 6, 5, 4}, {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
                          {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
  const int k64[8][4] = {{0, 1, 2, 3}, {0, 1, 2, 3}, {1, 0, 3, 2}, {1, 0, 3, 2},
                         {2, 3, 0, 1}, {2, 3, 0, 1}, {3, 2, 1, 0}, {3, 2, 1, 0}};
  const int k32[8][2] = {{0, 1}, {0, 1}, {0, 1}, {0, 1}, {1, 0}, {1, 0}, {1, 0}, {1, 0}};
  for (uint32_t base : {0u, 1024u, 5 * 1024u}) {
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 8; ++c) {
        EXPECT_EQ(SwizzleSharedAddress(base + r * 128 + c * 16, 128, 0), base + r * 128 + k128[r][c] * 16);
      }
      for (int c = 0; c < 4; ++c) {
        EXPECT_EQ(SwizzleSharedAddress(base + r * 64 + c * 16, 64, 0), base + r * 64 + k64[r][c] * 16);
      }
      for (int c = 0; c < 2; ++c) {
        EXPECT_EQ(SwizzleSharedAddress(base + r * 32 + c * 16, 32, 0), base + r * 32 + k32[r][c] * 16);
      }
    }
  }
  // A 128B pattern that starts 3 rows into a 1024-byte block (base offset = (start >> 7) & 7 = 3) uses row 0's
  // pattern at its first row.
  EXPECT_EQ(SwizzleSharedAddress(3 * 128 + 2 * 16, 128, 3), 3u * 128 + 2 * 16);
  EXPECT_EQ(SwizzleSharedAddress(4 * 128 + 2 * 16, 128, 3), 4u * 128 + 3 * 16);
  EXPECT_EQ(SwizzleSharedAddress(0x40, 0, 0), 0x40u);
}

// Element addresses of the canonical layouts (CuTe's notation of the ISA's figures; T = 8 f16 per 16 bytes):
//   K-major, no swizzle:  ((8,m),(T,2)):((1T,SBO),(1,LBO))      K-major, 128B: ((8,m),(T,2)):((8T,SBO),(1,T))
//   MN-major, no swizzle: ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))  MN-major, 128B: ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))
TEST(CanonicalLayoutTest, ElementAddressesMatchHandComputedExamples) {
  MatrixDescriptor none;
  none.leading_byte_offset = 128, none.stride_byte_offset = 256;
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 0, 0), 0u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 0, 7), 14u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 0, 8), 128u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 1, 0), 16u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 7, 0), 112u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 8, 0), 256u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 2, 9, 9), 256u + 16 + 128 + 2);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 4, 9, 5), 256u + 16 + 128 + 4);  // tf32: 4 per chunk
  MatrixDescriptor sw128;
  sw128.stride_byte_offset = 1024, sw128.swizzle_bytes = 128, sw128.leading_byte_offset = 16;
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 1, 0), 128u + 16);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 1, 8), 128u);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 3, 10), 384u + 2 * 16 + 4);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 8, 0), 1024u);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 9, 0), 1024u + 128 + 16);
  sw128.start_address = 64;  // the third k16 step of a 128-byte row: chunks 4 and 5 before the swizzle
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 2, 2, 0), 256u + 6 * 16);
  MatrixDescriptor mn_none;
  mn_none.leading_byte_offset = 256, mn_none.stride_byte_offset = 128;
  EXPECT_EQ(WgmmaOperandElementAddress(mn_none, true, 2, 1, 0), 2u);
  EXPECT_EQ(WgmmaOperandElementAddress(mn_none, true, 2, 0, 1), 16u);
  EXPECT_EQ(WgmmaOperandElementAddress(mn_none, true, 2, 8, 0), 128u);
  EXPECT_EQ(WgmmaOperandElementAddress(mn_none, true, 2, 0, 8), 256u);
  MatrixDescriptor mn128;
  mn128.leading_byte_offset = 8192, mn128.stride_byte_offset = 1024, mn128.swizzle_bytes = 128;
  EXPECT_EQ(WgmmaOperandElementAddress(mn128, true, 2, 8, 1), 128u);  // chunk 1 of row 1 -> position 0
  EXPECT_EQ(WgmmaOperandElementAddress(mn128, true, 2, 64, 0), 8192u);
  EXPECT_EQ(WgmmaOperandElementAddress(mn128, true, 2, 3, 9), 1024u + 128 + 16 + 6);
  // 8-bit elements (K-major only): 16 per 16-byte core-matrix row, so k32 spans two chunks.
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 1, 0, 15), 15u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 1, 0, 16), 128u);  // the leading byte offset
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 1, 1, 0), 16u);
  EXPECT_EQ(WgmmaOperandElementAddress(none, false, 1, 8, 31), 256u + 128 + 15);
  sw128.start_address = 0;
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 1, 0, 31), 31u);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 1, 1, 0), 128u + 16);  // row 1: chunks XOR 1
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 1, 1, 17), 128u + 1);
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 1, 9, 3), 1024u + 128 + 16 + 3);
  sw128.start_address = 64;  // the third k32 step of a 128-byte row: chunks 4 and 5 before the swizzle
  EXPECT_EQ(WgmmaOperandElementAddress(sw128, false, 1, 2, 16), 256u + 7 * 16);
}

// ------------------------------------------------------------------------------------------- wgmma in a kernel

uint16_t HalfBits(float v) { return FloatToHalfBits(v); }

// Elements of the 64x64 product got = a x b^T (a, b: [64, cols]) that differ from it computed in double and rounded.
int WrongProducts(const std::vector<float>& got, const std::vector<float>& a, const std::vector<float>& b, int cols) {
  int wrong = 0;
  for (int m = 0; m < 64; ++m) {
    for (int n = 0; n < 64; ++n) {
      double expected = 0;
      for (int k = 0; k < cols; ++k) expected += double{a[m * cols + k]} * b[n * cols + k];
      wrong += got[m * 64 + n] != static_cast<float>(expected);
    }
  }
  return wrong;
}

// The swizzle modes' XOR of the 16-byte chunk index (address bits 4-6) with the row phase (bits 7-9).
uint32_t Swizzled(uint32_t pre, int swizzle) {
  if (swizzle == 0) return pre;
  const uint32_t bits = swizzle == 128 ? 7 : swizzle == 64 ? 3 : 1;
  const uint32_t chunk = ((pre >> 4) ^ ((pre >> 7) & bits)) << 4;
  return (pre & ~uint32_t{0x70}) | (chunk & 0x70) | (pre & 15);
}

// A canonical-layout image written by the test's own reading of the ISA figures (see the comment above
// CanonicalLayoutTest): element (mn, k) of a rows x 16 f16 operand.
uint32_t ImageOffset(int mn, int k, bool mn_major, int swizzle, uint32_t lbo, uint32_t sbo) {
  uint32_t pre;
  if (!mn_major) {
    pre = swizzle == 0 ? (mn / 8) * sbo + (mn % 8) * 16 + (k / 8) * lbo + (k % 8) * 2
                       : (mn / 8) * sbo + (mn % 8) * swizzle + (k / 8) * 16 + (k % 8) * 2;
  } else {
    const int chunks = swizzle == 0 ? 1 : swizzle / 16;
    pre = swizzle == 0 ? (mn % 8) * 2 + (mn / 8) * sbo + (k % 8) * 16 + (k / 8) * lbo
                       : (mn % 8) * 2 + ((mn / 8) % chunks) * 16 + (mn / (8 * chunks)) * lbo + (k % 8) * swizzle +
                             (k / 8) * sbo;
  }
  return Swizzled(pre, swizzle);
}

// Element (mn, k) of a K-major rows x 32 operand of 8-bit elements (16 per core-matrix row).
uint32_t ImageOffset8(int mn, int k, int swizzle, uint32_t lbo, uint32_t sbo) {
  const uint32_t pre = swizzle == 0 ? (mn / 8) * sbo + (mn % 8) * 16 + (k / 16) * lbo + k % 16
                                    : (mn / 8) * sbo + (mn % 8) * swizzle + (k / 16) * 16 + k % 16;
  return Swizzled(pre, swizzle);
}

struct Operand {
  std::vector<float> values;  // [rows][16]
  std::vector<uint8_t> image;
};

Operand MakeOperand(int rows, bool mn_major, int swizzle, uint32_t lbo, uint32_t sbo, int image_bytes,
                    std::mt19937& random) {
  std::uniform_int_distribution<int> small(-8, 8);
  Operand op;
  op.values.resize(rows * 16);
  op.image.assign(image_bytes, 0xFF);
  for (int mn = 0; mn < rows; ++mn) {
    for (int k = 0; k < 16; ++k) {
      const float v = 0.25f * small(random);  // exact in f16, products and sums exact in f32
      op.values[mn * 16 + k] = v;
      const uint16_t bits = HalfBits(v);
      const uint32_t at = ImageOffset(mn, k, mn_major, swizzle, lbo, sbo);
      EXPECT_LT(at + 1, static_cast<uint32_t>(image_bytes));
      std::memcpy(&op.image[at], &bits, 2);
    }
  }
  return op;
}

// Accumulator fragment (ISA figure "WGMMA .m64nNk16 register fragment layout for accumulator matrix D"): a few
// entries read off the figure, then the rule it shows.
TEST(WgmmaFragmentTest, AccumulatorFigureEntries) {
  struct Entry {
    int thread, reg, row, col;
  };
  const Entry figure[] = {{0, 0, 0, 0},   {0, 1, 0, 1},    {0, 2, 8, 0},     {0, 3, 8, 1},    {0, 4, 0, 8},
                          {1, 0, 0, 2},   {3, 1, 0, 7},    {4, 0, 1, 0},     {31, 0, 7, 6},   {31, 3, 15, 7},
                          {32, 0, 16, 0}, {127, 0, 55, 6}, {127, 31, 63, 63}, {64, 6, 40, 8}};
  for (const Entry& e : figure) {
    const int warp = e.thread / 32, lane = e.thread % 32;
    EXPECT_EQ(16 * warp + lane / 4 + 8 * ((e.reg >> 1) & 1), e.row) << e.thread << " d" << e.reg;
    EXPECT_EQ(8 * (e.reg >> 2) + 2 * (lane % 4) + (e.reg & 1), e.col) << e.thread << " d" << e.reg;
  }
}

struct WgmmaRun {
  std::vector<float> d;  // [128][32]
  cudaError_t error;
};

// A probe's operand images (and A's registers) copied to the device, the probe pointed at the copies.
struct DeviceProbe {
  explicit DeviceProbe(testdata::WgmmaProbe host)
      : probe(host), a(std::max(host.a_bytes, 1)), b(host.b_bytes), a_registers(128 * 4) {
    if (host.a_bytes > 0) {
      EXPECT_EQ(cudaMemcpy(a.get(), host.a_image, host.a_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    }
    EXPECT_EQ(cudaMemcpy(b.get(), host.b_image, host.b_bytes, cudaMemcpyHostToDevice), cudaSuccess);
    if (host.a_in_registers) {
      EXPECT_EQ(cudaMemcpy(a_registers.get(), host.a_registers, 128 * 4 * 4, cudaMemcpyHostToDevice), cudaSuccess);
      probe.a_registers = a_registers.get();
    }
    probe.a_image = a.get();
    probe.b_image = b.get();
  }
  testdata::WgmmaProbe probe;
  TestDeviceBuffer<uint8_t> a, b;
  TestDeviceBuffer<uint32_t> a_registers;
};

WgmmaRun RunProbe(testdata::WgmmaProbe probe) {
  DeviceProbe on_device(probe);
  TestDeviceBuffer<float> d(128 * 32);
  WgmmaRun run;
  run.error = testdata::LaunchWgmmaProbe(on_device.probe, d.get(), nullptr);
  run.d = d.Download();
  return run;
}

// d[t * 32 + v] == sum_k A[row][k] * B[col][k] at the fragment position of (t, v).
int CountWrongAccumulators(const WgmmaRun& run, const std::vector<float>& a, const std::vector<float>& b) {
  int wrong = 0;
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < 32; ++v) {
      const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((v >> 1) & 1);
      const int col = 8 * (v >> 2) + 2 * (t % 4) + (v & 1);
      float expected = 0.0f;
      for (int k = 0; k < 16; ++k) expected += a[row * 16 + k] * b[col * 16 + k];
      wrong += !(run.d[t * 32 + v] == expected);
    }
  }
  return wrong;
}

struct LayoutCase {
  bool mn_major;
  int swizzle;
  uint32_t lbo, sbo;
  int bytes;  // image size for 64 rows
};

// Every swizzle mode, K-major and MN-major, A and B from shared memory: the fragments hold A * B^T exactly.
TEST(WgmmaTest, SharedMemoryOperandsInEveryLayoutGiveTheProduct) {
  std::mt19937 random(std::random_device{}());
  const LayoutCase cases[] = {
      {false, 0, 128, 256, 2048},   {false, 32, 16, 256, 2048},  {false, 64, 16, 512, 4096},
      {false, 128, 16, 1024, 8192}, {true, 0, 1024, 128, 2048},  {true, 128, 16, 1024, 2048},
      {true, 64, 1024, 512, 2048},  {true, 32, 512, 256, 2048},
  };
  for (const LayoutCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << (c.mn_major ? "MN-major" : "K-major") << " swizzle " << c.swizzle);
    // MN-major with swizzle W covers W/16*8 rows per leading step; 64 rows need 64 / (W/2) leading steps.
    const Operand a = MakeOperand(64, c.mn_major, c.swizzle, c.lbo, c.sbo, c.bytes * 2, random);
    const Operand b = MakeOperand(64, c.mn_major, c.swizzle, c.lbo, c.sbo, c.bytes * 2, random);
    testdata::WgmmaProbe probe;
    probe.a_image = a.image.data(), probe.a_bytes = c.bytes * 2;
    probe.b_image = b.image.data(), probe.b_bytes = c.bytes * 2;
    probe.a_leading = probe.b_leading = c.lbo;
    probe.a_stride = probe.b_stride = c.sbo;
    probe.a_swizzle = probe.b_swizzle = c.swizzle;
    probe.transpose_a = probe.transpose_b = c.mn_major;
    const WgmmaRun run = RunProbe(probe);
    ASSERT_EQ(run.error, cudaSuccess) << LastErrorDetail();
    EXPECT_EQ(CountWrongAccumulators(run, a.values, b.values), 0);
  }
}

// A from registers in the ISA's "WGMMA .m64nNk16 register fragment layout for matrix A" (the mma.m16n8k16 A layout
// per warp of 16 rows): register i of lane l holds row l/4 (+8 for odd i), columns 2(l%4), +1 (+8 for i >= 2).
TEST(WgmmaTest, RegisterSourceAUsesTheIsaFragmentLayout) {
  std::mt19937 random(std::random_device{}());
  const Operand a = MakeOperand(64, false, 0, 128, 256, 2048, random);
  const Operand b = MakeOperand(64, false, 128, 16, 1024, 16384, random);
  std::vector<uint32_t> registers(128 * 4);
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * (i & 1), col = 2 * (lane % 4) + 8 * (i >> 1);
      registers[t * 4 + i] = uint32_t{HalfBits(a.values[row * 16 + col])} |
                             (uint32_t{HalfBits(a.values[row * 16 + col + 1])} << 16);
    }
  }
  testdata::WgmmaProbe probe;
  probe.a_in_registers = true;
  probe.a_registers = registers.data();
  probe.b_image = b.image.data(), probe.b_bytes = 16384;
  probe.b_leading = 16, probe.b_stride = 1024, probe.b_swizzle = 128;
  const WgmmaRun run = RunProbe(probe);
  ASSERT_EQ(run.error, cudaSuccess) << LastErrorDetail();
  EXPECT_EQ(CountWrongAccumulators(run, a.values, b.values), 0);
}

// ---------------------------------------------------------------------------------------------- integer wgmma

struct Int8Operand {
  std::vector<int> values;  // [64][32]
  std::vector<uint8_t> image;
};

// 64 rows x 32 random 8-bit values, unsigned [0, 255] or signed [-128, 127], in a K-major image.
Int8Operand MakeInt8Operand(bool is_unsigned, int swizzle, uint32_t lbo, uint32_t sbo, int image_bytes,
                            std::mt19937& random) {
  std::uniform_int_distribution<int> value(is_unsigned ? 0 : -128, is_unsigned ? 255 : 127);
  Int8Operand op;
  op.values.resize(64 * 32);
  op.image.assign(image_bytes, 0xA5);
  for (int mn = 0; mn < 64; ++mn) {
    for (int k = 0; k < 32; ++k) {
      const int v = value(random);
      op.values[mn * 32 + k] = v;
      const uint32_t at = ImageOffset8(mn, k, swizzle, lbo, sbo);
      EXPECT_LT(at, static_cast<uint32_t>(image_bytes));
      op.image[at] = static_cast<uint8_t>(v);
    }
  }
  return op;
}

// Accumulators of the probe (the product issued twice) that differ from 2 * sum_k A[row][k] * B[col][k] in int64.
int CountWrongInt8Accumulators(const std::vector<int32_t>& d, const Int8Operand& a, const Int8Operand& b) {
  int wrong = 0;
  for (int t = 0; t < 128; ++t) {
    for (int v = 0; v < 32; ++v) {
      const int row = 16 * (t / 32) + (t % 32) / 4 + 8 * ((v >> 1) & 1);
      const int col = 8 * (v >> 2) + 2 * (t % 4) + (v & 1);
      int64_t expected = 0;
      for (int k = 0; k < 32; ++k) expected += int64_t{a.values[row * 32 + k]} * b.values[col * 32 + k];
      wrong += d[t * 32 + v] != 2 * expected;
    }
  }
  return wrong;
}

std::vector<int32_t> RunInt8Probe(testdata::WgmmaProbe probe, bool a_unsigned, cudaError_t* error) {
  DeviceProbe on_device(probe);
  TestDeviceBuffer<int32_t> d(128 * 32);
  *error = testdata::LaunchWgmmaInt8Probe(on_device.probe, a_unsigned, d.get(), nullptr);
  return d.Download();
}

// wgmma .s32.s8.s8 and .s32.u8.s8 (k32) from shared memory, K-major without swizzle and with the 128-byte swizzle:
// every accumulator equals the integer product, A read as unsigned bytes for .u8 (values up to 255) and signed
// otherwise, B signed; scale-d 1 adds onto the int32 accumulators.
TEST(WgmmaInt8Test, SharedMemoryOperandsGiveTheExactIntegerProduct) {
  std::mt19937 random(std::random_device{}());
  struct Layout {
    int swizzle;
    uint32_t lbo, sbo;
    int bytes;
  };
  for (const Layout& layout : {Layout{0, 128, 256, 2048}, Layout{128, 16, 1024, 8192}}) {
    for (const bool a_unsigned : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "swizzle " << layout.swizzle << (a_unsigned ? " u8.s8" : " s8.s8"));
      const Int8Operand a = MakeInt8Operand(a_unsigned, layout.swizzle, layout.lbo, layout.sbo, layout.bytes, random);
      const Int8Operand b = MakeInt8Operand(false, layout.swizzle, layout.lbo, layout.sbo, layout.bytes, random);
      testdata::WgmmaProbe probe;
      probe.a_image = a.image.data(), probe.a_bytes = layout.bytes;
      probe.b_image = b.image.data(), probe.b_bytes = layout.bytes;
      probe.a_leading = probe.b_leading = layout.lbo;
      probe.a_stride = probe.b_stride = layout.sbo;
      probe.a_swizzle = probe.b_swizzle = layout.swizzle;
      cudaError_t error;
      const std::vector<int32_t> d = RunInt8Probe(probe, a_unsigned, &error);
      ASSERT_EQ(error, cudaSuccess) << LastErrorDetail();
      EXPECT_EQ(CountWrongInt8Accumulators(d, a, b), 0);
    }
  }
}

// A from registers in the ISA's "WGMMA .m64nNk32 register fragment layout for matrix A" (the mma.m16n8k32 A layout
// per warp of 16 rows): register i of lane l holds row l/4 (+8 for odd i), bytes 4(l%4) .. 4(l%4)+3 (+16 for i >= 2).
TEST(WgmmaInt8Test, RegisterSourceAUsesTheIsaFragmentLayout) {
  std::mt19937 random(std::random_device{}());
  const Int8Operand a = MakeInt8Operand(true, 0, 128, 256, 2048, random);
  const Int8Operand b = MakeInt8Operand(false, 128, 16, 1024, 8192, random);
  std::vector<uint32_t> registers(128 * 4);
  for (int t = 0; t < 128; ++t) {
    const int warp = t / 32, lane = t % 32;
    for (int i = 0; i < 4; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * (i & 1), col = 4 * (lane % 4) + 16 * (i >> 1);
      uint32_t word = 0;
      for (int byte = 0; byte < 4; ++byte) word |= uint32_t(a.values[row * 32 + col + byte] & 0xFF) << (8 * byte);
      registers[t * 4 + i] = word;
    }
  }
  testdata::WgmmaProbe probe;
  probe.a_in_registers = true;
  probe.a_registers = registers.data();
  probe.b_image = b.image.data(), probe.b_bytes = 8192;
  probe.b_leading = 16, probe.b_stride = 1024, probe.b_swizzle = 128;
  cudaError_t error;
  const std::vector<int32_t> d = RunInt8Probe(probe, true, &error);
  ASSERT_EQ(error, cudaSuccess) << LastErrorDetail();
  EXPECT_EQ(CountWrongInt8Accumulators(d, a, b), 0);
}

testdata::WgmmaProbe KMajor128Probe(const Operand& a, const Operand& b) {
  testdata::WgmmaProbe probe;
  probe.a_image = a.image.data(), probe.a_bytes = static_cast<int>(a.image.size());
  probe.b_image = b.image.data(), probe.b_bytes = static_cast<int>(b.image.size());
  probe.a_leading = probe.b_leading = 16;
  probe.a_stride = probe.b_stride = 1024;
  probe.a_swizzle = probe.b_swizzle = 128;
  return probe;
}

TEST(WgmmaPlantedMistakeTest, WrongDescriptorFieldOrSwizzleModeIsCaught) {
  std::mt19937 random(std::random_device{}());
  const Operand a = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  const Operand b = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  testdata::WgmmaProbe good = KMajor128Probe(a, b);
  WgmmaRun run = RunProbe(good);
  ASSERT_EQ(run.error, cudaSuccess) << LastErrorDetail();
  EXPECT_EQ(CountWrongAccumulators(run, a.values, b.values), 0);
  testdata::WgmmaProbe wrong_stride = good;
  wrong_stride.a_stride = 512;  // the 8-row groups are 1024 bytes apart
  run = RunProbe(wrong_stride);
  EXPECT_GT(CountWrongAccumulators(run, a.values, b.values), 0) << "a wrong stride byte offset went unnoticed";
  testdata::WgmmaProbe wrong_swizzle = good;
  wrong_swizzle.b_swizzle = 64;
  run = RunProbe(wrong_swizzle);
  EXPECT_GT(CountWrongAccumulators(run, a.values, b.values), 0) << "a wrong swizzle mode went unnoticed";
}

TEST(WgmmaPlantedMistakeTest, MissingFencesAndWaitsAreReported) {
  std::mt19937 random(std::random_device{}());
  const Operand a = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  const Operand b = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  struct Planted {
    HopperMistake mistake;
    int threads;
    const char* message;
  };
  const Planted planted[] = {
      {HopperMistake::kMissingProxyFence, 128, "fence.proxy.async"},
      {HopperMistake::kMissingWgmmaWait, 128, "in flight"},
      {HopperMistake::kMissingWgmmaFence, 128, "no wgmma.fence"},
      {HopperMistake::kNone, 96, "warpgroup 0 is warps 0-3"},
      {HopperMistake::kMisalignedWarpgroup, 256, "deadlock"},
  };
  for (const Planted& p : planted) {
    SCOPED_TRACE(p.message);
    testdata::WgmmaProbe probe = KMajor128Probe(a, b);
    probe.mistake = p.mistake;
    probe.threads = p.threads;
    const WgmmaRun run = RunProbe(probe);
    EXPECT_EQ(run.error, cudaErrorLaunchFailure);
    EXPECT_THAT(LastErrorDetail(), HasSubstr(p.message));
  }
}

// fence.proxy.async publishes the fencing thread's own stores only: every thread of the probe stores part of the
// operands, and a fence by thread 0 alone leaves the others' stores invisible to the wgmma (under every schedule, once
// the emulation knows the kernel fences). With every thread fencing, the product is right.
TEST(WgmmaPlantedMistakeTest, AnotherThreadsProxyFenceDoesNotPublishMyStores) {
  std::mt19937 random(std::random_device{}());
  const Operand a = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  const Operand b = MakeOperand(64, false, 128, 16, 1024, 8192, random);
  for (const Schedule& schedule : {Schedule::Forward(), Schedule::Reverse(), Schedule::SeededRandom(11)}) {
    SCOPED_TRACE(schedule.ToString());
    ScopedSchedule scoped(schedule);
    testdata::WgmmaProbe probe = KMajor128Probe(a, b);
    WgmmaRun run = RunProbe(probe);
    ASSERT_EQ(run.error, cudaSuccess) << LastErrorDetail();
    EXPECT_EQ(CountWrongAccumulators(run, a.values, b.values), 0);
    probe.mistake = HopperMistake::kProxyFenceByOneThread;
    run = RunProbe(probe);
    EXPECT_EQ(run.error, cudaErrorLaunchFailure);
    EXPECT_THAT(LastErrorDetail(), HasSubstr("another thread's fence does not publish them"));
  }
}

// ------------------------------------------------------------------------------------- tensor maps and copies

TEST(TensorMapTest, EncodersEnforceTheDriversLimits) {
  const auto owned = std::make_unique<CUtensorMap>();  // heap: ASan's fake stack frames are not 64-byte aligned
  CUtensorMap& map = *owned;
  std::vector<uint16_t> data(64 * 64);
  const cuuint64_t dims[2] = {64, 64}, strides[1] = {128};
  const cuuint32_t box[2] = {64, 16}, unit[2] = {1, 1};
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, strides, box, unit,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS)
      << LastTensorMapError();
  struct Bad {
    const char* reason;
    CUresult result;
  };
  const cuuint64_t odd_strides[1] = {120};
  const cuuint32_t big_box[2] = {64, 257}, narrow_box[2] = {4, 16}, stride9[2] = {1, 9};
  const Bad bad[] = {
      {"must be a multiple of 16",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, odd_strides, box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
      {"boxDim[1] = 257",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, strides, big_box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
      {"multiple of 16",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, strides, narrow_box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
      {"exceeds the 64-byte swizzle span",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, strides, box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_64B,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
      {"elementStrides[1] = 9",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data(), dims, strides, box, stride9,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
      {"16-byte aligned",
       cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, data.data() + 1, dims, strides, box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                              CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)},
  };
  for (const Bad& b : bad) {
    EXPECT_EQ(b.result, CUDA_ERROR_INVALID_VALUE) << b.reason;
  }
  // The reason of the last one is kept.
  EXPECT_THAT(LastTensorMapError(), HasSubstr("16-byte aligned"));
  const cuuint64_t dims4[4] = {64, 9, 14, 4}, strides4[3] = {128, 128 * 9, 128 * 9 * 14};
  const cuuint32_t unit4[4] = {1, 1, 1, 1};
  const int lower[2] = {-129, 0}, upper[2] = {0, 0};
  std::vector<uint16_t> image(64 * 9 * 14 * 4);
  EXPECT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, image.data(), dims4, strides4, lower,
                                    upper, 8, 64, unit4, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                                    CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_ERROR_INVALID_VALUE);
  EXPECT_THAT(LastTensorMapError(), HasSubstr("[-128, 127]"));
}

// A 2D tiled box that hangs over the tensor's edges: zero outside, 128B swizzle on the 16-byte chunks.
TEST(BulkTensorCopyTest, TiledBoxWithOutOfBoundsFillAndSwizzle) {
  constexpr int kRows = 40, kCols = 72;  // f16 [40][72]; box 64 x 16 at (32, 30): columns 32..95, rows 30..45
  std::vector<uint16_t> host(kRows * kCols);
  for (int i = 0; i < kRows * kCols; ++i) host[i] = static_cast<uint16_t>(i + 1);
  TestDeviceBuffer<uint16_t> tensor(host);
  const auto owned = std::make_unique<CUtensorMap>();
  CUtensorMap& map = *owned;
  const cuuint64_t dims[2] = {kCols, kRows}, strides[1] = {kCols * 2};
  const cuuint32_t box[2] = {64, 16}, unit[2] = {1, 1};
  ASSERT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, tensor.get(), dims, strides, box, unit,
                                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                   CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS)
      << LastTensorMapError();
  const uint32_t bytes = 64 * 16 * 2;
  TestDeviceBuffer<uint8_t> out(bytes);
  const int32_t coordinates[2] = {32, 30};
  ASSERT_EQ(testdata::LaunchTmaProbe(map, false, coordinates, nullptr, bytes, out.get(), HopperMistake::kNone, nullptr),
            cudaSuccess)
      << LastErrorDetail();
  const std::vector<uint8_t> got = out.Download();
  int wrong = 0;
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 64; ++c) {
      const int row = 30 + r, col = 32 + c;
      const uint16_t expected = (row < kRows && col < kCols) ? host[row * kCols + col] : 0;
      const int chunk = (c / 8) ^ (r % 8);  // 128-byte rows, 1024-byte aligned destination
      uint16_t value;
      std::memcpy(&value, &got[r * 128 + chunk * 16 + (c % 8) * 2], 2);
      wrong += value != expected;
    }
  }
  EXPECT_EQ(wrong, 0);
}

// The ISA's im2col examples (5.5.4.1 example 1, 5.5.4.2 traversal stride): the pixels of one column are the filter
// bases walked W-fastest inside the bounding box [lower, dim - 1 + upper], wrapping to the next row and image.
TEST(BulkTensorCopyTest, Im2colFollowsTheIsaExamples) {
  struct Example {
    int w, h, n, c, pixels, channels, stride;
    int lower_w, lower_h, upper_w, upper_h;
    int32_t coordinates[4];  // c, w, h, n
    uint16_t offsets[2];
  };
  const Example examples[] = {
      {9, 14, 2, 64, 64, 8, 1, -1, -1, -1, -1, {7, 7, 4, 0}, {0, 0}},
      {9, 14, 2, 64, 64, 8, 1, 0, 0, -2, -2, {7, 7, 4, 0}, {2, 2}},
      {8, 14, 2, 64, 32, 16, 2, -1, -1, -1, -1, {7, 7, 5, 0}, {1, 1}},
  };
  for (const Example& e : examples) {
    SCOPED_TRACE(::testing::Message() << "pixels " << e.pixels << " stride " << e.stride);
    std::vector<uint16_t> host(e.n * e.h * e.w * e.c);
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(1 + i % 60000);
    TestDeviceBuffer<uint16_t> tensor(host);
    const auto owned = std::make_unique<CUtensorMap>();
    CUtensorMap& map = *owned;
    const cuuint64_t dims[4] = {cuuint64_t(e.c), cuuint64_t(e.w), cuuint64_t(e.h), cuuint64_t(e.n)};
    const cuuint64_t strides[3] = {cuuint64_t(e.c) * 2, cuuint64_t(e.c) * 2 * e.w, cuuint64_t(e.c) * 2 * e.w * e.h};
    const cuuint32_t element_strides[4] = {1, cuuint32_t(e.stride), cuuint32_t(e.stride), 1};
    const int lower[2] = {e.lower_w, e.lower_h}, upper[2] = {e.upper_w, e.upper_h};
    ASSERT_EQ(cuTensorMapEncodeIm2col(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, tensor.get(), dims, strides, lower,
                                      upper, e.channels, e.pixels, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                      CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              CUDA_SUCCESS)
        << LastTensorMapError();
    const uint32_t bytes = e.pixels * e.channels * 2;
    TestDeviceBuffer<uint8_t> out(bytes);
    ASSERT_EQ(testdata::LaunchTmaProbe(map, true, e.coordinates, e.offsets, bytes, out.get(), HopperMistake::kNone,
                                       nullptr),
              cudaSuccess)
        << LastErrorDetail();
    const std::vector<uint8_t> got = out.Download();
    int w = e.coordinates[1], h = e.coordinates[2], n = e.coordinates[3], wrong = 0;
    const int last_w = e.w - 1 + e.upper_w, last_h = e.h - 1 + e.upper_h;
    for (int p = 0; p < e.pixels; ++p) {
      const int x = w + e.offsets[0], y = h + e.offsets[1];
      for (int ch = 0; ch < e.channels; ++ch) {
        const int channel = e.coordinates[0] + ch;
        const bool inside = x >= 0 && x < e.w && y >= 0 && y < e.h && n < e.n && channel < e.c;
        const uint16_t expected = inside ? host[((n * e.h + y) * e.w + x) * e.c + channel] : 0;
        uint16_t value;
        std::memcpy(&value, &got[(p * e.channels + ch) * 2], 2);
        wrong += value != expected;
      }
      w += e.stride;
      if (w > last_w) {
        w = e.lower_w;
        h += e.stride;
        if (h > last_h) h = e.lower_h, ++n;
      }
    }
    EXPECT_EQ(wrong, 0);
  }
}

// The im2col filter offsets of a 4D tensor are 8 bits and must stay below 255 (CUTLASS's limit): a planted 255 is
// refused, 254 copies.
TEST(BulkTensorCopyPlantedMistakeTest, Im2colOffsetOf255IsRefused) {
  constexpr int kW = 8, kH = 8, kC = 64;
  std::vector<uint16_t> host(kH * kW * kC, 1);
  TestDeviceBuffer<uint16_t> tensor(host);
  const auto map = std::make_unique<CUtensorMap>();
  const cuuint64_t dims[4] = {kC, kW, kH, 1};
  const cuuint64_t strides[3] = {kC * 2, kC * 2 * kW, kC * 2 * kW * kH};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const int lower[2] = {-127, -127}, upper[2] = {-128, -128};
  ASSERT_EQ(cuTensorMapEncodeIm2col(map.get(), CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 4, tensor.get(), dims, strides, lower,
                                    upper, 8, 32, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                    CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
                                    CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS)
      << LastTensorMapError();
  const int32_t coordinates[4] = {0, -127, -127, 0};
  TestDeviceBuffer<uint8_t> out(32 * 8 * 2);
  const uint16_t fits[2] = {254, 254};
  EXPECT_EQ(testdata::LaunchTmaProbe(*map, true, coordinates, fits, 32 * 8 * 2, out.get(), HopperMistake::kNone,
                                     nullptr),
            cudaSuccess)
      << LastErrorDetail();
  const uint16_t too_far[2] = {255, 0};
  EXPECT_EQ(testdata::LaunchTmaProbe(*map, true, coordinates, too_far, 32 * 8 * 2, out.get(), HopperMistake::kNone,
                                     nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("im2col offset 0 = 255 is not below 255"));
}

std::unique_ptr<CUtensorMap> TiledMap(const uint16_t* data, int rows, int cols, CUtensorMapSwizzle swizzle,
                                      int box_rows = 16) {
  auto owned = std::make_unique<CUtensorMap>();
  CUtensorMap& map = *owned;
  const cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)}, strides[1] = {cuuint64_t(cols) * 2};
  const cuuint32_t box[2] = {64, cuuint32_t(box_rows)}, unit[2] = {1, 1};
  EXPECT_EQ(cuTensorMapEncodeTiled(&map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, const_cast<uint16_t*>(data), dims,
                                   strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                   CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
            CUDA_SUCCESS)
      << LastTensorMapError();
  return owned;
}

// Shared memory as the hardware lays it out: the probe's static mbarrier first, the dynamic part after it at a 16-byte
// aligned base. A kernel that lands a bulk copy at the dynamic base without rounding it up (planted) is refused: the
// copy's destination must be 128-byte aligned (with dynamic memory at address 0 it passed). The first launch lets
// the emulation learn the kernel's static arrays.
TEST(SharedMemoryLayoutTest, DynamicBaseAfterStaticArraysIsOnly16ByteAligned) {
  std::vector<uint16_t> host(16 * 64, 3);
  TestDeviceBuffer<uint16_t> tensor(host);
  const std::unique_ptr<CUtensorMap> map = TiledMap(tensor.get(), 16, 64, CU_TENSOR_MAP_SWIZZLE_128B);
  const int32_t coordinates[2] = {0, 0};
  TestDeviceBuffer<uint8_t> out(2048);
  for (int launch = 0; launch < 2; ++launch) {
    ASSERT_EQ(testdata::LaunchTmaProbe(*map, false, coordinates, nullptr, 2048, out.get(), HopperMistake::kNone,
                                       nullptr),
              cudaSuccess)
        << LastErrorDetail();
  }
  EXPECT_EQ(testdata::LaunchTmaProbe(*map, false, coordinates, nullptr, 2048, out.get(),
                                     HopperMistake::kUnalignedDynamicShared, nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("128-byte aligned"));
}

TEST(BulkTensorCopyPlantedMistakeTest, WrongParityReadsPoisonAndMissingInitFenceIsReported) {
  std::vector<uint16_t> host(16 * 64);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint16_t>(i + 1);
  TestDeviceBuffer<uint16_t> tensor(host);
  const std::unique_ptr<CUtensorMap> map = TiledMap(tensor.get(), 16, 64, CU_TENSOR_MAP_SWIZZLE_NONE);
  const int32_t coordinates[2] = {0, 0};
  TestDeviceBuffer<uint8_t> out(2048);
  ASSERT_EQ(testdata::LaunchTmaProbe(*map, false, coordinates, nullptr, 2048, out.get(),
                                     HopperMistake::kWrongMbarrierParity, nullptr),
            cudaSuccess)
      << LastErrorDetail();
  std::vector<uint8_t> got = out.Download();
  int poison = 0;
  for (uint8_t byte : got) poison += byte == 0xFF;
  EXPECT_EQ(poison, 2048) << "waiting on the wrong parity must return before the copy landed";
  EXPECT_EQ(testdata::LaunchTmaProbe(*map, false, coordinates, nullptr, 2048, out.get(),
                                     HopperMistake::kMissingMbarrierFence, nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("fence.mbarrier_init"));
  // expect_tx of too few bytes: the phase completes while the copy is in flight.
  EXPECT_EQ(testdata::LaunchTmaProbe(*map, false, coordinates, nullptr, 1024, out.get(), HopperMistake::kNone, nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("expect_tx counted fewer bytes"));
}

// The producer / consumer pipeline: a [64, 64 * k] x [64, 64 * k]^T product through two stages, mbarrier phases
// flipping every second tile.
TEST(WgmmaPipelineTest, ProducerConsumerPipelineComputesTheProduct) {
  constexpr int kTiles = 5, kCols = 64 * kTiles;
  std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> small(-8, 8);
  std::vector<float> a(64 * kCols), b(64 * kCols);
  std::vector<uint16_t> a_bits(a.size()), b_bits(b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = 0.125f * small(random), b[i] = 0.125f * small(random);
    a_bits[i] = HalfBits(a[i]), b_bits[i] = HalfBits(b[i]);
  }
  TestDeviceBuffer<uint16_t> a_dev(a_bits), b_dev(b_bits);
  const std::unique_ptr<CUtensorMap> a_map = TiledMap(a_dev.get(), 64, kCols, CU_TENSOR_MAP_SWIZZLE_128B, 64);
  const std::unique_ptr<CUtensorMap> b_map = TiledMap(b_dev.get(), 64, kCols, CU_TENSOR_MAP_SWIZZLE_128B, 64);
  for (const Schedule& schedule : {Schedule::Forward(), Schedule::Reverse(), Schedule::SeededRandom(5)}) {
    SCOPED_TRACE(schedule.ToString());
    ScopedSchedule scoped(schedule);
    TestDeviceBuffer<float> d(64 * 64);
    ASSERT_EQ(testdata::LaunchWgmmaPipeline(*a_map, *b_map, kTiles, d.get(), HopperMistake::kNone, nullptr), cudaSuccess)
        << LastErrorDetail();
    EXPECT_EQ(WrongProducts(d.Download(), a, b, kCols), 0);
  }
  TestDeviceBuffer<float> d(64 * 64);
  EXPECT_EQ(testdata::LaunchWgmmaPipeline(*a_map, *b_map, kTiles, d.get(), HopperMistake::kReleaseBeforeWait, nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("still reads"));
  // Waiting on the wrong parity lets the consumers multiply before the copies land: the wgmma reads bytes a pending
  // copy will write (reported), or, if the producer has not issued it yet, the poison (NaN results).
  for (const Schedule& schedule : {Schedule::Forward(), Schedule::Reverse()}) {
    ScopedSchedule scoped(schedule);
    d.Poison();
    const cudaError_t error =
        testdata::LaunchWgmmaPipeline(*a_map, *b_map, kTiles, d.get(), HopperMistake::kWrongMbarrierParity, nullptr);
    if (error == cudaSuccess) {
      int nan = 0;
      for (float v : d.Download()) nan += std::isnan(v);
      EXPECT_GT(nan, 0) << schedule.ToString() << ": a wrong mbarrier parity went unnoticed";
    } else {
      EXPECT_THAT(LastErrorDetail(), HasSubstr("has not written yet")) << schedule.ToString();
    }
  }
}

// A stage released by one thread of the consumer warpgroup after its own wgmma.wait_group: with warp 1 lagging, the
// producer refills the stage while warp 1 has not waited for the wgmma that reads it. Released by every consumer
// thread (the empty barrier counts 128), the same schedule computes the product.
TEST(WgmmaPipelineTest, OneThreadReleaseIsCaughtWhenAWarpLags) {
  constexpr int kTiles = 5, kCols = 64 * kTiles;
  std::vector<uint16_t> a_bits(64 * kCols), b_bits(64 * kCols);
  std::vector<float> a(a_bits.size()), b(b_bits.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = 0.25f * static_cast<float>(static_cast<int>(i % 7) - 3);
    b[i] = 0.5f * static_cast<float>(static_cast<int>(i % 5) - 2);
    a_bits[i] = HalfBits(a[i]), b_bits[i] = HalfBits(b[i]);
  }
  TestDeviceBuffer<uint16_t> a_dev(a_bits), b_dev(b_bits);
  const std::unique_ptr<CUtensorMap> a_map = TiledMap(a_dev.get(), 64, kCols, CU_TENSOR_MAP_SWIZZLE_128B, 64);
  const std::unique_ptr<CUtensorMap> b_map = TiledMap(b_dev.get(), 64, kCols, CU_TENSOR_MAP_SWIZZLE_128B, 64);
  for (int lagging_warp : {1, 2, 3}) {
    SCOPED_TRACE(lagging_warp);
    ScopedSchedule scoped(Schedule::LaggingWarp(lagging_warp));
    TestDeviceBuffer<float> d(64 * 64);
    ASSERT_EQ(testdata::LaunchWgmmaPipeline(*a_map, *b_map, kTiles, d.get(), HopperMistake::kNone, nullptr),
              cudaSuccess)
        << LastErrorDetail();
    EXPECT_EQ(WrongProducts(d.Download(), a, b, kCols), 0);
    EXPECT_EQ(testdata::LaunchWgmmaPipeline(*a_map, *b_map, kTiles, d.get(), HopperMistake::kOneThreadRelease, nullptr),
              cudaErrorLaunchFailure);
    EXPECT_THAT(LastErrorDetail(), HasSubstr("still reads"));
  }
}

TEST(ScheduleTest, LaggingWarpParsesAndPrints) {
  const absl::StatusOr<Schedule> lag = Schedule::Parse("lag:5");
  ASSERT_TRUE(lag.ok());
  EXPECT_EQ(lag->order, ScheduleOrder::kLaggingWarp);
  EXPECT_EQ(lag->ToString(), "lag:5");
  EXPECT_FALSE(Schedule::Parse("lag:x").ok());
}

TEST(SetMaxNRegTest, UniformCountsPassAndANonUniformOneIsReported) {
  TestDeviceBuffer<int> out(384);
  ASSERT_EQ(testdata::LaunchSetMaxNRegProbe(out.get(), HopperMistake::kNone, nullptr), cudaSuccess)
      << LastErrorDetail();
  for (int v : out.Download()) EXPECT_EQ(v, 1);
  EXPECT_EQ(testdata::LaunchSetMaxNRegProbe(out.get(), HopperMistake::kNonUniformSetMaxNReg, nullptr),
            cudaErrorLaunchFailure);
  EXPECT_THAT(LastErrorDetail(), HasSubstr("setmaxnreg"));
}

// The register pool: 384 threads enter with 168 registers; the producer's setmaxnreg.dec 40 releases 128 x 128, the
// two consumer warpgroups' setmaxnreg.inc 232 take 2 x 128 x 64 of them. A planted inc 240 asks for 2 x 128 x 72:
// more than was released, so it would wait for ever on the GPU; here it is a deadlock report naming the pool.
TEST(SetMaxNRegTest, AnIncreaseBeyondWhatWasReleasedIsReportedAsAHang) {
  TestDeviceBuffer<int> out(384);
  for (const Schedule& schedule : {Schedule::Forward(), Schedule::Reverse()}) {
    ScopedSchedule scoped(schedule);
    ASSERT_EQ(testdata::LaunchSetMaxNRegProbe(out.get(), HopperMistake::kNone, nullptr), cudaSuccess)
        << schedule.ToString() << ": " << LastErrorDetail();
    EXPECT_EQ(testdata::LaunchSetMaxNRegProbe(out.get(), HopperMistake::kOverIncrease, nullptr),
              cudaErrorLaunchFailure)
        << schedule.ToString();
    EXPECT_THAT(LastErrorDetail(), HasSubstr("deadlock"));
    EXPECT_THAT(LastErrorDetail(), HasSubstr("setmaxnreg.inc 240"));
    EXPECT_THAT(LastErrorDetail(), HasSubstr("hangs"));
  }
}

}  // namespace
}  // namespace convoy::cuda_emulation
