// Every CUDA algorithm of one op against the CPU reference, directly and recorded (see ops_check.h).
#include "tests/gpu/ops_check.h"

#include <map>
#include <optional>

#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/cross_backend_suite.h"

namespace convoy::gpu_check {
namespace {

template <typename Op>
void CheckOp(const std::vector<typename Op::Problem>& problems, cuda::CudaDevice& device, CaseRunner& cases,
             bool recorded, bool require_coverage) {
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

template <typename Op>
std::vector<typename Op::Problem> DirectProblems(bool quick) {
  if constexpr (Op::kKind == OpKind::kConv2d) {
    return quick ? testing::CudaConvExtraProblems() : testing::CudaConvTestProblems();
  } else if constexpr (Op::kKind == OpKind::kGemm) {
    return quick ? testing::CudaGemmExtraProblems() : testing::CudaGemmTestProblems();
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

}  // namespace

std::vector<std::string> OpsPhaseNames(bool quick) {
  std::vector<std::string> names;
  ForEachOp([&](auto tag) {
    using Op = typename decltype(tag)::type;
    names.push_back(absl::StrCat("ops.", OpKindName(Op::Problem::kKind)));
  });
  if (!quick) names.push_back("ops.conv2d_full");
  return names;
}

bool RunOpsPhase(const std::string& phase, bool quick, cuda::CudaDevice& device, CaseRunner& cases) {
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
    CheckOp<Op>(DirectProblems<Op>(quick), device, cases, /*recorded=*/false, /*require_coverage=*/true);
    Say("-- ", OpKindName(Op::Problem::kKind), ": the same recorded into a CUDA graph and replayed --");
    CheckOp<Op>(RecordedProblems<Op>(), device, cases, /*recorded=*/true, /*require_coverage=*/true);
  });
  return found;
}

}  // namespace convoy::gpu_check
