// Verified INT8 convolution choices (verification.h) on the emulated CUDA device: every problem of the shared INT8
// list (every epilogue, the fused adds, multipliers fixed in the problem) verifies the heuristic's tensor-core pick
// against the CPU reference and, above cpu_reference_max_flops (lowered here), against the trusted direct kernel
// cuda.quantized_conv2d.simt, exactly; and broken algorithms registered only in this binary (one step off in some
// outputs, an image left unwritten) are rejected as mismatches (FP32 outputs: an unwritten element as non-finite).
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/shared_test_device.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/cuda_emulation/cuda_status.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/registry.h"
#include "kernels/registry/verification.h"
#include "kernels/testing/quantized_conv2d_cases.h"

namespace convoy {
namespace {

using ::convoy::testing::IsOk;
using ::testing::HasSubstr;

constexpr char kTrusted[] = "cuda.quantized_conv2d.simt";
constexpr char kTensorCore[] = "cuda.quantized_conv2d.implicit_gemm_64x64";
constexpr int kMarkedK = 40;  // the broken fakes implement only problems with this many output channels

const QuantizedConv2dAlgorithm& Find(const char* name) {
  const QuantizedConv2dAlgorithm* algorithm = OpRegistry<QuantizedConv2dOp>::Global().Find(name);
  if (algorithm == nullptr) std::abort();
  return *algorithm;
}

// The mma.sync 64x64 kernel, with Run's output changed by the subclass; implements the marked problems only, so the
// other tests' problems never meet it.
class BrokenInt8Conv : public QuantizedConv2dAlgorithm {
 public:
  Backend backend() const override { return Backend::kCuda; }
  absl::Status CanImplement(const QuantizedConv2dProblem& p) const override {
    if (p.k != kMarkedK) return absl::UnimplementedError("not a marked problem");
    return Find(kTensorCore).CanImplement(p);
  }
  size_t PackedFilterBytes(const QuantizedConv2dProblem& p) const override {
    return Find(kTensorCore).PackedFilterBytes(p);
  }
  std::string PackedFilterLayout(const QuantizedConv2dProblem& p) const override {
    return Find(kTensorCore).PackedFilterLayout(p);
  }
  absl::Status PackFilter(const QuantizedConv2dProblem& p, const void* filter, void* packed,
                          const ExecutionContext& context) const override {
    return Find(kTensorCore).PackFilter(p, filter, packed, context);
  }
};

// Every 7th output one step up (255 / 127 one down; FP32 plus 1).
class OffByOneInt8Conv final : public BrokenInt8Conv {
 public:
  absl::string_view name() const override { return "test.cuda.quantized_conv2d.off_by_one"; }
  absl::Status Run(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    CONVOY_RETURN_IF_ERROR(Find(kTensorCore).Run(p, args, workspace, context));
    const size_t count = static_cast<size_t>(p.output_desc().num_elements());
    std::vector<uint8_t> y(count * DataTypeSize(p.dst_type));
    CONVOY_RETURN_IF_CUDA_ERROR(cudaMemcpy(y.data(), args.y, y.size(), cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < count; i += 7) {
      const float v = LoadAsFloat(y.data(), p.dst_type, i);
      const bool top = (p.dst_type == DataType::kUInt8 && v == 255) || (p.dst_type == DataType::kInt8 && v == 127);
      StoreFromFloat(y.data(), p.dst_type, i, top ? v - 1 : v + 1);
    }
    CONVOY_RETURN_IF_CUDA_ERROR(cudaMemcpy(args.y, y.data(), y.size(), cudaMemcpyHostToDevice));
    return absl::OkStatus();
  }
  int HeuristicScore(const QuantizedConv2dProblem&) const override { return 1000; }
};

// Computes the first image only: the others' outputs keep the poison.
class UnwrittenImageInt8Conv final : public BrokenInt8Conv {
 public:
  absl::string_view name() const override { return "test.cuda.quantized_conv2d.unwritten_image"; }
  absl::Status Run(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args, Workspace workspace,
                   const ExecutionContext& context) const override {
    QuantizedConv2dProblem first_image = p;
    first_image.n = 1;
    return Find(kTensorCore).Run(first_image, args, workspace, context);
  }
  int HeuristicScore(const QuantizedConv2dProblem&) const override { return 999; }
};

CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, OffByOneInt8Conv);
CONVOY_REGISTER_ALGORITHM(QuantizedConv2dOp, UnwrittenImageInt8Conv);

// A ResNet-style 3x3 (u8 in and out, zero points, bias, residual, ReLU) with the marked K, 1.7 MFLOP.
QuantizedConv2dProblem Marked(DataType dst_type = DataType::kUInt8) {
  QuantizedConv2dProblem p;
  p.n = 2, p.c = 32, p.h = p.w = 6, p.k = kMarkedK, p.r = p.s = 3;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = 1;
  p.layout = Layout::kNHWC;
  p.dst_type = dst_type;
  p.epilogue.src_zero_point = 120;
  p.epilogue.dst_zero_point = dst_type == DataType::kFloat32 ? 0 : 5;
  p.epilogue.has_bias = true;
  p.epilogue.relu = true;
  p.epilogue.residual = ResidualMode::kBeforeActivation;
  p.epilogue.residual_scale = 0.6875f;
  p.epilogue.residual_zero_point = dst_type == DataType::kFloat32 ? 0 : 111;
  return p;
}

// The reference up to the default limit, the direct kernel above this one.
VerificationOptions AgainstTheDirectKernel() {
  VerificationOptions options;
  options.cpu_reference_max_flops = 1 << 12;  // below every shared problem (the depthwise one: 31104)
  return options;
}

// The shared list (every shape x every epilogue, the fused adds) and each shape with multipliers fixed in the
// problem (one epilogue each, a different one per shape, as plans' QDQ folds make them).
std::vector<QuantizedConv2dProblem> SharedProblems() {
  std::vector<QuantizedConv2dProblem> problems = testing::QuantizedConv2dTestProblems(Layout::kNHWC);
  const size_t epilogues = testing::QuantizedConv2dTestEpilogues().size();
  const size_t shapes = problems.size() / epilogues;
  for (size_t shape = 0; shape < shapes; ++shape) {
    QuantizedConv2dProblem fixed = problems[shape * epilogues + (shape + 1) % epilogues];
    for (int k = 0; k < fixed.k; ++k) fixed.epilogue.scales.push_back(0.0004f + 0.00001f * (k % 13));
    problems.push_back(fixed);
  }
  for (const QuantizedConv2dProblem& p : testing::QuantizedConv2dFusedAddTestProblems(Layout::kNHWC)) {
    problems.push_back(p);
  }
  return problems;
}

TEST(QuantizedConv2dVerificationTest, HeuristicPicksVerifyExactlyAgainstTheReferenceAndTheDirectKernel) {
  cuda::CudaDevice& device = cuda::SharedTestDevice();
  for (const QuantizedConv2dProblem& p : SharedProblems()) {
    SCOPED_TRACE(p.ToString());
    auto pick = OpRegistry<QuantizedConv2dOp>::Global().Heuristic(p, Backend::kCuda);
    ASSERT_THAT(pick.status(), IsOk());
    ASSERT_NE((*pick)->name(), kTrusted);
    VerificationSession<QuantizedConv2dOp> small(p, device, VerificationOptions());
    const VerificationRecord against_reference = small.Verify(**pick);
    EXPECT_TRUE(against_reference.passed) << against_reference.detail;
    EXPECT_EQ(against_reference.trusted, "reference");
    EXPECT_EQ(against_reference.max_error, 0.0);
    const VerificationRecord direct = small.Verify(Find(kTrusted));
    EXPECT_TRUE(direct.passed) << direct.detail;
    EXPECT_EQ(direct.max_error, 0.0);

    VerificationSession<QuantizedConv2dOp> large(p, device, AgainstTheDirectKernel());
    ASSERT_GT(p.flops(), AgainstTheDirectKernel().cpu_reference_max_flops);
    const VerificationRecord against_direct = large.Verify(**pick);
    EXPECT_TRUE(against_direct.passed) << against_direct.detail;
    EXPECT_EQ(against_direct.trusted, kTrusted);
    EXPECT_EQ(against_direct.max_error, 0.0);
  }
}

TEST(QuantizedConv2dVerificationTest, BrokenAlgorithmsAreRejectedAsMismatches) {
  cuda::CudaDevice& device = cuda::SharedTestDevice();
  for (const VerificationOptions& options : {VerificationOptions(), AgainstTheDirectKernel()}) {
    VerificationSession<QuantizedConv2dOp> session(Marked(), device, options);
    const VerificationRecord correct = session.Verify(Find(kTensorCore));
    EXPECT_TRUE(correct.passed) << correct.detail;
    EXPECT_EQ(session.trusted(), options.cpu_reference_max_flops < Marked().flops() ? kTrusted : "reference");
    const VerificationRecord off = session.Verify(Find("test.cuda.quantized_conv2d.off_by_one"));
    EXPECT_FALSE(off.passed);
    EXPECT_EQ(off.reason, kRejectedMismatch);
    EXPECT_EQ(off.max_error, 2.0);  // one step over the tolerance's half step
    const VerificationRecord unwritten = session.Verify(Find("test.cuda.quantized_conv2d.unwritten_image"));
    EXPECT_FALSE(unwritten.passed);
    EXPECT_EQ(unwritten.reason, kRejectedMismatch);
    EXPECT_THAT(unwritten.detail, HasSubstr("the poison: unwritten"));
    // The same session again: the poison is reset before every run.
    EXPECT_TRUE(session.Verify(Find(kTensorCore)).passed);
  }
}

TEST(QuantizedConv2dVerificationTest, Fp32OutputsWithinTheirToleranceAndUnwrittenIsNonFinite) {
  cuda::CudaDevice& device = cuda::SharedTestDevice();
  for (const VerificationOptions& options : {VerificationOptions(), AgainstTheDirectKernel()}) {
    VerificationSession<QuantizedConv2dOp> session(Marked(DataType::kFloat32), device, options);
    EXPECT_TRUE(session.Verify(Find(kTensorCore)).passed);
    EXPECT_EQ(session.Verify(Find("test.cuda.quantized_conv2d.off_by_one")).reason, kRejectedMismatch);
    EXPECT_EQ(session.Verify(Find("test.cuda.quantized_conv2d.unwritten_image")).reason, kRejectedNonFinite);
  }
}

// The heuristic's two favourites for the marked problem are the broken fakes: SelectAlgorithm rejects both (counted)
// and takes the tensor-core kernel.
TEST(QuantizedConv2dVerificationTest, SelectionFallsBackPastBrokenCandidates) {
  AlgorithmCache cache;
  auto selected = SelectAlgorithm<QuantizedConv2dOp>(Marked(), cuda::SharedTestDevice(), cache,
                                                     AlgorithmSelection::kHeuristic);
  ASSERT_THAT(selected.status(), IsOk());
  EXPECT_TRUE(selected->verified);
  EXPECT_NE(selected->algorithm->name(), kTrusted);
  EXPECT_FALSE(absl::StartsWith(selected->algorithm->name(), "test."));
  ASSERT_EQ(selected->rejected.size(), 2u);
  EXPECT_EQ(selected->rejected[0].algorithm, "test.cuda.quantized_conv2d.off_by_one");
  EXPECT_EQ(selected->rejected[1].algorithm, "test.cuda.quantized_conv2d.unwritten_image");
  for (const VerificationRecord& r : selected->rejected) EXPECT_EQ(r.reason, kRejectedMismatch) << r.algorithm;
}

}  // namespace
}  // namespace convoy
