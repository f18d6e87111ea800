// Test graphs for the planner and executor tests: small CNNs with random weights that use every op the planner
// maps, built directly in the graph IR (no importer, no passes).
#ifndef CONVOY_SERVER_RUNTIME_PLANNER_TEST_GRAPHS_H_
#define CONVOY_SERVER_RUNTIME_PLANNER_TEST_GRAPHS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"
#include "server/runtime/plan.h"

namespace convoy::runtime::testing {

// How many of the plan's steps run `op`.
int CountSteps(const ExecutionPlan& plan, convoy::OpKind op);

// Uniform values in [lo, hi) from a generator seeded with `seed`.
Tensor RandomTensor(Shape shape, uint32_t seed, float lo = -1.0f, float hi = 1.0f);

// Input "x" [N,3,8,8]; outputs "probs" [N,10] (softmax of the classifier) and "features" [N,8,4,4] (a spatial
// tensor, so NHWC plans must convert it back). On the way: fused conv (bias, relu), batch norm, max pool, 1x1 conv
// with a residual, channel shuffle, split, edge pad, average pool, concat, a squeeze-excitation gate
// (global pool, sigmoid, [N,C,1,1] multiply), a per-channel constant add, global pool, flatten, Gemm with
// transB/alpha/beta, softmax. Weights are random from `seed`.
absl::StatusOr<Graph> EveryOpGraph(uint32_t seed);

// The EfficientNet pattern the blocked plan must keep blocked: input "x" [N,3,12,12] -> 3x3 s2 stem conv to 16
// channels (bias, relu) -> depthwise 3x3 (bias, silu) -> squeeze-excitation (global average pool, 1x1 conv to 4 with
// silu, 1x1 conv to 16 with sigmoid, [N,C,1,1] multiply with the depthwise output) -> 1x1 projection to 8 -> output
// "y" [N,8,6,6].
absl::StatusOr<Graph> SqueezeExcitationGraph(uint32_t seed);

// Input "x" [N,4,6,6] -> `length` 3x3 convs with relu -> output "y": a chain, where buffers must be reused.
absl::StatusOr<Graph> ConvChainGraph(int length, uint32_t seed);

// Input "x" [N,960,2,2] -> 1x1 conv to 320 channels with bias, no activation -> output "y" [N,320,2,2]: MobileNetV2's
// last projection, where oneDNN's brgconv (AVX-512 CPUs, NHWC) packs the filter in another layout at batch 1 than
// from batch 2 on (docs/kernels.md, "brgconv").
absl::StatusOr<Graph> ProjectionGraph(uint32_t seed);

// A QDQ model's graph as the ONNX importer makes it (quantize-dequantize activation nodes, INT8 weights as exactly
// dequantized FP32 constants with their ConstantQuantization records, biases that are INT32 values at input scale x
// weight scale):
//   x [N,16,8,8] -> qdq_x (UINT8) -> conv_a 3x3 16->32 relu (per-channel weights) -> qdq_a (UINT8, zero point 0)
//   -> conv_b 1x1 32->32 (one weight scale) -> qdq_b; add(qdq_b, qdq_a) -> qdq_s
//   -> conv_c depthwise 3x3 clip(0, 6) -> qdq_c (INT8, zero point -128, range ending at 6)
//   -> conv_e 1x1 32->16 -> qdq_e -> output "y2", and conv_d 1x1 16->8 sigmoid -> qdq_d -> output "y".
// conv_a, b, c and e fold into INT8 steps; conv_d (a sigmoid) does not. Without `annotate_conv_a`, conv_a's weights
// carry no quantization record (an FP32 convolution between QDQ nodes), so conv_a stays FP32 too. With `expose_b`,
// qdq_b's output is also the graph output "yb": conv_b's output then has a reader besides the add, so the add cannot
// fuse into conv_b and keeps a step of its own. With `expose_sum`, qdq_a's and qdq_s's outputs are also the graph
// outputs "ya" and "ys" (the add's residual operand and its sum; the fusion is unaffected).
absl::StatusOr<Graph> QuantizedBlockGraph(uint32_t seed, bool annotate_conv_a = true, bool expose_b = false,
                                          bool expose_sum = false);

// A QDQ classifier's tail as the ONNX importer makes it (onnxruntime's quantizer writes the same around torchvision's
// avgpool -> flatten -> fc):
//   x [N,24,5,7] -> qdq_x (UINT8) -> conv 1x1 24->40 relu -> qdq_f (UINT8) -> global average pool "pool" -> qdq_p
//   (UINT8, zero point 3) -> Flatten "flatten" -> qdq_flat (qdq_p's quantization) -> Gemm "fc" 40->12 with bias
//   (per-output-column INT8 weights: B [12,40] with transpose_b, else [40,12] along axis 1) -> qdq_y -> output "y".
// Without `quantized_logits` there is no qdq_y: the Gemm's FP32 output is "y" (a QGemm without y_scale). `height` and
// `width` size the image (a large one gives the pool a reduction that a device's INT8 kernel may decline).
absl::StatusOr<Graph> QuantizedClassifierGraph(uint32_t seed, bool transpose_b = true, bool quantized_logits = true,
                                               int height = 5, int width = 7);

// A QDQ stem as onnxruntime's quantizer writes torchvision ResNet's (conv -> relu -> max pool between QDQ nodes of one
// quantization):
//   x [N,8,11,13] -> qdq_x (UINT8) -> conv 3x3 8->24 relu -> qdq_f (UINT8) -> max pool "pool" 3x3 stride 2 padding 1
//   -> qdq_p (UINT8, qdq_f's quantization, or scale `pool_output_scale` when positive) -> conv_y 1x1 24->16 -> qdq_y
//   -> output "y".
absl::StatusOr<Graph> QuantizedMaxPoolGraph(uint32_t seed, float pool_output_scale = 0.0f);

}  // namespace convoy::runtime::testing

#endif  // CONVOY_SERVER_RUNTIME_PLANNER_TEST_GRAPHS_H_
