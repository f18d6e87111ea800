// Every CUDA algorithm of one op against the CPU reference, directly and recorded (see ops_check.h).
#include "tests/gpu/ops_check.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/strings/match.h"

#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"
#include "kernels/testing/quantized_conv2d_cases.h"
#include "kernels/testing/quantized_step_cases.h"

namespace convoy::gpu_check {
namespace {

// Every small-tensor problem of a Hopper (sm_90a, bulk tensor copy) algorithm runs this many times on the device: the
// tensor-map driver bug CUTLASS works around (kernels/cuda_emulation/tensor_map_driver_workaround.h) shows as
// occasional errors with tensors under 128 KiB, and a stage released too early as occasional wrong answers, so one
// PASS proves little; the count of failing repetitions is reported. --quick (the emulated CI run) repeats twice.
constexpr int kSmallTensorRepeats = 20;
constexpr int kQuickRepeats = 2;
constexpr uint64_t kSmallTensorBytes = 128 * 1024;

bool AllTensorsSmall(const Conv2dProblem& p) {
  const uint64_t e = DataTypeSize(p.dtype);
  const uint64_t x = uint64_t{1} * p.n * p.h * p.w * p.c * e;
  const uint64_t w = uint64_t{1} * p.k * p.r * p.s * (p.c / std::max(p.groups, 1)) * e;
  const uint64_t y = uint64_t{1} * p.n * p.p() * p.q() * p.k * e;
  return std::max({x, w, y}) < kSmallTensorBytes;
}
bool AllTensorsSmall(const GemmProblem& p) {
  const uint64_t e = DataTypeSize(p.dtype);
  return std::max({uint64_t{1} * p.m * p.k * e, uint64_t{1} * p.n * p.k * e, uint64_t{1} * p.m * p.n * e}) <
         kSmallTensorBytes;
}
bool AllTensorsSmall(const QuantizedConv2dProblem& p) {
  const uint64_t x = uint64_t{1} * p.n * p.h * p.w * p.c;
  const uint64_t w = uint64_t{1} * p.k * p.r * p.s * (p.c / std::max(p.groups, 1));
  const uint64_t y = uint64_t{1} * p.n * p.p() * p.q() * p.k * DataTypeSize(p.dst_type);
  return std::max({x, w, y}) < kSmallTensorBytes;
}
template <typename Problem>
bool AllTensorsSmall(const Problem&) {
  return false;
}

bool UsesTensorMaps(absl::string_view algorithm) { return absl::StrContains(algorithm, ".hopper_"); }

// Runs check(repetition) `repeats` times; OK only when every repetition passed, otherwise how many failed and the
// first failure. Stops early when a repetition left the CUDA context unusable.
template <typename Check>
absl::Status Repeated(int repeats, const Check& check) {
  int failed = 0, ran = 0;
  std::string first;
  for (; ran < repeats; ++ran) {
    const absl::Status status = check(ran);
    if (status.ok()) continue;
    if (failed++ == 0) first = std::string(status.message());
    if (!CheckCudaContext().ok()) {
      ++ran;
      break;
    }
  }
  if (failed == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(failed, " of ", ran, " repetitions failed",
                                          ran < repeats ? " (the CUDA context was lost: the rest did not run)" : "",
                                          "; the first: ", first));
}

// Runs `algorithm` `repeats` times against one reference (Repeated).
template <typename Op>
absl::Status RunRepeated(const typename Op::AlgorithmType& algorithm, const typename Op::Problem& problem,
                         const testing::cross_backend_internal::ReferenceCase& reference, cuda::CudaDevice& device,
                         testing::Tolerance tolerance, int repeats) {
  return Repeated(repeats, [&](int) {
    return testing::cross_backend_internal::RunAgainstReference<Op>(algorithm, problem, reference, device, tolerance,
                                                                    /*record_and_replay=*/false);
  });
}

template <typename Op>
void CheckOp(const std::vector<typename Op::Problem>& problems, cuda::CudaDevice& device, CaseRunner& cases,
             bool recorded, bool require_coverage, int repeats = 1) {
  const char* how = recorded ? " [graph]" : "";
  const auto algorithms = OpRegistry<Op>::Global().All(Backend::kCuda);
  const std::string op(OpKindName(Op::Problem::kKind));
  if (algorithms.empty()) {
    cases.Fail(absl::StrCat("cuda.", op, how), "no CUDA algorithm is registered for this op");
    return;
  }
  std::map<std::string, int> ran;
  for (const auto* algorithm : algorithms) ran[std::string(algorithm->name())] = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const auto& problem = problems[i];
    const testing::Tolerance tolerance = testing::OpCaseTraits<typename Op::Problem>::TolerancePerOutput(problem);
    const uint32_t seed = 20240601 + 64 * static_cast<uint32_t>(i);
    // The CPU reference is made once per problem, on the first case that runs (a process resuming after a fault
    // skips the cases before its resume point): a full-size layer's reference costs about a second on one core.
    std::optional<absl::StatusOr<testing::cross_backend_internal::ReferenceCase>> reference;
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      ++ran[std::string(algorithm->name())];
      if (!recorded && repeats > 1 && UsesTensorMaps(algorithm->name()) && AllTensorsSmall(problem)) {
        cases.Run(absl::StrCat(algorithm->name(), " x", repeats, " ", problem.ToString(), " (seed ", seed, ")"), [&] {
          if (!reference.has_value()) reference = testing::cross_backend_internal::MakeReferenceCase<Op>(problem, seed);
          if (!reference->ok()) return reference->status();
          return RunRepeated<Op>(*algorithm, problem, **reference, device, tolerance, repeats);
        });
        continue;
      }
      cases.Run(absl::StrCat(algorithm->name(), how, " ", problem.ToString(), " (seed ", seed, ")"), [&] {
        if (!reference.has_value()) reference = testing::cross_backend_internal::MakeReferenceCase<Op>(problem, seed);
        if (!reference->ok()) return reference->status();
        return testing::cross_backend_internal::RunAgainstReference<Op>(*algorithm, problem, **reference, device,
                                                                         tolerance, recorded);
      });
    }
  }
  for (const auto& [name, count] : ran) {
    if (cases.past_resume_point()) Say("  ", name, how, ": ", count, " cases");
    if (count == 0 && require_coverage) cases.Fail(absl::StrCat(name, how), "ran on no problem of the list");
  }
}

