// CPU 1x1 conv2d as a direct OpenBLAS sgemm; see conv2d_1x1_gemm.h.
#include "kernels/cpu/conv2d_1x1_gemm.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/conv2d_gemm_common.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
absl::string_view Conv2d1x1Gemm<kLayout>::name() const {
  return kLayout == Layout::kNCHW ? "cpu.conv2d.gemm_1x1_nchw" : "cpu.conv2d.gemm_1x1_nhwc";
}

template <Layout kLayout>
absl::Status Conv2d1x1Gemm<kLayout>::CanImplement(const Conv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.layout != kLayout) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes ", LayoutName(kLayout), " only"));
  }
  const Conv2dProblem& p = problem;
  if (p.r != 1 || p.s != 1 || p.stride_h != 1 || p.stride_w != 1 || p.pad_top != 0 || p.pad_bottom != 0 ||
      p.pad_left != 0 || p.pad_right != 0) {
    return absl::UnimplementedError(absl::StrCat(name(), " needs a 1x1 filter, stride 1 and no padding"));
  }
  return absl::OkStatus();
}

template <Layout kLayout>
size_t Conv2d1x1Gemm<kLayout>::WorkspaceBytes(const Conv2dProblem& problem) const {
  return ConvGemmWorkspaceBytes(problem, ConvGemmOperand::kDirect);
}

template <Layout kLayout>
size_t Conv2d1x1Gemm<kLayout>::PackedFilterBytes(const Conv2dProblem& problem) const {
  return ConvGemmPackedFilterBytes(problem);
}

template <Layout kLayout>
absl::Status Conv2d1x1Gemm<kLayout>::PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                                                   const ExecutionContext& context) const {
  ConvertFilterToFloat(filter, problem.dtype, problem.filter_elements(), static_cast<float*>(packed));
  return absl::OkStatus();
}

template <Layout kLayout>
absl::Status Conv2d1x1Gemm<kLayout>::Run(const Conv2dProblem& problem, const Conv2dArgs& args,
                                            Workspace workspace, const ExecutionContext& context) const {
  return RunConvGemm(problem, args, ConvGemmOperand::kDirect, workspace, context);
}

template class Conv2d1x1Gemm<Layout::kNCHW>;
template class Conv2d1x1Gemm<Layout::kNHWC>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2d1x1GemmNchw);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2d1x1GemmNhwc);

}  // namespace cpu
}  // namespace convoy
