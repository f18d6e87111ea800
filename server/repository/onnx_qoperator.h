// The QOperator form of quantized ONNX models (onnxruntime's quantize_static with QuantFormat.QOperator, and other
// tools that write QLinear* nodes), read by rewriting it into the QDQ form before import (onnx_quantization.h).
//
// In a QOperator model, 8-bit tensors flow between integer ops that carry their own scales and zero points:
// QLinearConv and QLinearMatMul (ONNX), QLinearAdd, QLinearMul, QLinearGlobalAveragePool, QLinearAveragePool,
// QLinearConcat, QLinearSigmoid, QLinearLeakyRelu and QGemm (onnxruntime's com.microsoft domain), plus ONNX ops that
// only move or select 8-bit values (MaxPool, Flatten, Reshape, Transpose, Squeeze, Unsqueeze, Identity, Slice).
// Each QLinear node becomes what it means in QDQ terms: a DequantizeLinear of each 8-bit input (weights with their
// per-channel axis; an INT32 bias with the scale input scale x weight scale, zero point 0), the float op with the
// node's attributes, and a QuantizeLinear with the node's output scale and zero point onto the node's own output
// name. A moving op reading an 8-bit tensor becomes DequantizeLinear -> op -> QuantizeLinear with that tensor's
// scale and zero point (exact: these ops only copy or compare values). One DequantizeLinear per 8-bit tensor serves all
// its readers, as in a QDQ model's Q -> DQ pair. The importer then reads the model as any QDQ
// model, so the INT8 planning (quantized_conv_folding.h) applies alike.
//
// Refused, naming the node: a QLinear node whose scales are not constants where the bias needs them, per-channel
// scales before opset 13 (DequantizeLinear takes an axis from 13), channels_last pooling, and com.microsoft ops not
// listed above (left as they are: the importer names their domain).
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_QOPERATOR_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_QOPERATOR_H_

#include <string>

#include "absl/status/status.h"
#include "onnx/onnx_pb.h"

namespace convoy::repository {

// Rewrites `model`'s QOperator nodes into QDQ form in place; a model without them is left unchanged. `source`
// names the model in messages. Returns how many nodes were rewritten through `rewritten` when not null.
absl::Status RewriteQOperatorNodes(onnx::ModelProto& model, const std::string& source, int* rewritten = nullptr);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_QOPERATOR_H_
