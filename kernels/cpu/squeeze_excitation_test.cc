// cpu.squeeze_excitation.direct and its AVX2 / AVX-512 versions (each one the CPU runs) against the branch they
// replace, computed here in double precision straight from the definition (problems.h: pool, 1x1 conv, activation,
// 1x1 conv, gate activation, multiply), on fresh random inputs with the output and the workspace poisoned with NaN,
// in every layout, out of place and in place, on 1, 2 and 3 threads.
//
// Tolerance: relative 1e-5 plus absolute 1e-5. The kernel sums in FP32 in another order than the double reference:
// the mean of up to 64x64 values in [-1, 1) carries a few 1e-8, and the two products (up to 1152 and 48 terms, weights
// in [-1, 1)) add rounding of a few 1e-7 of their terms' magnitudes; the gate (sigmoid, slope at most 1/4) and the
// multiply by x (|x| < 1) shrink that. A wrong index or a missed piece moves outputs by 1e-2 or more.
#include "kernels/cpu/squeeze_excitation.h"

#include <cmath>
#include <cstdint>
#include <iostream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/cpu/cpu_isa.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

struct Weights {
  std::vector<float> w1, b1, w2, b2;  // w1 [S, C], w2 [S, C] (the second filter transposed)
};

double Activate(const Activation& a, double v) {
  return ApplyActivation(static_cast<float>(v), a.kind, a.alpha, a.beta);
}

// The branch, unfused, in double: y in p's layout.
std::vector<float> Expected(const SqueezeExcitationProblem& p, const std::vector<float>& x, const Weights& w) {
  const TensorDesc desc = p.input_desc();
  std::vector<float> y(x.size());
  for (int i = 0; i < p.n; ++i) {
    std::vector<double> mean(p.c, 0.0), hidden(p.squeeze), gate(p.c);
    for (int c = 0; c < p.c; ++c) {
      for (int h = 0; h < p.h; ++h)
        for (int v = 0; v < p.w; ++v) mean[c] += x[desc.Offset4(i, c, h, v)];
      mean[c] /= static_cast<double>(p.h) * p.w;
    }
    for (int j = 0; j < p.squeeze; ++j) {
      double acc = p.has_hidden_bias ? w.b1[j] : 0.0;
      for (int c = 0; c < p.c; ++c) acc += static_cast<double>(w.w1[int64_t{j} * p.c + c]) * mean[c];
      hidden[j] = Activate(p.hidden_activation, acc);
    }
    for (int c = 0; c < p.c; ++c) {
      double acc = p.has_gate_bias ? w.b2[c] : 0.0;
      for (int j = 0; j < p.squeeze; ++j) acc += static_cast<double>(w.w2[int64_t{j} * p.c + c]) * hidden[j];
      gate[c] = Activate(p.gate_activation, acc);
    }
    for (int c = 0; c < p.c; ++c)
      for (int h = 0; h < p.h; ++h)
        for (int v = 0; v < p.w; ++v) {
          const int64_t at = desc.Offset4(i, c, h, v);
          y[at] = static_cast<float>(x[at] * gate[c]);
        }
  }
  return y;
}

constexpr CpuIsa kIsas[] = {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512};

std::string NameOf(CpuIsa isa) {
  return isa == CpuIsa::kBaseline ? "cpu.squeeze_excitation.direct"
                                  : "cpu.squeeze_excitation.direct_" + std::string(CpuIsaName(isa));
}

void ExpectTheBranch(const CpuSqueezeExcitation& algorithm, const SqueezeExcitationProblem& p,
                     const ExecutionContext& context, uint32_t seed) {
  ASSERT_THAT(algorithm.CanImplement(p), IsOk()) << p.ToString();
  const int64_t count = p.input_desc().num_elements();
  const std::vector<float> x = testing::RandomFloats(count, seed);
  Weights w;
  w.w1 = testing::RandomFloats(int64_t{p.squeeze} * p.c, seed + 1);
  w.b1 = testing::RandomFloats(p.squeeze, seed + 2);
  w.w2 = testing::RandomFloats(int64_t{p.c} * p.squeeze, seed + 3);
  w.b2 = testing::RandomFloats(p.c, seed + 4);
  const std::vector<float> expected = Expected(p, x, w);

  std::vector<float> workspace(algorithm.WorkspaceBytes(p) / sizeof(float));
  testing::PoisonWithNaN(workspace.data(), DataType::kFloat32, workspace.size());
  const Workspace ws{workspace.data(), workspace.size() * sizeof(float)};
  std::vector<float> y(count);
  testing::PoisonWithNaN(y.data(), DataType::kFloat32, count);
  SqueezeExcitationArgs args{x.data(), w.w1.data(), p.has_hidden_bias ? w.b1.data() : nullptr, w.w2.data(),
                             p.has_gate_bias ? w.b2.data() : nullptr, y.data()};
  ASSERT_THAT(algorithm.Run(p, args, ws, context), IsOk());
  EXPECT_THAT(testing::CompareFloats(y, expected, Tolerance{1e-5, 1e-5}), IsOk())
      << algorithm.name() << " on " << p.ToString() << " seed " << seed;
  std::vector<float> in_place = x;
  args.x = in_place.data(), args.y = in_place.data();
  ASSERT_THAT(algorithm.Run(p, args, ws, context), IsOk());
  EXPECT_THAT(testing::CompareFloats(in_place, expected, Tolerance{1e-5, 1e-5}), IsOk())
      << algorithm.name() << " on " << p.ToString() << " in place, seed " << seed;
}

