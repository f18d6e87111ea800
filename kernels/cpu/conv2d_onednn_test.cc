// oneDNN conv2d against the reference, in all three layouts, on the kinds of layers MobileNetV2 and RegNet have (1x1
// with a residual, depthwise, grouped, strided 3x3, the 3-channel stem), every epilogue, FP32; and the same in BF16,
// where CanImplement must decline what oneDNN cannot run on this CPU (on AVX2 every BF16 problem; on AVX-512 BF16,
// grouped NHWC / NCHW8c with scale + SiLU, whose primitive oneDNN 2.6 offers but cannot create) and what it accepts
// must match.
//
// The residual in both post-op forms (a full-tensor binary_add, oneDNN's sum onto the output), with the residual in
// a buffer of its own and already in the output, on ResNet's and MobileNetV2's residual layer kinds; on AVX-512 the
// registered algorithm must take the sum form, and with it brgconv, for ResNet's NHWC residual layers.
//
// BrgconvFilterLayoutFollowsTheBatch is the reproducer of the wrong brgconv results once seen in whole-model NHWC
// plans on AVX-512 CPUs (docs/kernels.md, "brgconv"): the filter packed for one batch size read by another's
// primitive, whose layout differs.
#include "kernels/cpu/conv2d_onednn.h"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/conv2d_test_harness.h"
#include "kernels/cpu/onednn_support.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::cpu {
namespace {

using ::convoy::cpu::testing::CheckConv2dAgainstReference;
using ::convoy::cpu::testing::CheckEveryEpilogue;
using ::convoy::cpu::testing::Conv;
using ::convoy::cpu::testing::ResidualPlacement;
using ::convoy::testing::IsOk;
using ::convoy::testing::Tolerance;

constexpr Tolerance kFp32{1e-4, 1e-4};  // up to 960 products per output, summed in another order than the reference
// BF16 inputs and outputs, FP32 accumulation on both sides: the output rounding (half a BF16 ulp, 2^-9 relative)
// and oneDNN rounding the residual sum once more before the last activation.
constexpr Tolerance kBf16{2e-2, 2e-2};

std::vector<Conv2dProblem> Shapes(Layout layout) {
  return {
      Conv(2, 144, 16, 16, 24, 1, 1, 1, 0, 1, 1, layout),   // MobileNetV2 projection (residual epilogues)
      Conv(2, 24, 16, 16, 144, 1, 1, 1, 0, 1, 1, layout),   // expansion
      Conv(2, 96, 32, 32, 96, 3, 3, 2, 1, 1, 96, layout),   // depthwise, stride 2
      Conv(2, 144, 16, 16, 144, 3, 3, 1, 1, 1, 144, layout),
      Conv(2, 64, 16, 16, 64, 3, 3, 1, 1, 1, 8, layout),    // RegNet's grouped 3x3 (8 channels per group)
      Conv(2, 48, 16, 16, 48, 3, 3, 2, 1, 1, 6, layout),
      Conv(2, 3, 64, 64, 32, 3, 3, 2, 1, 1, 1, layout),     // the stem
      Conv(1, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, layout),
  };
}

template <typename AlgorithmT>
void CheckAllShapes(Layout layout) {
  EXPECT_THAT(CheckEveryEpilogue(AlgorithmT(), Shapes(layout), kFp32, /*seed=*/900), ::testing::Each(IsOk()));
}

// Every BF16 problem: declined by CanImplement (UNIMPLEMENTED), or prepared, run and matching the reference. A
// primitive that CanImplement accepted and Prepare could not create fails here (INTERNAL).
template <typename AlgorithmT>
void CheckAllShapesInBf16(Layout layout) {
  const AlgorithmT algorithm;
  int accepted = 0, declined = 0;
  for (Conv2dProblem problem : Shapes(layout)) {
    problem.dtype = DataType::kBFloat16;
    for (const Epilogue& epilogue : testing::EpiloguesToTest()) {
      problem.epilogue = epilogue;
      const absl::Status can = algorithm.CanImplement(problem);
      if (!can.ok()) {
        EXPECT_EQ(can.code(), absl::StatusCode::kUnimplemented) << can;
        ++declined;
        continue;
      }
      ++accepted;
      EXPECT_THAT(testing::CheckConv2dAgainstReference(algorithm, problem, kBf16, /*seed=*/910 + accepted), IsOk());
    }
  }
  std::printf("%s BF16: %d problems accepted and checked, %d declined\n", std::string(algorithm.name()).c_str(),
              accepted, declined);
}

// oneDNN names its im2col + GEMM convolution "x64:gemm:jit" on x86-64 (older builds and other CPUs "gemm:jit"); the
// direct JIT kernels, brgconv and the depthwise brdgmm are not GEMM lowerings.
TEST(Conv2dOnednnTest, GemmImplementationsAreRecognizedByName) {
  EXPECT_TRUE(onednn::IsGemmImplementation("x64:gemm:jit"));
  EXPECT_TRUE(onednn::IsGemmImplementation("gemm:jit"));
  EXPECT_TRUE(onednn::IsGemmImplementation("gemm:acl"));
  EXPECT_FALSE(onednn::IsGemmImplementation("jit:avx2"));
  EXPECT_FALSE(onednn::IsGemmImplementation("jit_1x1:avx512_core"));
  EXPECT_FALSE(onednn::IsGemmImplementation("brgconv:avx512_core"));
  EXPECT_FALSE(onednn::IsGemmImplementation("brdgmm:avx512_core"));
  EXPECT_FALSE(onednn::IsGemmImplementation("ref:any"));
  EXPECT_FALSE(onednn::IsGemmImplementation(""));
}

// The heuristic default ranks oneDNN's GEMM lowering below Convoy's own algorithms and its direct kernels above them,
// whichever implementation oneDNN picks for each shape on this CPU.
template <typename AlgorithmT>
void CheckHeuristicScoreFollowsTheImplementation(Layout layout, int& gemm, int& direct) {
  const AlgorithmT algorithm;
  for (const Conv2dProblem& problem : Shapes(layout)) {
    const absl::StatusOr<std::string> impl = algorithm.Implementation(problem);
    ASSERT_THAT(impl.status(), IsOk()) << problem.ToString();
    const bool is_gemm = onednn::IsGemmImplementation(*impl);
    (is_gemm ? gemm : direct)++;
    EXPECT_EQ(algorithm.HeuristicScore(problem), is_gemm ? 5 : 40) << *impl << " for " << problem.ToString();
  }
}

TEST(Conv2dOnednnTest, HeuristicScoreFollowsTheImplementation) {
  int gemm = 0, direct = 0;
  CheckHeuristicScoreFollowsTheImplementation<Conv2dOnednnNchw>(Layout::kNCHW, gemm, direct);
  CheckHeuristicScoreFollowsTheImplementation<Conv2dOnednnNhwc>(Layout::kNHWC, gemm, direct);
  CheckHeuristicScoreFollowsTheImplementation<Conv2dOnednnNchw8c>(Layout::kNCHW8c, gemm, direct);
  std::printf("oneDNN chose its GEMM lowering for %d problems and a direct kernel for %d\n", gemm, direct);
}

TEST(Conv2dOnednnTest, NchwMatchesReference) { CheckAllShapes<Conv2dOnednnNchw>(Layout::kNCHW); }
TEST(Conv2dOnednnTest, NhwcMatchesReference) { CheckAllShapes<Conv2dOnednnNhwc>(Layout::kNHWC); }
TEST(Conv2dOnednnTest, Nchw8cMatchesReference) { CheckAllShapes<Conv2dOnednnNchw8c>(Layout::kNCHW8c); }
TEST(Conv2dOnednnTest, Bf16NchwDeclinesOrMatchesReference) { CheckAllShapesInBf16<Conv2dOnednnNchw>(Layout::kNCHW); }
TEST(Conv2dOnednnTest, Bf16NhwcDeclinesOrMatchesReference) { CheckAllShapesInBf16<Conv2dOnednnNhwc>(Layout::kNHWC); }
TEST(Conv2dOnednnTest, Bf16Nchw8cDeclinesOrMatchesReference) {
  CheckAllShapesInBf16<Conv2dOnednnNchw8c>(Layout::kNCHW8c);
}

bool CpuHasAvx512() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512;
}

