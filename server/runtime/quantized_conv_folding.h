// Which convolutions of a QDQ model run in INT8, decided on the optimized graph before planning (the planner,
// planner.cc, calls AnalyzeQuantizedConvs and maps each fold onto a QuantizedConv2dOp step).
//
// The ONNX importer (server/repository/onnx_quantization.h) turns a QDQ model into an FP32 graph: each
// QuantizeLinear -> DequantizeLinear pair on an activation becomes a quantize-dequantize Activation node
// (kQuantizeDequantize{U8,S8}, "QDQ node" below), and each DequantizeLinear of INT8 weights an FP32 constant with
// its ConstantQuantization record (graph.h). A convolution folds when the graph reads
//
//   [QDQ node] -> Conv2d -> [QDQ node, the conv output's only reader]
//
// with symmetric INT8 weights (one scale, or one per output channel) that still dequantize exactly, any FP32 bias
// (requantized to INT32 at input scale x weight scale, which recovers an ONNX INT32 bias exactly), and no activation,
// a ReLU, or a Clip that the output's saturation turns into a ReLU or nothing (ReLU6 before a UINT8 output whose
// range ends at 6). The folded step reads its input QDQ node's output as 8-bit integers and writes its output QDQ
// node's output as 8-bit integers, computing what onnxruntime's QLinearConv computes:
//
//   acc = sum (x_q - x_zero_point) * w_q                  exact INT32
//   y_q = saturate(round_half_even(float(acc + bias_q) * (x_scale * w_scale[k] / y_scale)) + y_zero_point)
//
// A residual Add folds the same way when both its operands are QDQ nodes' outputs of its own shape and a QDQ node
// alone reads its sum: the INT8 step (QuantizedAddOp) computes DequantizeLinear, DequantizeLinear, Add,
// QuantizeLinear on each element as onnxruntime's x86 QLinearAdd does (kernels/cpu/quantized_add.h; the FP32 path's
// result up to the last bit), and keeps the block's tensors 8-bit.
//
// A folded residual add can in turn fuse into the folded convolution producing one of its operands (the conv's
// output QDQ node then has the add as its only reader, and the other operand, the residual, is computed before the
// conv in the graph's order): one step computes the conv, its own rounding and saturation, and the add's formula, bit
// for bit what the two steps compute (QuantizedConv2dProblem::fused_add), where the algorithm can reproduce that
// (CanImplement: oneDNN's post-ops evaluate the add's FMAs in the add's own order only with the conv as its second
// operand, and in the other order the planner keeps the fusion only when both orders round every pair of 8-bit
// operands alike). The analysis proposes each such fusion; the planner keeps those an algorithm implements.
//
// The classifier's tail folds onto the same INT8 convolution step (QuantizedFoldSource): a global average pool between
// QDQ nodes is a depthwise convolution with unit weights over the whole H x W image and one multiplier
// x_scale / (y_scale * float(H * W)), which is onnxruntime's QLinearGlobalAveragePool (sum - x_zero_point * H * W,
// times that FP32 scale, rounded half to even, plus y_zero_point); a Gemm on [N, C] (alpha 1, beta 1, A not
// transposed, symmetric INT8 B either way round with one scale or one per output column) is a 1x1 convolution on the
// [N, C, 1, 1] image, which is onnxruntime's QGemm (INT32 accumulation with the INT32 bias, then QLinearConv's
// requantization; a Gemm whose output no QDQ node reads writes FP32, float(acc + bias) * x_scale * w_scale[k], as
// QGemm without y_scale does). A Flatten / Reshape from [N, C, 1, 1] to [N, C] between QDQ nodes of one quantization keeps the
// 8-bit bytes (QuantizedViewFold), so the pool -> Flatten -> Gemm tail stays 8-bit to the logits.
//
// A max pool between two QDQ nodes of one quantization (ResNet's stem pool) runs on the 8-bit values
// (QuantizedMaxPoolFold): dequantization is increasing (its scale is positive), so the largest dequantized value is
// the dequantized largest integer, and the output QDQ node's QuantizeLinear gives that integer back; the step is a
// max pool on UINT8 / INT8 NHWC tensors, exact, with no quantize and dequantize around it.
//
// The planner quantizes where a folded step's input comes from an FP32 op, and dequantizes where an FP32 op (or the
// caller) reads a folded step's output. Every other convolution next to a QDQ node stays on the FP32 path with the
// quantization simulated by the QDQ nodes, and the analysis says why (a residual fused into it, weights that are
// not INT8, a Sigmoid, ...): `convoy inspect` and the load log print it.
#ifndef CONVOY_SERVER_RUNTIME_QUANTIZED_CONV_FOLDING_H_
#define CONVOY_SERVER_RUNTIME_QUANTIZED_CONV_FOLDING_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernels/common/dtype.h"
#include "kernels/common/problems.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {

