#include "server/repository/onnx_quantization.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"

namespace convoy::repository {
namespace {

using T = onnx::TensorProto;

std::string TypeName(int32_t type) { return T::DataType_Name(static_cast<T::DataType>(type)); }

// The saturation range of a quantized type, or an error naming the node and the type.
absl::Status SetRange(QuantizationParams& p, bool dequantize, const std::string& label) {
  switch (p.type) {
    case T::UINT8: p.qmin = 0, p.qmax = 255; return absl::OkStatus();
    case T::INT8: p.qmin = -128, p.qmax = 127; return absl::OkStatus();
    case T::INT32:
      if (dequantize) {
        p.qmin = INT32_MIN, p.qmax = INT32_MAX;
        return absl::OkStatus();
      }
      break;
    default: break;
  }
  return absl::UnimplementedError(absl::StrCat(label, ": quantized type ", TypeName(p.type),
                                               " is not supported (UINT8 and INT8",
                                               dequantize ? ", INT32 for DequantizeLinear)" : ")"));
}

// Index along `axis` of flat element `i` of a row-major tensor of `shape`.
int64_t AxisIndex(int64_t i, const runtime::Shape& shape, int64_t axis) {
  int64_t inner = 1;
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  return (i / inner) % shape[axis];
}

}  // namespace

std::string QuantizationParams::Describe() const {
  if (per_tensor()) {
    return absl::StrCat(TypeName(type), " per-tensor scale ", scales[0], " zero point ", zero_points[0]);
  }
  return absl::StrCat(TypeName(type), " per-axis (axis ", axis, ", ", scales.size(), " scales)");
}

absl::StatusOr<QuantizationParams> ReadQuantizationParams(const onnx::NodeProto& node, const OnnxAttributes& attrs,
                                                          int64_t opset, const runtime::Shape& x_shape,
                                                          int32_t data_type, const KnownValue* scale,
                                                          const KnownValue* zero_point) {
  const bool dequantize = node.op_type() == "DequantizeLinear";
  const std::string& label = attrs.label();
  if (opset < 10) return absl::UnimplementedError(absl::StrCat(label, ": needs opset 10 or later, got ", opset));
  CONVOY_RETURN_IF_ERROR(attrs.CheckKnown({"axis", "saturate", "block_size", "output_dtype"}));
  CONVOY_ASSIGN_OR_RETURN(int64_t block_size, attrs.Int("block_size", 0));
  if (block_size != 0) {
    return absl::UnimplementedError(absl::StrCat(label, ": blocked quantization (block_size ", block_size,
                                                 ") is not supported"));
  }
  if (!scale) return absl::UnimplementedError(absl::StrCat(label, ": the scale (input 1) must be a constant"));
  if (node.input_size() > 2 && !node.input(2).empty() && !zero_point) {
    return absl::UnimplementedError(absl::StrCat(label, ": the zero point (input 2, '", node.input(2),
                                                 "') must be a constant"));
  }
  if (scale->is_int()) return attrs.Error(absl::StrCat("the scale must be floating point, got ", scale->Describe()));
  if (zero_point && !zero_point->is_int()) {
    return absl::UnimplementedError(absl::StrCat(label, ": zero point of type ", zero_point->Describe(),
                                                 " (float8) is not supported"));
  }
  QuantizationParams p;
  CONVOY_ASSIGN_OR_RETURN(int64_t output_dtype, attrs.Int("output_dtype", 0));
  p.type = zero_point             ? zero_point->type
           : data_type != 0      ? data_type
           : output_dtype != 0   ? static_cast<int32_t>(output_dtype)
                                 : static_cast<int32_t>(T::UINT8);
  if (data_type != 0 && data_type != p.type) {
    return attrs.Error(absl::StrCat("the data is ", TypeName(data_type), " but the zero point is ", TypeName(p.type)));
  }
  if (output_dtype != 0 && output_dtype != p.type) {
    return attrs.Error(absl::StrCat("output_dtype ", TypeName(static_cast<int32_t>(output_dtype)),
                                    " differs from the zero point's type ", TypeName(p.type)));
  }
  CONVOY_RETURN_IF_ERROR(SetRange(p, dequantize, label));

  const int64_t count = scale->size();
  if (zero_point && zero_point->shape != scale->shape) {
    return attrs.Error(absl::StrCat("zero point ", zero_point->Describe(), " and scale ", scale->Describe(),
                                    " differ in shape"));
  }
  const bool scalar_like = scale->shape.empty() || (scale->shape.size() == 1 && count == 1);
  if (!scalar_like) {
    if (scale->shape.size() != 1) {
      return attrs.Error(absl::StrCat("the scale must be a scalar or 1-D, got ", scale->Describe()));
    }
    if (opset < 13) {
      return attrs.Error(absl::StrCat("per-axis scales (", scale->Describe(), ") need opset 13, the model has ", opset));
    }
    CONVOY_ASSIGN_OR_RETURN(int64_t axis, attrs.Int("axis", 1));
    const int64_t rank = static_cast<int64_t>(x_shape.size());
    if (axis < -rank || axis >= rank) {
      return attrs.Error(absl::StrCat("axis ", axis, " is out of range for data ", runtime::ShapeToString(x_shape)));
    }
    p.axis = axis < 0 ? axis + rank : axis;
    if (x_shape[p.axis] != count) {
      return attrs.Error(absl::StrCat("per-axis scale ", scale->Describe(), " does not match dimension ", p.axis,
                                      " (", x_shape[p.axis], ") of the data ", runtime::ShapeToString(x_shape)));
    }
  }
  p.scales = scale->floats;
  p.zero_points = zero_point ? zero_point->ints : std::vector<int64_t>(count, 0);
  for (int64_t i = 0; i < count; ++i) {
    if (!(p.scales[i] > 0.0f) || !std::isfinite(p.scales[i])) {
      return attrs.Error(absl::StrCat("scale ", i, " is ", p.scales[i], "; scales must be positive and finite"));
    }
    if (p.zero_points[i] < p.qmin || p.zero_points[i] > p.qmax) {
      return attrs.Error(absl::StrCat("zero point ", i, " is ", p.zero_points[i], ", outside ", TypeName(p.type)));
    }
  }
  if (p.type == T::INT32 && std::any_of(p.zero_points.begin(), p.zero_points.end(), [](int64_t z) { return z; })) {
    return absl::UnimplementedError(absl::StrCat(label, ": INT32 data with a nonzero zero point is not supported"));
  }
  return p;
}

absl::StatusOr<KnownValue> DequantizeConstant(const QuantizationParams& p, const KnownValue& q,
                                              const std::string& label) {
  if (q.type != p.type) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": data ", q.Describe(), " is not of the quantized type ",
                                                   TypeName(p.type)));
  }
  std::vector<float> out(q.ints.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const int64_t c = p.per_tensor() ? 0 : AxisIndex(static_cast<int64_t>(i), q.shape, p.axis);
    // ONNX and onnxruntime: the difference converted to float, then one FP32 product.
    out[i] = static_cast<float>(q.ints[i] - p.zero_points[c]) * p.scales[c];
  }
  return KnownValue::Float(q.shape, std::move(out));
}

