// `precision: int8` for FP32 models: the graph rewrite that turns an optimized FP32 graph and its calibration table
// (calibration.h) into the graph a QDQ file would have imported to, so the existing INT8 folding
// (quantized_conv_folding.h) and planner make the INT8 steps. `convoy calibrate` uses the first two functions to
// decide what to measure; ModelRuntime calls QuantizeWithCalibrationTable at load.
//
// What the rewrite does, in order:
// 1. SeparateResidualAdds: a residual add fused into a convolution (MobileNet / EfficientNet projections:
//    conv + x with no activation, or act(conv) + x; ResNet's relu(conv + x) as conv, Add, ReLU) becomes its own Add
//    node again, as in a QDQ file where the quantization sits between the two. Where a ReLU follows the add and the
//    table quantizes the ReLU's output to UINT8 with zero point 0, the ReLU goes and the add writes that tensor: the
//    quantization's saturation at 0 is the ReLU (it comes back if nothing next to the add runs INT8).
// 2. For each convolution the table marks int8 whose input and output tensors it quantizes: its weights become
//    exactly float(q) * scale[k] with q = saturate(round(w / scale[k])) in INT8, per output channel, with the
//    ConstantQuantization record a QDQ import leaves. The same for each residual add with both operands and its sum
//    in the table, for a classifier's global average pool with its input and output, and for its Gemm with its input
//    (the Gemm writes FP32 logits, as onnxruntime's QGemm without an output scale; a Flatten between pool and Gemm
//    reads and writes the same values, so the table gives both its tensors the same quantization and it stays 8-bit).
// 3. A quantize-dequantize node (ActivationKind::kQuantizeDequantize{U8,S8}, the table's scale and zero point)
//    after every tensor those layers read or write; every reader of the tensor reads it (graph outputs keep the FP32
//    value).
// 4. The fold analysis runs; quantize-dequantize nodes next to no folded layer are removed again and the weights of
//    convolutions that did not fold are restored, so a layer that cannot run INT8 costs no accuracy: it stays FP32,
//    converts at its edges, and the outcome says why.
#ifndef CONVOY_SERVER_RUNTIME_CALIBRATED_QUANTIZATION_H_
#define CONVOY_SERVER_RUNTIME_CALIBRATED_QUANTIZATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/runtime/calibration.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {

// Step 1 above; returns how many adds it separated. The convolution `C` then writes `C/conv_output` and the Add
// `C/residual_add` writes what `C` wrote before (for relu(conv + x): `C/residual_sum`, which the ReLU
// `C/residual_relu` reads).
absl::StatusOr<int> SeparateResidualAdds(Graph& graph);

// What calibration measures on a graph whose residual adds are separated.
struct CalibrationTargets {
  std::vector<std::string> tensors;  // inputs and outputs of the layers below, in graph order, each once
  std::vector<LayerCalibration> layers;  // every Conv2d, residual Add, global average pool and Gemm in graph order;
                                         // weight_scales empty; int8 false with a reason where the INT8 kernels
                                         // cannot run it
};
CalibrationTargets FindCalibrationTargets(const Graph& graph);

// Per-output-channel INT8 scales of a convolution's or Gemm's constant weights, max |w[k]| / 127 (1 for a channel of
// zeros): a convolution's [K, C/groups, R, S] along K, a Gemm's B [K, C] (transpose_b) or [C, K] along K.
std::vector<float> LayerWeightScales(const Graph& graph, const Node& layer);

// The INT8 kernels add a convolution's (or Gemm's) bias as an INT32 at input scale x weight scale[k]; a channel whose weights are
// all near zero (a pruned or dead channel) gets a weight scale so small that its bias would not fit. This raises
// those scales to |bias[k]| / (kLargestBiasSteps x input_scale) (as onnxruntime's quantizer does; the channel's weights
// then round to fewer steps, or zero) and returns how many it raised. `convoy calibrate` writes the raised scales;
// the load applies it again to any table.
inline constexpr double kLargestBiasSteps = 1 << 30;  // 2^30: INT32 with headroom for the accumulation
int FitBiasInInt32(const Graph& graph, const Node& conv, float input_scale, std::vector<float>& weight_scales);

// Whether the graph already has quantize-dequantize nodes (a QDQ file): `precision: int8` then uses its scales.
bool HasQuantizeDequantize(const Graph& graph);

// One layer after the rewrite.
struct LayerOutcome {
  std::string node;
  CalibratedLayerKind kind = CalibratedLayerKind::kConv;
  bool int8 = false;
  std::string detail;  // INT8: its scales; FP32: why
};

// Steps 1 to 4 above on an optimized FP32 graph. `source` names the table in errors: a table entry naming no tensor
// or layer of the graph, a convolution whose weight scales do not match its output channels, or weights beyond what
// the scales can hold (a table made for other weights) fail with the entry named.
absl::StatusOr<std::vector<LayerOutcome>> QuantizeWithCalibrationTable(Graph& graph, const CalibrationTable& table,
                                                                       const std::string& source);

// The layers of a graph with quantize-dequantize nodes as the INT8 folding sees them (QDQ files, and graphs after
// QuantizeWithCalibrationTable): folded layers with their scales, the others with their reason.
std::vector<LayerOutcome> DescribeQuantizedLayers(const Graph& graph);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_CALIBRATED_QUANTIZATION_H_