// EfficientNet-B0's first and last blocks' shapes (32 -> 8 on 112x112 is covered by the 40x40 case's pieces), shapes
// with vector tails (C = 40, 72; squeeze 5, 12), one pixel, and a batch of 3; SiLU / sigmoid (EfficientNet), ReLU /
// hard sigmoid (MobileNetV3), with and without biases.
TEST(CpuSqueezeExcitationTest, MatchesTheUnfusedBranchInEveryLayout) {
  struct Shape {
    int n, c, h, w, squeeze;
  };
  const Shape shapes[] = {{1, 32, 40, 40, 8}, {1, 1152, 7, 7, 48}, {2, 40, 9, 7, 5},
                          {3, 72, 5, 6, 12},  {1, 16, 1, 1, 4},   {1, 96, 64, 64, 4}};
  const Activation hidden[] = {Activation::Of(ActivationKind::kSilu), Activation::Relu()};
  const Activation gates[] = {Activation::Of(ActivationKind::kSigmoid),
                              Activation::Of(ActivationKind::kHardSigmoid, 1.0f / 6.0f, 0.5f)};
  uint32_t seed = 11;
  for (int threads : {1, 2, 3}) {
    auto device = CpuDevice::Create(CpuDevice::Options{threads});
    ASSERT_THAT(device.status(), IsOk());
    for (CpuIsa isa : kIsas) {
      if (!CpuSupports(isa)) continue;
      const CpuSqueezeExcitation algorithm(isa);
      int cases = 0;
      for (const Shape& s : shapes) {
        for (Layout layout : {Layout::kNCHW, Layout::kNHWC, Layout::kNCHW8c}) {
          for (int variant = 0; variant < 2; ++variant) {
            SqueezeExcitationProblem p;
            p.n = s.n, p.c = s.c, p.h = s.h, p.w = s.w, p.squeeze = s.squeeze, p.layout = layout;
            p.hidden_activation = hidden[variant], p.gate_activation = gates[variant];
            p.has_hidden_bias = variant == 0, p.has_gate_bias = true;
            if (layout == Layout::kNCHW8c && s.c % kLayoutChannelBlock != 0) continue;
            ExpectTheBranch(algorithm, p, (*device)->context(), seed += 5);
            ++cases;
          }
        }
      }
      std::cout << algorithm.name() << ": " << cases << " problems within tolerance on " << threads << " threads\n";
    }
  }
}

TEST(CpuSqueezeExcitationTest, EveryInstructionSetTheCpuRunsIsRegisteredAndTheWidestIsTheHeuristicsChoice) {
  const auto& registry = OpRegistry<SqueezeExcitationOp>::Global();
  CpuIsa widest = CpuIsa::kBaseline;
  for (CpuIsa isa : kIsas) {
    EXPECT_EQ(registry.Find(NameOf(isa)) != nullptr, CpuSupports(isa)) << NameOf(isa);
    if (CpuSupports(isa)) widest = isa;
  }
  SqueezeExcitationProblem p;
  p.n = 1, p.c = 32, p.h = p.w = 8, p.squeeze = 8, p.layout = Layout::kNHWC;
  auto chosen = registry.Heuristic(p, Backend::kCpu);
  ASSERT_THAT(chosen, IsOk());
  EXPECT_EQ((*chosen)->name(), NameOf(widest));
}

TEST(CpuSqueezeExcitationTest, RejectsWhatItCannotRunNamingTheField) {
  const CpuSqueezeExcitation algorithm(CpuIsa::kBaseline);
  SqueezeExcitationProblem p;
  p.n = 1, p.c = 32, p.h = p.w = 8, p.squeeze = 8;
  p.dtype = DataType::kFloat16;
  EXPECT_THAT(algorithm.CanImplement(p), StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("FP32 only, got FP16")));
  p.dtype = DataType::kFloat32;
  p.squeeze = 0;
  EXPECT_THAT(algorithm.CanImplement(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("squeeze must be positive, got 0")));
  p.squeeze = 8, p.c = 12, p.layout = Layout::kNCHW8c;
  EXPECT_THAT(algorithm.CanImplement(p),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("multiples of 8, got 12")));
  p.c = 32, p.layout = Layout::kNHWC;
  std::vector<float> small(4);
  EXPECT_THAT(algorithm.Run(p, SqueezeExcitationArgs{}, Workspace{small.data(), small.size() * sizeof(float)},
                            CpuDevice::Default().context()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("workspace of 16 bytes")));
}

}  // namespace
}  // namespace convoy::cpu