absl::StatusOr<KnownValue> QuantizeConstant(const QuantizationParams& p, const KnownValue& x,
                                            const std::string& label) {
  if (x.is_int()) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": data ", x.Describe(), " must be floating point"));
  }
  KnownValue out;
  out.type = p.type;
  out.shape = x.shape;
  out.ints.resize(x.floats.size());
  for (size_t i = 0; i < x.floats.size(); ++i) {
    const int64_t c = p.per_tensor() ? 0 : AxisIndex(static_cast<int64_t>(i), x.shape, p.axis);
    const float quotient = x.floats[i] / p.scales[c];
    const double q = std::nearbyint(static_cast<double>(quotient)) + static_cast<double>(p.zero_points[c]);
    out.ints[i] = std::isnan(quotient) ? p.qmin : static_cast<int64_t>(std::clamp<double>(q, p.qmin, p.qmax));
  }
  return out;
}

absl::StatusOr<runtime::Activation> QuantizeDequantizeActivation(const QuantizationParams& quantize,
                                                                 const QuantizationParams& dequantize,
                                                                 const std::string& label) {
  if (!quantize.per_tensor() || !dequantize.per_tensor()) {
    return absl::UnimplementedError(absl::StrCat(
        label, ": per-axis quantization of a tensor computed at run time is not supported (QuantizeLinear: ",
        quantize.Describe(), ", DequantizeLinear: ", dequantize.Describe(), ")"));
  }
  if (quantize.type != dequantize.type || quantize.scales[0] != dequantize.scales[0] ||
      quantize.zero_points[0] != dequantize.zero_points[0]) {
    return absl::UnimplementedError(absl::StrCat(label, ": the QuantizeLinear before it (", quantize.Describe(),
                                                 ") and this node (", dequantize.Describe(),
                                                 ") differ; Convoy folds only matching pairs"));
  }
  runtime::Activation a;
  a.kind = quantize.type == T::UINT8 ? runtime::ActivationKind::kQuantizeDequantizeU8
                                     : runtime::ActivationKind::kQuantizeDequantizeS8;
  a.alpha = quantize.scales[0];
  a.beta = static_cast<float>(quantize.zero_points[0]);
  return a;
}

}  // namespace convoy::repository
