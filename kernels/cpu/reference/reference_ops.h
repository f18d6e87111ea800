// Reference implementations of every op in kernels/common/problems.h: the oracle every CPU and CUDA algorithm is
// tested against (kernels/testing/cross_backend_suite.h).
//
// Each function validates the problem first, checks that the pointers the problem needs are non-null, then computes
// the op the plain way: single-threaded, one output element at a time, accumulating in double, reading and writing
// every data type through LoadAsFloat/StoreFromFloat and every layout through TensorDesc strides. They are slow on
// purpose and are NOT registered algorithms: nothing in the runtime should call them.
//
//   CONVOY_RETURN_IF_ERROR(reference::Conv2d(problem, args));
#ifndef CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_OPS_H_
#define CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_OPS_H_

#include "absl/status/status.h"
#include "kernels/common/problems.h"

namespace convoy::reference {

// Conv2d: Y = epilogue(X * W) with the filter in the problem's layout convention (see problems.h); args.w is the
// raw (never packed) filter.
absl::Status Conv2d(const Conv2dProblem& problem, const Conv2dArgs& args);
// QuantizedConv2d: exact INT32 (here INT64) accumulation of (x - src_zero_point) * w, then QuantizedEpilogue's
// requantization in FP32, rounded half to even and saturated: the exact integer oracle of the INT8 algorithms.
absl::Status QuantizedConv2d(const QuantizedConv2dProblem& problem, const QuantizedConv2dArgs& args);
// Gemm: Y[m, n] = epilogue(sum_k A[m, k] * B[n, k]); args.b is the raw [n, k] weight.
absl::Status Gemm(const GemmProblem& problem, const GemmArgs& args);
// Pool2d: max / average (PyTorch divisor rules: count_include_pad counts the window clipped to the padded input) and
// the global modes.
absl::Status Pool2d(const Pool2dProblem& problem, const Pool2dArgs& args);
absl::Status BatchNorm(const BatchNormProblem& problem, const BatchNormArgs& args);
absl::Status Activation(const ActivationProblem& problem, const ActivationArgs& args);
absl::Status Binary(const BinaryProblem& problem, const BinaryArgs& args);
// Concat, Split and ChannelShuffle move elements bit for bit, so they accept every data type.
absl::Status Concat(const ConcatProblem& problem, const ConcatArgs& args);
absl::Status Split(const SplitProblem& problem, const SplitArgs& args);
absl::Status ChannelShuffle(const ChannelShuffleProblem& problem, const ChannelShuffleArgs& args);
// Softmax along the middle axis of [outer, axis, inner], computed stably (max subtracted).
absl::Status Softmax(const SoftmaxProblem& problem, const SoftmaxArgs& args);
// Pad: reflect mirrors without repeating the edge (ONNX "reflect"), edge repeats the border element.
absl::Status Pad(const PadProblem& problem, const PadArgs& args);
absl::Status Convert(const ConvertProblem& problem, const ConvertArgs& args);
absl::Status Preprocess(const PreprocessProblem& problem, const PreprocessArgs& args);
// Transpose: y[i_0, .., i_r-1] = x at input coordinate perm[k] = i_k, bit for bit (every data type).
absl::Status Transpose(const TransposeProblem& problem, const TransposeArgs& args);
// Resize: ONNX Resize over H and W (resize_sampling.h), the weighted sum accumulated in double.
absl::Status Resize(const ResizeProblem& problem, const ResizeArgs& args);
// ArgMax: the index of the largest value along the middle axis (`>`, or `>=` with select_last_index, from index 0).
absl::Status ArgMax(const ArgMaxProblem& problem, const ArgMaxArgs& args);
// LayerNorm: along the middle axis, mean and variance in double (two passes), scale and optional bias.
absl::Status LayerNorm(const LayerNormProblem& problem, const LayerNormArgs& args);
// ConvTranspose2d: the scatter form of the definition (each input element into the outputs its taps reach), double.
absl::Status ConvTranspose2d(const ConvTranspose2dProblem& problem, const ConvTranspose2dArgs& args);
// Unary: unary_function.h's functions from their ONNX definitions, in double.
absl::Status Unary(const UnaryProblem& problem, const UnaryArgs& args);

// Overloads named after the op traits, so templated test code can call reference::Run(problem, args) for any op.
inline absl::Status Run(const Conv2dProblem& p, const Conv2dArgs& a) { return Conv2d(p, a); }
inline absl::Status Run(const GemmProblem& p, const GemmArgs& a) { return Gemm(p, a); }
inline absl::Status Run(const Pool2dProblem& p, const Pool2dArgs& a) { return Pool2d(p, a); }
inline absl::Status Run(const BatchNormProblem& p, const BatchNormArgs& a) { return BatchNorm(p, a); }
inline absl::Status Run(const ActivationProblem& p, const ActivationArgs& a) { return Activation(p, a); }
inline absl::Status Run(const BinaryProblem& p, const BinaryArgs& a) { return Binary(p, a); }
inline absl::Status Run(const ConcatProblem& p, const ConcatArgs& a) { return Concat(p, a); }
inline absl::Status Run(const SplitProblem& p, const SplitArgs& a) { return Split(p, a); }
inline absl::Status Run(const ChannelShuffleProblem& p, const ChannelShuffleArgs& a) { return ChannelShuffle(p, a); }
inline absl::Status Run(const SoftmaxProblem& p, const SoftmaxArgs& a) { return Softmax(p, a); }
inline absl::Status Run(const PadProblem& p, const PadArgs& a) { return Pad(p, a); }
inline absl::Status Run(const ConvertProblem& p, const ConvertArgs& a) { return Convert(p, a); }
inline absl::Status Run(const PreprocessProblem& p, const PreprocessArgs& a) { return Preprocess(p, a); }
inline absl::Status Run(const TransposeProblem& p, const TransposeArgs& a) { return Transpose(p, a); }
inline absl::Status Run(const ResizeProblem& p, const ResizeArgs& a) { return Resize(p, a); }
inline absl::Status Run(const ArgMaxProblem& p, const ArgMaxArgs& a) { return ArgMax(p, a); }
inline absl::Status Run(const LayerNormProblem& p, const LayerNormArgs& a) { return LayerNorm(p, a); }
inline absl::Status Run(const ConvTranspose2dProblem& p, const ConvTranspose2dArgs& a) { return ConvTranspose2d(p, a); }
inline absl::Status Run(const UnaryProblem& p, const UnaryArgs& a) { return Unary(p, a); }
inline absl::Status Run(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& a) { return QuantizedConv2d(p, a); }

}  // namespace convoy::reference

#endif  // CONVOY_KERNELS_CPU_REFERENCE_REFERENCE_OPS_H_
