// CPU conv2d by im2col + OpenBLAS sgemm; see conv2d_im2col_gemm.h.
#include "kernels/cpu/conv2d_im2col_gemm.h"

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/conv2d_gemm_common.h"
#include "kernels/cpu/gemm_tile.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace cpu {

template <Layout kLayout>
absl::string_view Conv2dIm2colGemm<kLayout>::name() const {
  return kLayout == Layout::kNCHW ? "cpu.conv2d.im2col_gemm_nchw" : "cpu.conv2d.im2col_gemm_nhwc";
}

template <Layout kLayout>
absl::Status Conv2dIm2colGemm<kLayout>::CanImplement(const Conv2dProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  if (problem.layout != kLayout) {
    return absl::UnimplementedError(absl::StrCat(name(), " takes ", LayoutName(kLayout), " only"));
  }
  return absl::OkStatus();
}

template <Layout kLayout>
size_t Conv2dIm2colGemm<kLayout>::WorkspaceBytes(const Conv2dProblem& problem) const {
  return ConvGemmWorkspaceBytes(problem, ConvGemmOperand::kIm2col);
}

template <Layout kLayout>
size_t Conv2dIm2colGemm<kLayout>::PackedFilterBytes(const Conv2dProblem& problem) const {
  return ConvGemmPackedFilterBytes(problem);
}

template <Layout kLayout>
absl::Status Conv2dIm2colGemm<kLayout>::PackFilter(const Conv2dProblem& problem, const void* filter, void* packed,
                                                   const ExecutionContext& context) const {
  ConvertFilterToFloat(filter, problem.dtype, problem.filter_elements(), static_cast<float*>(packed));
  return absl::OkStatus();
}

template <Layout kLayout>
absl::Status Conv2dIm2colGemm<kLayout>::Run(const Conv2dProblem& problem, const Conv2dArgs& args,
                                            Workspace workspace, const ExecutionContext& context) const {
  return RunConvGemm(problem, args, ConvGemmOperand::kIm2col, workspace, context);
}

template class Conv2dIm2colGemm<Layout::kNCHW>;
template class Conv2dIm2colGemm<Layout::kNHWC>;

CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dIm2colGemmNchw);
CONVOY_REGISTER_ALGORITHM(Conv2dOp, Conv2dIm2colGemmNhwc);

}  // namespace cpu
}  // namespace convoy
