// Load-time evaluation of ONNX nodes whose inputs are all known (initializers, Constant nodes, and what this
// evaluator already computed), whatever their element type. Exporters write shape arithmetic and padding
// computations as small integer subgraphs: PyTorch turns every F.pad / "same" padding into ConstantOfShape, Concat,
// Reshape, Slice with a negative step, Transpose and Cast feeding Pad's `pads`, and `x.view(x.size(0), -1)` into
// Shape -> Gather -> Unsqueeze -> Concat -> Reshape. The importer (onnx_importer.cc) calls this evaluator for every
// node whose inputs are all known and whose op is listed here, so such subgraphs become constants before any runtime
// node is emitted; only float tensors ever reach the runtime graph.
//
// Semantics follow the ONNX operator specification and onnxruntime where the spec leaves room: integer Div truncates
// toward zero, Mod with fmod=0 takes the divisor's sign, Cast from float to an integer truncates (a value outside the
// target range or NaN is an error instead of undefined behaviour), integer results wrap to the width of their type,
// FLOAT16/BFLOAT16 results are rounded to their type. Multidirectional (numpy) broadcasting for element-wise ops.
//
// Ops: Constant, Identity, Shape, Size, Gather, Slice, Concat, Split, Reshape, Flatten, Transpose, Squeeze,
// Unsqueeze, Cast, CastLike, ConstantOfShape, Range, Expand, Tile, Where, element-wise Add Sub Mul Div Mod Pow
// Min Max Sum Neg Abs Sign Floor Ceil Round Sqrt Reciprocal Relu Clip, comparisons Equal Less LessOrEqual Greater
// GreaterOrEqual, logic Not And Or Xor, and ReduceSum ReduceProd ReduceMin ReduceMax.
//
// The dynamic batch: Shape of a runtime tensor whose dimension 0 is the batch yields kSymbolicBatchValue there
// (onnx_proto_reader.h). Ops that only move elements (Gather, Slice, Concat, Reshape, Unsqueeze, ...) carry it
// through, so Reshape(x, Concat(Shape(x)[0:1], [-1])) still works; an op that would compute with it fails naming
// the node, the op and the input, because its value is only known at run time.
//
//   std::vector<const KnownValue*> inputs = {&shape_value, &indices};
//   CONVOY_ASSIGN_OR_RETURN(std::vector<KnownValue> outputs, EvaluateConstantNode(node, attrs, opset, inputs));
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "server/repository/onnx_proto_reader.h"

namespace convoy::repository {

// Largest tensor the evaluator produces (elements): a corrupt shape input must not exhaust memory.
inline constexpr int64_t kMaxEvaluatedElements = int64_t{1} << 26;

// True when EvaluateConstantNode implements `op_type` (default ONNX domain).
bool IsConstantEvaluableOp(const std::string& op_type);

// Evaluates `node` (opset `opset`) on known inputs: `inputs[i]` is node input i, nullptr for an omitted optional
// input. Returns one value per node output. Errors name the node (attrs.label()), the op and the offending input or
// attribute, with the numbers.
absl::StatusOr<std::vector<KnownValue>> EvaluateConstantNode(const onnx::NodeProto& node, const OnnxAttributes& attrs,
                                                             int64_t opset,
                                                             const std::vector<const KnownValue*>& inputs);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_H_
