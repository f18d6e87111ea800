// The CPU binary op's versions (cpu.binary.elementwise and its AVX2 / AVX-512 twins): which are registered on this
// CPU, which one the heuristic picks, and that every version present computes exactly what the reference does.
//
// Add, sub, mul and div of two floats are exact per element in every instruction set (one IEEE operation; the
// reference's double result rounded once to float is the same correctly rounded value), and so is ReLU, so the
// comparison here is bit for bit: an indexing slip (a wrong b lane, a missed tail, a piece written twice) cannot hide
// in a tolerance. The cross-backend suite (kernels/testing:cpu_cross_backend_test) runs every version over the shared
// problem list too.
#include "kernels/cpu/binary.h"

#include <cstdint>
#include <cstring>
#include <iostream>
#include <memory>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/binary_rows.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

constexpr CpuIsa kIsas[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};

std::string NameOf(CpuIsa isa) {
  return isa == CpuIsa::kBaseline ? "cpu.binary.elementwise"
                                  : std::string("cpu.binary.elementwise_") + std::string(CpuIsaName(isa));
}

TEST(CpuBinaryTest, EveryInstructionSetTheCpuRunsIsRegistered) {
  const auto& registry = OpRegistry<BinaryElementwiseOp>::Global();
  for (CpuIsa isa : kIsas) {
    const bool supported = CpuSupports(isa);
    EXPECT_EQ(registry.Find(NameOf(isa)) != nullptr, supported) << NameOf(isa);
    std::cout << NameOf(isa) << (supported ? ": registered (the CPU runs it)" : ": absent (the CPU lacks it)")
              << "\n";
  }
}

TEST(CpuBinaryTest, TheHeuristicPicksTheWidestVersionForFp32AndBf16AndTheBaselineForFp16) {
  BinaryProblem p;
  p.op = BinaryOp::kMul, p.broadcast = BinaryBroadcast::kPerImageChannel, p.n = 1, p.c = 32, p.h = p.w = 4;
  p.layout = Layout::kNHWC;
  CpuIsa widest = CpuIsa::kBaseline;
  for (CpuIsa isa : kIsas) {
    if (CpuSupports(isa)) widest = isa;
  }
  auto chosen = OpRegistry<BinaryElementwiseOp>::Global().Heuristic(p, Backend::kCpu);
  ASSERT_THAT(chosen, IsOk());
  EXPECT_EQ((*chosen)->name(), NameOf(widest));
  p.dtype = DataType::kBFloat16;
  chosen = OpRegistry<BinaryElementwiseOp>::Global().Heuristic(p, Backend::kCpu);
  ASSERT_THAT(chosen, IsOk());
  EXPECT_EQ((*chosen)->name(), NameOf(widest));
  p.dtype = DataType::kFloat16;
  chosen = OpRegistry<BinaryElementwiseOp>::Global().Heuristic(p, Backend::kCpu);
  ASSERT_THAT(chosen, IsOk());
  EXPECT_EQ((*chosen)->name(), "cpu.binary.elementwise");
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    EXPECT_THAT(CpuBinaryAlgorithm(isa).CanImplement(p),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("got FP16")));
  }
}

// `values` as `dtype` (FP32 or BF16) bytes.
std::vector<uint8_t> Encoded(const std::vector<float>& values, DataType dtype) {
  std::vector<uint8_t> bytes(values.size() * DataTypeSize(dtype));
  for (size_t i = 0; i < values.size(); ++i) StoreFromFloat(bytes.data(), dtype, i, values[i]);
  return bytes;
}

// Runs `algorithm` on fresh random inputs (out of place and in place) and expects the reference's bits.
void ExpectExactlyTheReference(const BinaryAlgorithm& algorithm, const BinaryProblem& p, const ExecutionContext& c,
                               uint32_t seed) {
  const int64_t count = p.desc().num_elements();
  const size_t element = DataTypeSize(p.dtype);
  const std::vector<uint8_t> a = Encoded(testing::RandomFloats(count, seed), p.dtype);
  const std::vector<uint8_t> b =
      Encoded(testing::RandomFloats(p.b_elements(), seed + 1, 0.5f, 2.0f), p.dtype);  // no division by ~0
  std::vector<uint8_t> expected(count * element), y(count * element);
  testing::PoisonWithNaN(expected.data(), p.dtype, count);
  testing::PoisonWithNaN(y.data(), p.dtype, count);
  ASSERT_THAT(reference::Binary(p, BinaryArgs{a.data(), b.data(), expected.data()}), IsOk());
  ASSERT_THAT(algorithm.CanImplement(p), IsOk());
  std::vector<uint8_t> workspace(algorithm.WorkspaceBytes(p));
  const Workspace ws{workspace.data(), workspace.size()};
  ASSERT_THAT(algorithm.Run(p, BinaryArgs{a.data(), b.data(), y.data()}, ws, c), IsOk());
  std::vector<uint8_t> in_place = a;
  ASSERT_THAT(algorithm.Run(p, BinaryArgs{in_place.data(), b.data(), in_place.data()}, ws, c), IsOk());
  for (const std::vector<uint8_t>* actual : {&y, &in_place}) {
    int64_t wrong = 0, first_wrong = -1;
    for (int64_t i = 0; i < count; ++i) {
      if (std::memcmp(actual->data() + i * element, expected.data() + i * element, element) != 0 && wrong++ == 0) {
        first_wrong = i;
      }
    }
    EXPECT_EQ(wrong, 0) << algorithm.name() << (actual == &y ? "" : " in place") << " on " << p.ToString()
                        << " (seed " << seed << "): " << wrong << " of " << count << " outputs differ, first at "
                        << first_wrong << ": "
                        << (first_wrong >= 0 ? LoadAsFloat(actual->data(), p.dtype, first_wrong) : 0.0f) << " vs "
                        << (first_wrong >= 0 ? LoadAsFloat(expected.data(), p.dtype, first_wrong) : 0.0f);
  }
}