template <typename Problem>
std::vector<Problem> Concatenated(std::vector<Problem> a, const std::vector<Problem>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// conv2d and GEMM: the shared list, the extras and the Hopper-aimed shapes; --quick (the emulated CI run, where
// //kernels/cuda:hopper_conv2d_gemm_emulated_test runs the Hopper shapes) only the extras.
template <typename Op>
std::vector<typename Op::Problem> DirectProblems(bool quick) {
  if constexpr (Op::kKind == OpKind::kConv2d) {
    return quick ? testing::CudaConvExtraProblems()
                 : Concatenated(testing::CudaConvTestProblems(), testing::HopperConvExtraProblems());
  } else if constexpr (Op::kKind == OpKind::kGemm) {
    return quick ? testing::CudaGemmExtraProblems()
                 : Concatenated(testing::CudaGemmTestProblems(), testing::HopperGemmExtraProblems());
  } else {
    return testing::ProblemsFor<typename Op::Problem>();
  }
}

// Recorded: conv2d and GEMM on the extra problems (they reach every algorithm), the other ops on the shared list.
template <typename Op>
std::vector<typename Op::Problem> RecordedProblems() {
  if constexpr (Op::kKind == OpKind::kConv2d) {
    return testing::CudaConvExtraProblems();
  } else if constexpr (Op::kKind == OpKind::kGemm) {
    return testing::CudaGemmExtraProblems();
  } else {
    return testing::ProblemsFor<typename Op::Problem>();
  }
}

void CheckFullSizeLayers(cuda::CudaDevice& device, CaseRunner& cases) {
  std::vector<Conv2dProblem> full;
  for (const testing::ResNetLayer& layer : testing::ResNet50ConvLayers(1, DataType::kFloat16, Layout::kNHWC)) {
    if (layer.name == "res2_3x3_64_b1" || layer.name == "res4_1x1_1024_b1" || layer.name == "res5_3x3s2_512_b1") {
      full.push_back(layer.problem);
    }
  }
  CheckOp<Conv2dOp>(full, device, cases, /*recorded=*/false, /*require_coverage=*/false);
}

// INT8 convolution (not in ForEachOp: the cross-backend suite has no INT8 case traits): every CUDA algorithm on the
// shared INT8 problem list (every layer shape x every epilogue; --quick: every shape with two epilogues, u8 + ReLU
// and s8 + residual) against the exact integer reference, bit-exact (quantized_conv2d_cases.h); then the multipliers
// fixed in the problem as a plan's QDQ folds make them (packed with the filter), one epilogue per shape, and the
// residual adds fused after the requantization (the convolution as either operand; --quick: one per shape). The
// Hopper INT8 kernels (cuda.quantized_conv2d.hopper_*, bulk tensor copies) run each small-tensor problem of the first
// pass kSmallTensorRepeats times (--quick: kQuickRepeats), fresh data each time, as the Hopper conv2d kernels do.
void CheckQuantizedConv2d(bool quick, cuda::CudaDevice& device, CaseRunner& cases) {
  const auto algorithms = OpRegistry<QuantizedConv2dOp>::Global().All(Backend::kCuda);
  if (algorithms.empty()) {
    cases.Fail("cuda.quantized_conv2d", "no CUDA algorithm is registered for this op");
    return;
  }
  const std::vector<QuantizedConv2dProblem> all = testing::QuantizedConv2dTestProblems(Layout::kNHWC);
  const size_t epilogues = testing::QuantizedConv2dTestEpilogues().size();
  std::map<std::string, int> ran;
  for (const auto* algorithm : algorithms) ran[std::string(algorithm->name())] = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    if (quick && i % epilogues != 1 && i % epilogues != 4) continue;
    const QuantizedConv2dProblem& problem = all[i];
    const uint32_t seed = 20241205 + 64 * static_cast<uint32_t>(i);
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      ++ran[std::string(algorithm->name())];
      const int repeats = UsesTensorMaps(algorithm->name()) && AllTensorsSmall(problem)
                              ? (quick ? kQuickRepeats : kSmallTensorRepeats)
                              : 1;
      cases.Run(absl::StrCat(algorithm->name(), repeats > 1 ? absl::StrCat(" x", repeats) : "", " ",
                             problem.ToString(), " (seed ", seed, ")"),
                [&] {
                  return Repeated(repeats, [&](int repetition) {
                    return testing::CheckQuantizedConv2d(*algorithm, problem, device, seed + repetition,
                                                         testing::QuantizedTolerance{});
                  });
                });
    }
  }
  for (size_t i = 0; i < all.size(); ++i) {
    if (i % epilogues != (i / epilogues) % epilogues) continue;
    const QuantizedConv2dProblem& problem = all[i];
    const uint32_t seed = 20241205 + 64 * static_cast<uint32_t>(i) + 1;
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      cases.Run(absl::StrCat(algorithm->name(), " fixed multipliers ", problem.ToString(), " (seed ", seed, ")"), [&] {
        return testing::CheckQuantizedConv2d(*algorithm, problem, device, seed, testing::QuantizedTolerance{},
                                             testing::QuantizedScaleSource::kProblem);
      });
    }
  }
  // --quick (the emulated run, where the phase's 30 s cap is tight on a loaded machine): one fused add per shape, the
  // three forms (conv as b, conv as a, INT8 operands with ReLU) in turn.
  const std::vector<QuantizedConv2dProblem> fused = testing::QuantizedConv2dFusedAddTestProblems(Layout::kNHWC);
  const size_t forms = fused.size() / testing::QuantizedConv2dTestShapes(Layout::kNHWC).size();
  for (size_t i = 0; i < fused.size(); ++i) {
    if (quick && i % forms != (i / forms) % forms) continue;
    const QuantizedConv2dProblem& problem = fused[i];
    const uint32_t seed = 20241208 + 64 * static_cast<uint32_t>(i);
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      cases.Run(absl::StrCat(algorithm->name(), " fused add ", problem.ToString(), " (seed ", seed, ")"), [&] {
        return testing::CheckQuantizedConv2d(*algorithm, problem, device, seed, testing::QuantizedTolerance{},
                                             testing::QuantizedScaleSource::kProblem);
      });
    }
  }
  for (const auto& [name, count] : ran) {
    if (cases.past_resume_point()) Say("  ", name, ": ", count, " cases");
    if (count == 0) cases.Fail(name, "ran on no problem of the list");
  }
}