// ---- the residual as binary_add or as sum -------------------------------------------------------------------------

// The layers that carry a residual in ResNet-18 (3x3, 64 -> 64), ResNet-50 (the 1x1 expansion of a bottleneck,
// 64 -> 256) and MobileNetV2 (the 1x1 projection, 144 -> 24), on small images.
std::vector<Conv2dProblem> ResidualShapes(Layout layout) {
  return {
      Conv(2, 64, 14, 14, 64, 3, 3, 1, 1, 1, 1, layout),
      Conv(2, 64, 14, 14, 256, 1, 1, 1, 0, 1, 1, layout),
      Conv(2, 144, 16, 16, 24, 1, 1, 1, 0, 1, 1, layout),
  };
}

// EpiloguesToTest() and ResNet's own (a folded batch norm: conv bias, the residual, relu; oneDNN's chain is then
// [sum, relu], the order its AVX2 kernels take the sum in, so the sum form runs on every CPU).
std::vector<Epilogue> ResidualEpilogues() {
  std::vector<Epilogue> out = testing::EpiloguesToTest();
  Epilogue resnet;
  resnet.has_bias = true;
  resnet.residual = ResidualMode::kBeforeActivation;
  resnet.activation = Activation::Relu();
  out.push_back(resnet);
  return out;
}

