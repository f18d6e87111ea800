// The INT8 mappings of QDQ models (quantized_conv_folding.h): a folded convolution (or global average pool, or Gemm)
// becomes one QuantizedConv2dOp step on 8-bit NHWC tensors, a folded residual add one QuantizedAddOp step, an 8-bit
// view (a Flatten between them) no step, a folded max pool a Pool2dOp step on the 8-bit values, and each quantize-dequantize node between such steps and FP32 ops becomes
// the Convert steps the edge needs (or none, between two INT8 steps).
#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "server/runtime/planner_internal.h"

namespace convoy::runtime {

absl::Status PlanQuantizedConv2d(PlanBuilder& b, const Node& node, const QuantizedConvFold& fold) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.QuantizedValue(fold.input));
  // The filter as NHWC problems store it: [K, C/g, R, S] -> [K, R, S, C/g]; the algorithm packs it at plan time.
  const int64_t k = fold.weight_shape[0], cg = fold.weight_shape[1], r = fold.weight_shape[2],
                s = fold.weight_shape[3];
  std::vector<int8_t> filter(fold.weights.size());
  for (int64_t o = 0; o < k; ++o)
    for (int64_t i = 0; i < cg; ++i)
      for (int64_t y = 0; y < r; ++y)
        for (int64_t z = 0; z < s; ++z) filter[((o * r + y) * s + z) * cg + i] = fold.weights[((o * cg + i) * r + y) * s + z];
  CONVOY_ASSIGN_OR_RETURN(const void* w, b.UploadBytes(filter.data(), filter.size()));
  const void* bias = nullptr;
  if (!fold.bias.empty()) {
    CONVOY_ASSIGN_OR_RETURN(bias, b.UploadBytes(fold.bias.data(), fold.bias.size() * sizeof(int32_t)));
  }
  // A fused add: the step reads its other operand and writes its output (the add's QDQ value).
  const QuantizedAddFold* add =
      fold.fused_add == QuantizedFusedAdd::kNone ? nullptr : b.quantized().FindAdd(fold.add);
  int residual = -1;
  if (add != nullptr) {
    CONVOY_ASSIGN_OR_RETURN(residual, b.QuantizedValue(fold.residual));
  }
  CONVOY_ASSIGN_OR_RETURN(int y, add != nullptr ? b.AddQuantizedOutput(add->output, add->quantization.y_type)
                                  : fold.dst_type == DataType::kFloat32
                                      ? b.AddOutput(fold.output, DataType::kFloat32, Layout::kNCHW)  // [N, K]
                                      : b.AddQuantizedOutput(fold.output, fold.dst_type));
  auto problem_for = [&b, &fold, x, add](int batch) {
    const ImageDims d = b.Dims(x, batch);
    return MakeQuantizedConvProblem(fold, d.n, d.c, d.h, d.w, add);
  };
  // The multipliers travel in the problem (MakeQuantizedConvProblem), not in the arguments.
  auto bind = [x, w, bias, residual, y](TensorPointers t) {
    return QuantizedConv2dArgs{t[x], static_cast<const int8_t*>(w), static_cast<const int32_t*>(bias), nullptr,
                               residual >= 0 ? t[residual] : nullptr, t[y]};
  };
  std::vector<int> inputs = {x};
  if (residual >= 0) inputs.push_back(residual);
  CONVOY_RETURN_IF_ERROR(b.AddKernelStep<QuantizedConv2dOp>(node.name, inputs, {y}, problem_for, bind, w));
  if (add != nullptr) b.PlaceOutputOverResidual(node, fold.residual, x, residual, y, add->add);
  return absl::OkStatus();
}

absl::Status PlanQuantizedAdd(PlanBuilder& b, const Node& node, const QuantizedAddFold& fold) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.QuantizedValue(fold.a));
  CONVOY_ASSIGN_OR_RETURN(int z, b.QuantizedValue(fold.b));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddQuantizedOutput(fold.output, fold.quantization.y_type));
  auto problem_for = [&b, &fold, y](int batch) {
    QuantizedAddProblem p = fold.quantization;
    p.count = NumElements(b.tensor(y).shape, batch);
    return p;
  };
  auto bind = [x, z, y](TensorPointers t) { return QuantizedAddArgs{t[x], t[z], t[y]}; };
  return b.AddKernelStep<QuantizedAddOp>(node.name, {x, z}, {y}, problem_for, bind);
}

absl::Status PlanQuantizedView(PlanBuilder& b, const QuantizedViewFold& view) {
  return b.AliasQuantizedValue(view.output, view.input);
}

// A folded max pool: the pool on the 8-bit NHWC values, writing its output QDQ node's 8-bit value.
absl::Status PlanQuantizedMaxPool(PlanBuilder& b, const Node& node, const QuantizedMaxPoolFold& fold) {
  CONVOY_ASSIGN_OR_RETURN(int x, b.QuantizedValue(fold.input));
  CONVOY_ASSIGN_OR_RETURN(int y, b.AddQuantizedOutput(fold.output, fold.type));
  auto problem_for = [&b, &fold, x](int batch) {
    return Pool2dProblemFor(fold.attrs, b.Dims(x, batch), fold.type, Layout::kNHWC);
  };
  auto bind = [x, y](TensorPointers t) { return Pool2dArgs{t[x], t[y]}; };
  return b.AddKernelStep<Pool2dOp>(node.name, {x}, {y}, problem_for, bind);
}

// A quantize-dequantize node in a plan with INT8 steps. Its output has up to two values: 8-bit (written by the folded
// conv it follows, or quantized here from its FP32 input for the folded convs reading it) and FP32 (for every other
// reader and the caller: the simulated step, or a dequantize of the 8-bit value; both are exactly
// (Q(x) - zero_point) * scale).
absl::Status PlanQuantizeDequantize(PlanBuilder& b, const Node& node) {
  if (b.quantized().FusedAway(node.name)) return absl::OkStatus();  // between a conv and the add fused into it
  const Activation& a = node.As<ActivationAttrs>().activation;
  if (a.kind != ActivationKind::kQuantizeDequantizeU8 && a.kind != ActivationKind::kQuantizeDequantizeS8) {
    return PlanActivation(b, node);
  }
  const Graph& graph = b.graph();
  const std::string& out = node.outputs[0];
  bool int8_readers = false, fp32_readers = graph.IsGraphOutput(out);
  for (int reader : graph.ConsumerIndices(out)) {
    if (b.quantized().ReadsQuantized(graph.nodes()[reader].name, out)) {
      int8_readers = true;
    } else {
      fp32_readers = true;
    }
  }
  const DataType dtype = a.kind == ActivationKind::kQuantizeDequantizeU8 ? DataType::kUInt8 : DataType::kInt8;
  const float scale = a.alpha;
  const int zero_point = static_cast<int>(a.beta);
  if (b.HasQuantizedValue(out)) {  // a folded conv wrote it
    return fp32_readers ? b.Dequantize(out, scale, zero_point) : absl::OkStatus();
  }
  if (fp32_readers || !int8_readers) CONVOY_RETURN_IF_ERROR(PlanActivation(b, node));
  if (int8_readers) return b.Quantize(node.inputs[0], out, dtype, scale, zero_point);
  return absl::OkStatus();
}

}  // namespace convoy::runtime