// The graph op a QuantizedConvFold runs as an INT8 convolution.
enum class QuantizedFoldSource {
  kConv,               // a Conv2d
  kGlobalAveragePool,  // a global average pool: a depthwise convolution with unit weights over the whole image
  kGemm,               // a Gemm / MatMul on [N, C] with constant weights: a 1x1 convolution on an [N, C, 1, 1] image
};
const char* QuantizedFoldSourceName(QuantizedFoldSource source);

// One convolution that runs in INT8 and everything its step needs.
struct QuantizedConvFold {
  std::string conv;         // the node (a Conv2d, or the pool or Gemm `source` says)
  QuantizedFoldSource source = QuantizedFoldSource::kConv;
  Window2d window;          // the convolution's geometry (the Conv2d's own, or the pool's or Gemm's as a convolution)
  int64_t groups = 1;
  std::string input;        // its input, the output of the input QDQ node: read as src_type
  std::string output_node;  // the QDQ node reading the conv's output (empty: a Gemm with an FP32 output)
  std::string output;       // that node's output: written as dst_type (the Gemm's own output when FP32)
  DataType src_type = DataType::kUInt8, dst_type = DataType::kUInt8;
  float src_scale = 1.0f, dst_scale = 1.0f;
  int src_zero_point = 0, dst_zero_point = 0;
  bool relu = false;
  Shape weight_shape;                // [K, C/groups, R, S]
  std::vector<int8_t> weights;       // in weight_shape's row-major order
  std::vector<int32_t> bias;         // [K], empty without a bias
  std::vector<float> multipliers;    // [K]: x_scale * w_scale[k] / y_scale, in FP32 as onnxruntime forms it
  std::vector<float> weight_scales;  // [K]: w_scale[k]
  // The residual add fused after it (QuantizedConvAnalysis::adds holds its fold), or kNone.
  QuantizedFusedAdd fused_add = QuantizedFusedAdd::kNone;
  std::string add;       // that Add node
  std::string residual;  // the add's other operand, a QDQ node's output read 8-bit
  // The fused add computed with one rounding (PlannerOptions::int8_single_rounding_adds, set by the planner where
  // SingleRoundingAddApplies): the conv's own output is not rounded to 8 bits before the add (see
  // MakeQuantizedConvProblem).
  bool add_single_rounding = false;
};

// One residual Add that runs in INT8: the kernel problem's quantization, and the graph tensors it reads and writes.
struct QuantizedAddFold {
  std::string add;          // the Binary (Add) node
  std::string a, b;         // its operands, QDQ nodes' outputs, read 8-bit
  std::string output_node;  // the QDQ node reading its sum
  std::string output;       // that node's output: written 8-bit
  QuantizedAddProblem quantization;  // every field but count
  std::string fused_into;            // the conv computing it (QuantizedConvFold::fused_add), or empty: its own step
};

// A Flatten or Reshape between two QDQ nodes of the same quantization that only drops the unit spatial dimensions of
// an [N, C, 1, 1] image ([N, C]): the 8-bit bytes are the same in NHWC and row-major order, so its output QDQ node's
// 8-bit value is its input's (QuantizeLinear(DequantizeLinear(q)) is q with one scale and zero point), and the step
// disappears. The tail of a classifier (pool -> Flatten -> Gemm) keeps its tensors 8-bit this way.
struct QuantizedViewFold {
  std::string node;         // the Flatten / Reshape
  std::string input;        // its input, a QDQ node's output, read 8-bit
  std::string output_node;  // the QDQ node reading its output
  std::string output;       // that node's output: the same 8-bit bytes
};