// Every residual shape with every epilogue of ResidualEpilogues(), through three instances of the algorithm: the binary_add form, the sum
// form (with the residual in its own buffer, which Run copies into the output, and already in the output), and the
// registered default, which must take the sum form exactly where that is brgconv and binary_add is not. On AVX-512
// CPUs, ResNet's NHWC FP32 residual layers must get brgconv through the sum form.
template <typename AlgorithmT>
void CheckBothResidualForms(Layout layout) {
  using Form = typename AlgorithmT::ResidualForm;
  const AlgorithmT binary(Form::kBinaryAdd), sum(Form::kSum), chosen;
  uint32_t seed = 1000 + 100 * static_cast<int>(layout);
  int summed = 0, chosen_sum = 0;
  for (Conv2dProblem problem : ResidualShapes(layout)) {
    for (const Epilogue& epilogue : ResidualEpilogues()) {
      problem.epilogue = epilogue;
      const std::string what = absl::StrCat(problem.ToString(), " epilogue ", ToString(epilogue));
      EXPECT_THAT(CheckConv2dAgainstReference(binary, problem, kFp32, seed++), IsOk());
      EXPECT_FALSE(binary.AccumulatesOntoOutput(problem)) << what;
      EXPECT_THAT(CheckConv2dAgainstReference(sum, problem, kFp32, seed++), IsOk());
      if (sum.AccumulatesOntoOutput(problem)) {
        ++summed;
        EXPECT_THAT(CheckConv2dAgainstReference(sum, problem, kFp32, seed++, 2, ResidualPlacement::kInOutput),
                    IsOk());
      }
      if (epilogue.residual == ResidualMode::kNone) {
        EXPECT_FALSE(sum.AccumulatesOntoOutput(problem)) << what;
        EXPECT_FALSE(chosen.AccumulatesOntoOutput(problem)) << what;
        continue;
      }
      CONVOY_ASSERT_OK_AND_ASSIGN(const std::string binary_impl, binary.Implementation(problem));
      CONVOY_ASSERT_OK_AND_ASSIGN(const std::string sum_impl, sum.Implementation(problem));
      CONVOY_ASSERT_OK_AND_ASSIGN(const std::string chosen_impl, chosen.Implementation(problem));
      const bool sum_pays = sum.AccumulatesOntoOutput(problem) && absl::StrContains(sum_impl, "brgconv") &&
                            !absl::StrContains(binary_impl, "brgconv");
      EXPECT_EQ(chosen.AccumulatesOntoOutput(problem), sum_pays)
          << what << ": binary_add form " << binary_impl << ", sum form " << sum_impl;
      EXPECT_EQ(chosen_impl, sum_pays ? sum_impl : binary_impl) << what;
      if (chosen.AccumulatesOntoOutput(problem)) {
        ++chosen_sum;
        EXPECT_THAT(CheckConv2dAgainstReference(chosen, problem, kFp32, seed++, 2, ResidualPlacement::kInOutput),
                    IsOk());
      }
      if (CpuHasAvx512() && layout == Layout::kNHWC && problem.k != 24) {
        EXPECT_THAT(chosen_impl, ::testing::HasSubstr("brgconv")) << what;
        EXPECT_TRUE(chosen.AccumulatesOntoOutput(problem)) << what;
      }
      std::printf("%s: binary_add %s, sum %s%s -> %s\n", what.c_str(), binary_impl.c_str(), sum_impl.c_str(),
                  sum.AccumulatesOntoOutput(problem) ? "" : " (no sum form: binary_add)", chosen_impl.c_str());
    }
  }
  std::printf("%s: the sum form ran %d problems; the registered algorithm chose it for %d\n",
              std::string(chosen.name()).c_str(), summed, chosen_sum);
}

