// ONNX QuantizeLinear / DequantizeLinear (opsets 10 to 21) for the ONNX importer: the QDQ form that onnxruntime's
// quantize_static, TensorRT's and OpenVINO's tools write (a Q -> DQ pair on every quantized activation, DQ on int8
// weights with per-channel scales, DQ on int32 biases).
//
// The importer (onnx_importer.cc) handles the two ops through this file:
// - DQ (or Q) of a constant is evaluated at load time: int8 weights and int32 biases become FP32 constants, exactly
//   (q - zero_point) * scale as ONNX defines it, per tensor or per slice along `axis`;
// - Q of a tensor computed at run time is remembered, not emitted; the DQ reading it becomes one runtime activation,
//   ActivationKind::kQuantizeDequantize{U8,S8}, which rounds and saturates the value the way the pair does. Every
//   other reader of the quantized tensor is refused, naming the tensor and its producer.
// So a QDQ model runs in floating point with its quantization simulated exactly at every Q -> DQ pair.
//
// Supported: UINT8 and INT8 zero points and data (INT32 data with a zero or absent zero point for DQ, the bias form);
// FLOAT (or FLOAT16/BFLOAT16) scales; per-tensor scales everywhere, per-axis scales on constants. Refused with the
// node named: other integer and float8 types, blocked quantization (opset 21 `block_size`), per-axis quantization
// of a runtime tensor, and a Q -> DQ pair whose two nodes disagree on scale, zero point or type.
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_QUANTIZATION_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_QUANTIZATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "server/repository/onnx_proto_reader.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

// The scales and zero points of one QuantizeLinear or DequantizeLinear node, checked against its data's shape.
struct QuantizationParams {
  int32_t type = onnx::TensorProto::UINT8;  // the quantized element type (UINT8, INT8, or INT32 for a DQ)
  int64_t axis = -1;                        // the quantized axis of a per-axis node, -1 per tensor
  std::vector<float> scales;                // one, or one per slice along axis
  std::vector<int64_t> zero_points;         // as many as scales (zeros when the node has none)
  int64_t qmin = 0, qmax = 255;             // the saturation range of `type`

  bool per_tensor() const { return axis < 0; }
  // "UINT8 per-tensor scale 0.0187 zero point 114" / "INT8 per-axis (axis 0, 64 scales)" for messages.
  std::string Describe() const;
};

// Reads and checks the scale (input 1) and zero point (input 2, optional) of `node`, a QuantizeLinear or a
// DequantizeLinear, whose data input has shape `x_shape`. `data_type` is the element type of a DequantizeLinear's
// data when it is a constant (0 when unknown or for QuantizeLinear). Errors name the node and what is unsupported.
absl::StatusOr<QuantizationParams> ReadQuantizationParams(const onnx::NodeProto& node, const OnnxAttributes& attrs,
                                                          int64_t opset, const runtime::Shape& x_shape,
                                                          int32_t data_type, const KnownValue* scale,
                                                          const KnownValue* zero_point);

// DequantizeLinear of a constant integer tensor: float((q - zero_point)) * scale, per slice along params.axis.
absl::StatusOr<KnownValue> DequantizeConstant(const QuantizationParams& params, const KnownValue& q,
                                              const std::string& label);

// QuantizeLinear of a constant float tensor: saturate(round_half_even(x / scale) + zero_point).
absl::StatusOr<KnownValue> QuantizeConstant(const QuantizationParams& params, const KnownValue& x,
                                            const std::string& label);

// The runtime activation computing QuantizeLinear(quantize) followed by DequantizeLinear(dequantize) on one tensor.
// Both must be per tensor with the same type, scale and zero point; `label` names the DequantizeLinear node.
absl::StatusOr<runtime::Activation> QuantizeDequantizeActivation(const QuantizationParams& quantize,
                                                                 const QuantizationParams& dequantize,
                                                                 const std::string& label);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_QUANTIZATION_H_