// The element steps of INT8 plans (quantized_step_cases.h), exact: every CUDA convert algorithm on each quantize /
// dequantize case it implements (UINT8 and INT8, every NCHW / NHWC pair) against ONNX's definitions, and the
// quantized add on every type triple (aligned and unaligned pointers, over either operand) against QLinearAdd's
// arithmetic.
void CheckQuantizedSteps(cuda::CudaDevice& device, CaseRunner& cases) {
  uint32_t seed = 20241206;
  std::map<std::string, int> ran;
  for (const testing::QuantizedConvertCase& c : testing::QuantizedConvertTestCases()) {
    for (const ConvertAlgorithm* algorithm : OpRegistry<ConvertOp>::Global().All(Backend::kCuda)) {
      if (!algorithm->CanImplement(c.Quantize(0.1f, 0)).ok()) continue;
      ++ran[std::string(algorithm->name())];
      const uint32_t case_seed = seed++;
      cases.Run(absl::StrCat(algorithm->name(), " quantize/dequantize ", c.ToString(), " (seed ", case_seed, ")"),
                [&] { return testing::CheckQuantizeRoundTrip(*algorithm, c, device, case_seed); });
    }
  }
  const auto adds = OpRegistry<QuantizedAddOp>::Global().All(Backend::kCuda);
  if (adds.empty()) cases.Fail("cuda.quantized_add", "no CUDA algorithm is registered for this op");
  const DataType types[] = {DataType::kUInt8, DataType::kInt8};
  for (const QuantizedAddAlgorithm* algorithm : adds) {
    for (DataType a : types) {
      for (DataType b : types) {
        for (DataType y : types) {
          for (const int offset : {0, 1}) {
            const uint32_t case_seed = seed++;
            cases.Run(absl::StrCat(algorithm->name(), " ", DataTypeName(a), " + ", DataTypeName(b), " -> ",
                                   DataTypeName(y), offset ? " unaligned" : "", " (seed ", case_seed, ")"),
                      [&] {
                        return testing::CheckQuantizedAdd(*algorithm, a, b, y, testing::QuantizedAddOutput::kSeparate,
                                                          offset, device, case_seed);
                      });
          }
        }
        const uint32_t case_seed = seed++;
        cases.Run(absl::StrCat(algorithm->name(), " ", DataTypeName(a), " + ", DataTypeName(b), " over b (seed ",
                               case_seed, ")"),
                  [&] {
                    return testing::CheckQuantizedAdd(*algorithm, a, b, b, testing::QuantizedAddOutput::kOverB, 0,
                                                      device, case_seed);
                  });
      }
    }
  }
  for (const auto& [name, count] : ran) {
    if (cases.past_resume_point()) Say("  ", name, " (quantize/dequantize): ", count, " cases");
  }
  for (const char* name : {"cuda.convert.elementwise", "cuda.convert.transpose_tiles"}) {
    if (ran[name] == 0) cases.Fail(name, "ran on no quantize/dequantize case");
  }
}

}  // namespace