TEST(Conv2dOnednnTest, ResidualAsBinaryAddOrSumMatchesReferenceInNhwc) {
  CheckBothResidualForms<Conv2dOnednnNhwc>(Layout::kNHWC);
}
TEST(Conv2dOnednnTest, ResidualAsBinaryAddOrSumMatchesReferenceInNchw8c) {
  CheckBothResidualForms<Conv2dOnednnNchw8c>(Layout::kNCHW8c);
}
TEST(Conv2dOnednnTest, ResidualAsBinaryAddOrSumMatchesReferenceInNchw) {
  CheckBothResidualForms<Conv2dOnednnNchw>(Layout::kNCHW);
}

// A residual epilogue without a residual pointer is refused with the problem named, in either form.
TEST(Conv2dOnednnTest, MissingResidualIsInvalidArgument) {
  for (auto form : {Conv2dOnednnNhwc::ResidualForm::kBinaryAdd, Conv2dOnednnNhwc::ResidualForm::kSum}) {
    const Conv2dOnednnNhwc algorithm(form);
    Conv2dProblem problem = Conv(1, 16, 4, 4, 16, 1, 1, 1, 0, 1, 1, Layout::kNHWC);
    problem.epilogue.residual = ResidualMode::kBeforeActivation;
    ASSERT_THAT(algorithm.CanImplement(problem), IsOk());
    ThreadPool pool(1);
    const ExecutionContext context{Backend::kCpu, &pool};
    CONVOY_ASSERT_OK_AND_ASSIGN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(problem, context));
    std::vector<float> x(16 * 16, 1.0f), w(algorithm.PackedFilterBytes(problem) / sizeof(float), 1.0f), y(16 * 16);
    std::vector<char> scratch(algorithm.WorkspaceBytes(problem));
    const Conv2dArgs args{x.data(), w.data(), nullptr, nullptr, nullptr, y.data()};
    const absl::Status status =
        algorithm.Run(problem, args, {scratch.data(), scratch.size(), state.get()}, context);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
    EXPECT_THAT(status.message(), ::testing::HasSubstr("residual pointer is null"));
    EXPECT_THAT(status.message(), ::testing::HasSubstr(problem.ToString()));
  }
}

// ---- the brgconv reproducer ---------------------------------------------------------------------------------------

// Runs `problem` with the given (already packed) filter on fresh random inputs, the output poisoned with NaN, and
// compares it with the reference run on the raw filter: OK, or the mismatch.
absl::Status RunWithPackedFilter(const Conv2dAlgorithm& algorithm, const Conv2dProblem& problem, const void* raw_filter,
                                 const void* packed_filter, const ExecutionContext& context, uint32_t seed) {
  using ::convoy::testing::RandomBuffer;
  const int64_t y_count = problem.output_desc().num_elements();
  CONVOY_ASSIGN_OR_RETURN(HostBuffer x, RandomBuffer(problem.dtype, problem.input_desc().num_elements(), seed));
  CONVOY_ASSIGN_OR_RETURN(HostBuffer bias, RandomBuffer(DataType::kFloat32, problem.k, seed + 1));
  CONVOY_ASSIGN_OR_RETURN(HostBuffer y, HostBuffer::Allocate(y_count * sizeof(float)));
  CONVOY_ASSIGN_OR_RETURN(HostBuffer expected, HostBuffer::Allocate(y_count * sizeof(float)));
  ::convoy::testing::PoisonWithNaN(y.data(), DataType::kFloat32, y_count);
  ::convoy::testing::PoisonWithNaN(expected.data(), DataType::kFloat32, y_count);
  CONVOY_ASSIGN_OR_RETURN(HostBuffer workspace, HostBuffer::Allocate(algorithm.WorkspaceBytes(problem)));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(problem, context));
  Conv2dArgs args{x.data(), packed_filter, bias.as<float>(), nullptr, nullptr, y.data()};
  CONVOY_RETURN_IF_ERROR(algorithm.Run(problem, args, {workspace.data(), workspace.size(), state.get()}, context));
  args.w = raw_filter;
  args.y = expected.data();
  CONVOY_RETURN_IF_ERROR(reference::Conv2d(problem, args));
  return ::convoy::testing::CompareFloats(::convoy::testing::ToFloats(y.data(), DataType::kFloat32, y_count),
                                          ::convoy::testing::ToFloats(expected.data(), DataType::kFloat32, y_count),
                                          kFp32);
}

