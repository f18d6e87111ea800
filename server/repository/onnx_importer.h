// Imports an ONNX model (opsets 7 to 21) into Convoy's graph IR; docs/model_formats.md has the table of ops with
// their opset ranges and restrictions.
//
// Runtime ops: Conv, BatchNormalization, Relu, Clip, LeakyRelu, Sigmoid, Tanh, HardSigmoid, HardSwish, Add, Sub,
// Mul, Div, Concat, Split, MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, ReduceMean and ReduceMax (over
// H,W), Flatten, Reshape, Transpose, Gemm, MatMul (2-D, constant B), Softmax, Identity, Dropout, Pad
// (constant/reflect/edge; negative pads crop), Slice (step 1: of channels a Split, of H and W a cropping Pad),
// Squeeze, Unsqueeze, Cast (to float), and Shape of a runtime tensor (its static dims).
// Each op follows its definition at the model's opset: inputs that replaced attributes (Reduce* axes from opset 18,
// ReduceSum's from 13, Squeeze/Unsqueeze axes and Split sizes from 13, Pad's pads from 11 and axes from 18) must be
// constants, and one computed at run time fails naming the node, op, opset and input; attributes added later
// (Split's num_outputs at 18, AveragePool's dilations at 19) are read from their opset on.
// Every node whose inputs are all constants is evaluated at load time whatever its element type, by the evaluator
// in onnx_constant_evaluator.h (Shape, Gather, Slice with any steps, Concat, Reshape, Transpose, Cast,
// ConstantOfShape, Range, Expand, Where, arithmetic, comparisons, ...): the integer subgraphs exporters write for
// padding and shapes become constants, and only float tensors reach the runtime graph. What is not constant where
// it must be fails naming the node, the op and the input. An unsupported op, attribute or attribute value fails the
// import with the node, op and attribute named.
//
// Graph inputs must be FLOAT. A symbolic dimension 0 becomes the dynamic batch; any other symbolic dimension must be
// fixed through OnnxImportOptions::input_shapes (the model config's dims).
//
//   CONVOY_ASSIGN_OR_RETURN(runtime::Graph graph, ImportOnnxFile("model_repo/resnet/1/model.onnx", {}));
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_IMPORTER_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_IMPORTER_H_

#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

struct OnnxImportOptions {
  // Shapes replacing those in the file, by input name; dimension 0 may be runtime::kBatch.
  std::map<std::string, runtime::Shape> input_shapes;
};

// `source_name` names the model in error messages (usually its path).
absl::StatusOr<runtime::Graph> ImportOnnxModel(std::string_view serialized_model, const std::string& source_name,
                                               const OnnxImportOptions& options);
absl::StatusOr<runtime::Graph> ImportOnnxFile(const std::string& path, const OnnxImportOptions& options);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_IMPORTER_H_
