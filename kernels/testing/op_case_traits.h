// What the cross-backend suite needs to know about each op to run one case without knowing the op: the buffers it
// reads and writes (dtype, element count, value range), how to build its Args from buffer pointers, which input is
// the packable filter, and the comparison tolerance.
//
// Tolerances (relative, absolute) are per output dtype, with the absolute floor scaled by sqrt(reduction size) for
// ops that sum many products (conv2d, GEMM, pooling, softmax):
//   FP32 (1e-4, 1e-5)   FP32 with allow_tf32 (2e-3, 1e-3)   FP16 (1e-2, 2e-3)   BF16 (3e-2, 1.6e-2)
// Data movement (concat, split, shuffle, pad, convert, transpose, nearest resize) must match exactly; linear and
// cubic resize sum up to 16 weighted taps (more when antialiasing).
#ifndef CONVOY_KERNELS_TESTING_OP_CASE_TRAITS_H_
#define CONVOY_KERNELS_TESTING_OP_CASE_TRAITS_H_

#include <string>
#include <vector>

#include "kernels/common/problems.h"
#include "kernels/common/tolerance.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::testing {

struct BufferSpec {
  std::string name;
  DataType dtype = DataType::kFloat32;
  int64_t count = 0;
  float lo = -1.0f;  // random values are uniform in [lo, hi); UINT8 takes all bytes
  float hi = 1.0f;
};

// Tolerance for an output of `dtype` produced by summing `reduction` terms per element: kernels/common/tolerance.h.
using ::convoy::ToleranceFor;

// Specialized per problem type. Each specialization provides:
//   static std::vector<BufferSpec> Inputs(const Problem&);
//   static std::vector<BufferSpec> Outputs(const Problem&);
//   static Args MakeArgs(const Problem&, const std::vector<void*>& inputs, const std::vector<void*>& outputs);
//   static int FilterInput(const Problem&);   // index into Inputs of the packable filter, or -1
//   static Tolerance TolerancePerOutput(const Problem&);
template <typename Problem>
struct OpCaseTraits;

template <>
struct OpCaseTraits<Conv2dProblem> {
  static std::vector<BufferSpec> Inputs(const Conv2dProblem& p);
  static std::vector<BufferSpec> Outputs(const Conv2dProblem& p);
  static Conv2dArgs MakeArgs(const Conv2dProblem& p, const std::vector<void*>& in, const std::vector<void*>& out);
  static int FilterInput(const Conv2dProblem&) { return 1; }
  static Tolerance TolerancePerOutput(const Conv2dProblem& p);
};

template <>
struct OpCaseTraits<GemmProblem> {
  static std::vector<BufferSpec> Inputs(const GemmProblem& p);
  static std::vector<BufferSpec> Outputs(const GemmProblem& p);
  static GemmArgs MakeArgs(const GemmProblem& p, const std::vector<void*>& in, const std::vector<void*>& out);
  static int FilterInput(const GemmProblem&) { return 1; }
  static Tolerance TolerancePerOutput(const GemmProblem& p);
};

#define CONVOY_DECLARE_OP_CASE_TRAITS(Problem, Args)                                                           \
  template <>                                                                                                  \
  struct OpCaseTraits<Problem> {                                                                               \
    static std::vector<BufferSpec> Inputs(const Problem& p);                                                   \
    static std::vector<BufferSpec> Outputs(const Problem& p);                                                  \
    static Args MakeArgs(const Problem& p, const std::vector<void*>& in, const std::vector<void*>& out);       \
    static int FilterInput(const Problem&) { return -1; }                                                      \
    static Tolerance TolerancePerOutput(const Problem& p);                                                     \
  }

CONVOY_DECLARE_OP_CASE_TRAITS(Pool2dProblem, Pool2dArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(BatchNormProblem, BatchNormArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ActivationProblem, ActivationArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(BinaryProblem, BinaryArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ConcatProblem, ConcatArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(SplitProblem, SplitArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ChannelShuffleProblem, ChannelShuffleArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(SoftmaxProblem, SoftmaxArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(PadProblem, PadArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ConvertProblem, ConvertArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(PreprocessProblem, PreprocessArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(TransposeProblem, TransposeArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ResizeProblem, ResizeArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ArgMaxProblem, ArgMaxArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(LayerNormProblem, LayerNormArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(ConvTranspose2dProblem, ConvTranspose2dArgs);
CONVOY_DECLARE_OP_CASE_TRAITS(UnaryProblem, UnaryArgs);

#undef CONVOY_DECLARE_OP_CASE_TRAITS

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_OP_CASE_TRAITS_H_