// MobileNetV2's last projection (1x1, 960 -> 320 channels on 2x2 pixels), NHWC, FP32, conv bias, no activation, on
// 2 threads, at batch sizes 1..8 as a plan prepares it. On CPUs with AVX-512 oneDNN 2.6 runs it with brgconv_1x1,
// which picks the filter's output-channel block per problem: on an Intel Xeon (family 6 model 207) at 2 threads,
// Acdb32a (320 x 960 floats) at batch 1 and Acdb48a (336 x 960, zero-padded) from batch 2 on. Checked here:
//  1. brgconv is right: every batch size, with the filter packed for its own problem, matches the reference (on
//     AVX-512 CPUs the test asserts brgconv is what ran; on CPUs without AVX-512 oneDNN 2.6 has no brgconv, and
//     what it runs instead, jit_1x1:avx2, is checked the same way);
//  2. the trigger: the filter packed for batch 1, run at every batch size, is right exactly where that batch's
//     packed layout (PackedFilterLayout) is batch 1's and wrong everywhere else. This is what plans did before a
//     step's packed filter was keyed by its layout (server/runtime/planner_internal.h). The batch-1 filter sits in a
//     buffer as large as the largest layout's, its tail NaN, so a wrong layout reads NaN and wrong weights, never
//     past the allocation.
// Where every batch size has batch 1's layout (AVX2 CPUs, whose jit kernels pick OIhw8i8o for any batch), part 2
// checks that sharing the filter is right at every batch.
TEST(Conv2dOnednnTest, BrgconvFilterLayoutFollowsTheBatch) {
  ThreadPool pool(2);
  const ExecutionContext context{Backend::kCpu, &pool};
  // The descriptors (and with them brgconv's blocking) are made with the calling thread's OpenMP thread count: make
  // it the pool's, as the planner's Prepare does, before a fresh algorithm describes any problem.
  onednn::UseContextThreads(context);
  const Conv2dOnednnNhwc algorithm;
  const auto problem_at = [](int batch) {
    Conv2dProblem p = Conv(batch, 960, 2, 2, 320, 1, 1, 1, 0, 1, 1, Layout::kNHWC);
    p.epilogue.has_bias = true;
    return p;
  };
  const bool avx512 = CpuHasAvx512();
  std::vector<std::string> layouts;
  size_t largest_packed = 0;
  for (int batch = 1; batch <= 8; ++batch) {
    const Conv2dProblem problem = problem_at(batch);
    ASSERT_THAT(algorithm.CanImplement(problem), IsOk());
    CONVOY_ASSERT_OK_AND_ASSIGN(const std::string impl, algorithm.Implementation(problem));
    EXPECT_EQ(algorithm.LaunchSummary(problem), "oneDNN " + impl);  // what `convoy inspect` prints per step
    layouts.push_back(algorithm.PackedFilterLayout(problem));
    largest_packed = std::max(largest_packed, algorithm.PackedFilterBytes(problem));
    std::printf("batch %d: %s, filter %s\n", batch, impl.c_str(), layouts.back().c_str());
    if (avx512) {
      EXPECT_THAT(impl, ::testing::HasSubstr("brgconv")) << "batch " << batch;
    }
    EXPECT_THAT(testing::CheckConv2dAgainstReference(algorithm, problem, kFp32, /*seed=*/950 + batch), IsOk())
        << "batch " << batch << " with its own packed filter";
  }

  const Conv2dProblem first = problem_at(1);
  CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer raw, ::convoy::testing::RandomBuffer(DataType::kFloat32,
                                                                                first.filter_elements(), 960));
  CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer packed, HostBuffer::Allocate(largest_packed));
  ::convoy::testing::PoisonWithNaN(packed.data(), DataType::kFloat32, largest_packed / sizeof(float));
  ASSERT_THAT(algorithm.PackFilter(first, raw.data(), packed.data(), context), IsOk());
  int other_layouts = 0;
  for (int batch = 1; batch <= 8; ++batch) {
    const absl::Status shared =
        RunWithPackedFilter(algorithm, problem_at(batch), raw.data(), packed.data(), context, /*seed=*/970 + batch);
    if (layouts[batch - 1] == layouts[0]) {
      EXPECT_THAT(shared, IsOk()) << "batch " << batch << " with the batch-1 filter, same layout";
    } else {
      ++other_layouts;
      EXPECT_FALSE(shared.ok()) << "batch " << batch << " read the batch-1 filter (" << layouts[0] << ") as "
                                << layouts[batch - 1] << " and still matched the reference";
    }
  }
  std::printf("%d of 8 batch sizes pack the filter in another layout than batch 1's\n", other_layouts);
}

}  // namespace
}  // namespace convoy::cpu