// Every version present, every op, broadcast and layout, identity and ReLU, FP32 and BF16, on shapes with vector
// tails at every width (C = 40 and 48, 63-pixel planes), one large enough for several tasks and pieces (BF16's
// pieces of 4096 elements cut NCHW planes and NCHW8c rows), and NHWC pixels of 4104 channels (more than a BF16 piece:
// only the baseline version runs those, staged), on 1, 2 and 3 threads.
TEST(CpuBinaryTest, EveryVersionPresentMatchesTheReferenceBitForBit) {
  struct Shape {
    int n, c, h, w;
  };
  const Shape shapes[] = {{2, 48, 7, 9}, {1, 40, 3, 3}, {3, 64, 20, 18}, {2, 4104, 1, 2}};
  uint32_t seed = 1;
  for (int threads : {1, 2, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_THAT(device.status(), IsOk());
    for (CpuIsa isa : kIsas) {
      if (!CpuSupports(isa)) continue;
      const CpuBinaryAlgorithm algorithm(isa);
      int cases = 0;
      for (DataType dtype : {DataType::kFloat32, DataType::kBFloat16}) {
        for (const Shape& s : shapes) {
          for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c}) {
            for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
              for (BinaryBroadcast broadcast : {BinaryBroadcast::kNone, BinaryBroadcast::kPerImageChannel,
                                                BinaryBroadcast::kPerChannel, BinaryBroadcast::kScalar}) {
                for (bool relu : {false, true}) {
                  BinaryProblem p;
                  p.op = op, p.broadcast = broadcast, p.n = s.n, p.c = s.c, p.h = s.h, p.w = s.w, p.layout = layout;
                  p.dtype = dtype;
                  if (relu) p.activation = Activation::Relu();
                  if (layout == Layout::kNCHW8c && s.c % kLayoutChannelBlock != 0) continue;
                  if (!algorithm.CanImplement(p).ok()) {
                    // Only BF16 NHWC pixels wider than a piece under a broadcast are left to the baseline version.
                    EXPECT_TRUE(isa != CpuIsa::kBaseline && dtype == DataType::kBFloat16 &&
                                layout == Layout::kNHWC && s.c > 4096)
                        << algorithm.name() << " declined " << p.ToString();
                    continue;
                  }
                  ExpectExactlyTheReference(algorithm, p, (*device)->context(), seed += 2);
                  ++cases;
                }
              }
            }
          }
        }
      }
      std::cout << algorithm.name() << ": " << cases << " problems exact on " << threads << " threads\n";
    }
  }
}

// The BF16 converts of every version against FloatToBFloat16Bits / BFloat16BitsToFloat: every BF16 bit pattern
// widened, and floats at every rounding case narrowed (ties to even both ways, just above and below a tie, the
// largest finite values rounding to infinity, infinities, signalling and quiet NaNs of both signs, subnormals, zeros),
// each at every lane position of a vector and in the scalar tail.
TEST(CpuBinaryTest, Bf16ConvertsOfEveryVersionMatchTheScalarConversionBitForBit) {
  const std::pair<CpuIsa, const BinaryRowKernels*> tables[] = {{CpuIsa::kBaseline, &kBinaryRowKernelsBaseline},
                                                                {CpuIsa::kAvx2, &kBinaryRowKernelsAvx2},
                                                                {CpuIsa::kAvx512, &kBinaryRowKernelsAvx512}};
  std::vector<uint16_t> every(65536 + 7);
  for (size_t i = 0; i < every.size(); ++i) every[i] = static_cast<uint16_t>(i);
  std::vector<uint32_t> bits = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x3f808000u, 0x3f818000u,
                                0x3f808001u, 0x3f817fffu, 0x3f807fffu, 0xbf808000u, 0xbf818000u, 0x7f7f8000u,
                                0x7f7fffffu, 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0xff800001u,
                                0x7fc00000u, 0xffc00000u, 0x7fbfffffu, 0x7f80ffffu};
  std::mt19937 rng(7);
  for (int i = 0; i < 1000; ++i) bits.push_back(static_cast<uint32_t>(rng()));
  std::vector<float> floats(bits.size());
  std::memcpy(floats.data(), bits.data(), bits.size() * sizeof(float));
  for (const auto& [isa, table] : tables) {
    if (!CpuSupports(isa)) continue;
    std::vector<float> widened(every.size());
    table->bf16_to_float(every.data(), widened.data(), static_cast<int64_t>(every.size()));
    for (size_t i = 0; i < every.size(); ++i) {
      const float expected = BFloat16BitsToFloat(every[i]);
      ASSERT_EQ(std::memcmp(&widened[i], &expected, sizeof(float)), 0) << CpuIsaName(isa) << " widening " << i;
    }
    for (size_t shift = 0; shift < 17; ++shift) {  // every value at every lane and in the tail
      std::vector<float> shifted(shift, 1.0f);
      shifted.insert(shifted.end(), floats.begin(), floats.end());
      std::vector<uint16_t> narrowed(shifted.size());
      table->float_to_bf16(shifted.data(), narrowed.data(), static_cast<int64_t>(shifted.size()));
      for (size_t i = 0; i < shifted.size(); ++i) {
        ASSERT_EQ(narrowed[i], FloatToBFloat16Bits(shifted[i]))
            << CpuIsaName(isa) << " narrowing bits 0x" << std::hex << bits[i < shift ? 0 : i - shift];
      }
    }
  }
}

}  // namespace
}  // namespace convoy::cpu
