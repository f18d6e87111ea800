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
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
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

TEST(CpuBinaryTest, TheHeuristicPicksTheWidestVersionForFp32AndTheBaselineForHalfTypes) {
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
  p.dtype = DataType::kFloat16;
  chosen = OpRegistry<BinaryElementwiseOp>::Global().Heuristic(p, Backend::kCpu);
  ASSERT_THAT(chosen, IsOk());
  EXPECT_EQ((*chosen)->name(), "cpu.binary.elementwise");
  for (CpuIsa isa : {CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    EXPECT_THAT(CpuBinaryAlgorithm(isa).CanImplement(p),
                StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("runs FP32 only, got FP16")));
  }
}

int64_t BElements(const BinaryProblem& p) {
  switch (p.broadcast) {
    case BinaryBroadcast::kNone: return p.desc().num_elements();
    case BinaryBroadcast::kPerImageChannel: return int64_t{p.n} * p.c;
    case BinaryBroadcast::kPerChannel: return p.c;
    case BinaryBroadcast::kScalar: return 1;
  }
  return 0;
}

// Runs `algorithm` on fresh random inputs (out of place and in place) and expects the reference's bits.
void ExpectExactlyTheReference(const BinaryAlgorithm& algorithm, const BinaryProblem& p, const ExecutionContext& c,
                               uint32_t seed) {
  const int64_t count = p.desc().num_elements();
  const std::vector<float> a = testing::RandomFloats(count, seed);
  const std::vector<float> b = testing::RandomFloats(BElements(p), seed + 1, 0.5f, 2.0f);  // no division by ~0
  std::vector<float> expected(count), y(count);
  testing::PoisonWithNaN(expected.data(), DataType::kFloat32, count);
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, count);
  ASSERT_THAT(reference::Binary(p, BinaryArgs{a.data(), b.data(), expected.data()}), IsOk());
  ASSERT_THAT(algorithm.CanImplement(p), IsOk());
  ASSERT_THAT(algorithm.Run(p, BinaryArgs{a.data(), b.data(), y.data()}, Workspace{}, c), IsOk());
  std::vector<float> in_place = a;
  ASSERT_THAT(algorithm.Run(p, BinaryArgs{in_place.data(), b.data(), in_place.data()}, Workspace{}, c), IsOk());
  for (const std::vector<float>* actual : {&y, &in_place}) {
    int64_t wrong = 0, first_wrong = -1;
    for (int64_t i = 0; i < count; ++i) {
      if (std::memcmp(&(*actual)[i], &expected[i], sizeof(float)) != 0 && wrong++ == 0) first_wrong = i;
    }
    EXPECT_EQ(wrong, 0) << algorithm.name() << (actual == &y ? "" : " in place") << " on " << p.ToString()
                        << " (seed " << seed << "): " << wrong << " of " << count << " outputs differ, first at "
                        << first_wrong << ": " << (first_wrong >= 0 ? (*actual)[first_wrong] : 0.0f) << " vs "
                        << (first_wrong >= 0 ? expected[first_wrong] : 0.0f);
  }
}

// Every version present, every op, broadcast and layout, identity and ReLU, on shapes with vector tails at every
// width (C = 40 and 48, 63-pixel planes) and on one large enough for several tasks and pieces, on 1, 2 and 3 threads.
TEST(CpuBinaryTest, EveryVersionPresentMatchesTheReferenceBitForBit) {
  struct Shape {
    int n, c, h, w;
  };
  const Shape shapes[] = {{2, 48, 7, 9}, {1, 40, 3, 3}, {3, 64, 20, 18}};
  uint32_t seed = 1;
  for (int threads : {1, 2, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_THAT(device.status(), IsOk());
    for (CpuIsa isa : kIsas) {
      if (!CpuSupports(isa)) continue;
      const CpuBinaryAlgorithm algorithm(isa);
      int cases = 0;
      for (const Shape& s : shapes) {
        for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c}) {
          for (BinaryOp op : {BinaryOp::kAdd, BinaryOp::kSub, BinaryOp::kMul, BinaryOp::kDiv}) {
            for (BinaryBroadcast broadcast : {BinaryBroadcast::kNone, BinaryBroadcast::kPerImageChannel,
                                              BinaryBroadcast::kPerChannel, BinaryBroadcast::kScalar}) {
              for (bool relu : {false, true}) {
                BinaryProblem p;
                p.op = op, p.broadcast = broadcast, p.n = s.n, p.c = s.c, p.h = s.h, p.w = s.w, p.layout = layout;
                if (relu) p.activation = Activation::Relu();
                if (layout == Layout::kNCHW8c && s.c % kLayoutChannelBlock != 0) continue;
                ExpectExactlyTheReference(algorithm, p, (*device)->context(), seed += 2);
                ++cases;
              }
            }
          }
        }
      }
      std::cout << algorithm.name() << ": " << cases << " problems exact on " << threads << " threads\n";
    }
  }
}

}  // namespace
}  // namespace convoy::cpu