std::vector<std::string> OpsPhaseNames(bool quick) {
  std::vector<std::string> names;
  ForEachOp([&](auto tag) {
    using Op = typename decltype(tag)::type;
    names.push_back(absl::StrCat("ops.", OpKindName(Op::Problem::kKind)));
  });
  names.push_back("ops.quantized_conv2d");
  names.push_back("ops.quantized_steps");
  if (!quick) names.push_back("ops.conv2d_full");
  return names;
}

bool RunOpsPhase(const std::string& phase, bool quick, cuda::CudaDevice& device, CaseRunner& cases) {
  if (phase == "ops.quantized_conv2d") {
    Say("-- quantized_conv2d (INT8): every CUDA algorithm against the exact integer reference --");
    CheckQuantizedConv2d(quick, device, cases);
    return true;
  }
  if (phase == "ops.quantized_steps") {
    Say("-- INT8 plan steps: quantize / dequantize converts and the quantized add, exact --");
    CheckQuantizedSteps(device, cases);
    return true;
  }
  if (phase == "ops.conv2d_full") {
    Say("-- full-size ResNet-50 layers (batch 1, FP16) against the reference --");
    CheckFullSizeLayers(device, cases);
    return true;
  }
  bool found = false;
  ForEachOp([&](auto tag) {
    using Op = typename decltype(tag)::type;
    if (found || phase != absl::StrCat("ops.", OpKindName(Op::Problem::kKind))) return;
    found = true;
    Say("-- ", OpKindName(Op::Problem::kKind), ": every CUDA algorithm against the CPU reference --");
    CheckOp<Op>(DirectProblems<Op>(quick), device, cases, /*recorded=*/false, /*require_coverage=*/true,
                quick ? kQuickRepeats : kSmallTensorRepeats);
    Say("-- ", OpKindName(Op::Problem::kKind), ": the same recorded into a CUDA graph and replayed --");
    CheckOp<Op>(RecordedProblems<Op>(), device, cases, /*recorded=*/true, /*require_coverage=*/true);
  });
  return found;
}

}  // namespace convoy::gpu_check