// A max pool (windowed or global) between two QDQ nodes of the same quantization: it runs on the 8-bit values.
struct QuantizedMaxPoolFold {
  std::string node;         // the Pool2d
  std::string input;        // its input, a QDQ node's output, read 8-bit
  std::string output_node;  // the QDQ node reading its output alone
  std::string output;       // that node's output: written 8-bit
  DataType type = DataType::kUInt8;
  Pool2dAttrs attrs;        // the pool's window
};

struct QuantizedConvAnalysis {
  std::map<std::string, QuantizedConvFold> folds;   // by conv (or pool, Gemm) node name
  std::map<std::string, QuantizedAddFold> adds;     // by add node name
  std::map<std::string, QuantizedViewFold> views;   // by Flatten / Reshape node name
  std::map<std::string, QuantizedMaxPoolFold> max_pools;  // by pool node name
  std::map<std::string, std::string> fp32_reasons;  // conv or add node name -> why it stays FP32 (QDQ neighbours only)

  const QuantizedConvFold* Find(const std::string& conv) const {
    auto it = folds.find(conv);
    return it == folds.end() ? nullptr : &it->second;
  }
  const QuantizedAddFold* FindAdd(const std::string& add) const {
    auto it = adds.find(add);
    return it == adds.end() ? nullptr : &it->second;
  }
  const QuantizedViewFold* FindView(const std::string& node) const {
    auto it = views.find(node);
    return it == views.end() ? nullptr : &it->second;
  }
  const QuantizedMaxPoolFold* FindMaxPool(const std::string& node) const {
    auto it = max_pools.find(node);
    return it == max_pools.end() ? nullptr : &it->second;
  }
  // Whether node `reader` runs as an INT8 step that reads graph tensor `tensor` as 8-bit.
  bool ReadsQuantized(const std::string& reader, const std::string& tensor) const;
  // Whether node `name` has no step of its own: an add fused into a conv, or the QDQ node between them (its 8-bit
  // value is never formed).
  bool FusedAway(const std::string& name) const;
  // Undoes the fusion proposed for `conv` (the add keeps its own step).
  void Unfuse(const std::string& conv);
};

// Every Conv2d and Add next to a QDQ node (reading one's output or read by one) of a finalized graph, folded or with
// the reason it is not. Nodes with no QDQ node next to them (FP32 models) appear in no map.
QuantizedConvAnalysis AnalyzeQuantizedConvs(const Graph& graph);

// The kernel problem of a fold at one input size (n, c, h, w of the input, NHWC; an [N, C] input is [N, C, 1, 1]),
// the multipliers fixed in it, and its fused add (`add`, the fold's, when fold.fused_add is set): exact
// (QuantizedConv2dProblem::fused_add, the two steps' result bit for bit) or, with fold.add_single_rounding, as the
// residual epilogue with one rounding at the end,
//
//   y_q = saturate(round_half_even(float(acc + bias_q) * (x_scale * w_scale[k] / y_scale)
//                                  + (r_scale / y_scale) * float(r_q - r_zero_point)) + y_zero_point)
//
// (QuantizedEpilogue's residual kBeforeActivation), which skips the conv's own rounding and saturation to 8 bits: the
// dequantized sum differs from the exact chain's by at most half a step of the conv's output scale before the final
// rounding (more where the conv's own output saturated), so y_q differs by at most one step in most elements.
QuantizedConv2dProblem MakeQuantizedConvProblem(const QuantizedConvFold& fold, int n, int c, int h, int w,
                                                const QuantizedAddFold* add = nullptr);

// Whether `fold`'s fused add (`add`) can run with one rounding: a convolution without a ReLU of its own (the
// epilogue's ReLU comes after the residual) whose residual operand has the sum's 8-bit type.
bool SingleRoundingAddApplies(const QuantizedConvFold& fold, const QuantizedAddFold& add);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_QUANTIZED_CONV_FOLDING_H_
