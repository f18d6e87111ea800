// The shared problem list: for every op, small problems that exercise its corners (odd sizes, C=3 stems, every
// filter size, stride, asymmetric padding, dilation, groups, depthwise, batch 1 and larger, every epilogue and
// activation, FP32/FP16/BF16, NCHW/NHWC, pooling ceil mode and count_include_pad, uneven concat/split, transposes of rank 1..6, ...).
//
// Every backend's algorithms are checked against the reference over these lists (cross_backend_suite.h). They are
// kept small so that running every algorithm, including emulated CUDA kernels (~100x slower than native), takes
// seconds per op. Add a problem here when a bug slips through; every backend then covers it.
#ifndef CONVOY_KERNELS_TESTING_PROBLEM_LIST_H_
#define CONVOY_KERNELS_TESTING_PROBLEM_LIST_H_

#include <vector>

#include "kernels/common/problems.h"

namespace convoy::testing {

std::vector<Conv2dProblem> Conv2dProblems();
std::vector<GemmProblem> GemmProblems();
std::vector<Pool2dProblem> Pool2dProblems();
std::vector<BatchNormProblem> BatchNormProblems();
std::vector<ActivationProblem> ActivationProblems();
std::vector<BinaryProblem> BinaryProblems();
std::vector<ConcatProblem> ConcatProblems();
std::vector<SplitProblem> SplitProblems();
std::vector<ChannelShuffleProblem> ChannelShuffleProblems();
std::vector<SoftmaxProblem> SoftmaxProblems();
std::vector<PadProblem> PadProblems();
std::vector<ConvertProblem> ConvertProblems();
std::vector<PreprocessProblem> PreprocessProblems();
std::vector<TransposeProblem> TransposeProblems();
std::vector<ResizeProblem> ResizeProblems();
std::vector<ArgMaxProblem> ArgMaxProblems();
std::vector<LayerNormProblem> LayerNormProblems();
std::vector<ConvTranspose2dProblem> ConvTranspose2dProblems();
std::vector<UnaryProblem> UnaryProblems();

// The blocked NCHW8c layout, which only CPU algorithms take (oneDNN's and the binary kernel; so these lists are
// separate from the shared ones every backend runs): each shared NCHW problem whose channel counts are multiples of
// 8, re-laid as NCHW8c, at its own batch and at batch 3 (blocks interleave channels, so a batch-stride bug shows only
// with n > 1). Conv2d needs only its output channels to be multiples of 8 (the input of a 3-channel stem lies NCHW)
// and adds a MobileNetV2-style stem; binary takes every shared op and broadcast with 16 channels; convert, the
// reorders into and out of NCHW8c from NCHW and NHWC and the type-only conversions of a blocked tensor, between every
// pair of FP32, FP16 and BF16.
std::vector<Conv2dProblem> Conv2dProblemsInBlockedLayout();
std::vector<Pool2dProblem> Pool2dProblemsInBlockedLayout();
std::vector<BinaryProblem> BinaryProblemsInBlockedLayout();
std::vector<ConvertProblem> ConvertProblemsInBlockedLayout();

// Every activation kind with representative parameters (clip as relu6, leaky slope 0.1, ONNX hard sigmoid).
std::vector<Activation> AllActivations();

// The list for an op chosen by its problem type: ProblemsFor<Conv2dProblem>() == Conv2dProblems().
template <typename Problem>
std::vector<Problem> ProblemsFor();

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_PROBLEM_LIST_H_
