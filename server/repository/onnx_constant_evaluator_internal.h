// Pieces shared by the two halves of the load-time evaluator: onnx_constant_evaluator.cc (dispatch and the ops
// that move elements: Gather, Slice, Concat, Reshape, ...) and onnx_constant_elementwise.cc (arithmetic,
// comparisons, logic, Where, Cast, reductions). Not for use outside the evaluator.
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_INTERNAL_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_INTERNAL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "server/repository/onnx_proto_reader.h"

namespace convoy::repository::constant_eval {

using runtime::Shape;
using Outputs = std::vector<KnownValue>;

// One node being evaluated: its inputs, attributes and opset, and the error messages that name it.
class EvalCall {
 public:
  EvalCall(const onnx::NodeProto& node, const OnnxAttributes& attrs, int64_t opset,
           const std::vector<const KnownValue*>& inputs)
      : node_(node), attrs_(attrs), opset_(opset), inputs_(inputs) {}

  const std::string& op() const { return node_.op_type(); }
  const OnnxAttributes& attrs() const { return attrs_; }
  int64_t opset() const { return opset_; }
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  int num_outputs() const { return node_.output_size(); }
  bool has(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  const KnownValue& in(int i) const { return *inputs_[i]; }

  // Between min and max inputs, the first min present.
  absl::Status ExpectInputs(int min, int max) const;
  // InvalidArgument / Unimplemented naming the node and op: "m.onnx: node 'n' (Slice): <what>".
  absl::Status Error(const std::string& what) const;
  absl::Status Unsupported(const std::string& what) const;
  // "input 1 ('name')" for messages.
  std::string InputLabel(int i) const;

  // Fails when input i holds the dynamic batch stand-in (its value is known only at run time) and the op would
  // compute with it rather than move it.
  absl::Status RejectBatchStandIn(int i) const;
  // Input i as integers (shape, axes, indices...): it must be an integer tensor free of the batch stand-in.
  absl::StatusOr<std::vector<int64_t>> Ints(int i) const;
  // Input i as one integer (a scalar or a one-element tensor).
  absl::StatusOr<int64_t> IntScalar(int i) const;
  // Fails when `shape` holds a negative dimension or more than kMaxEvaluatedElements elements; else the count.
  absl::StatusOr<int64_t> CheckedElementCount(const Shape& shape) const;
  // `axis` in [-rank, rank) made non-negative; `what` names it in the error.
  absl::StatusOr<int64_t> NormalizeAxis(int64_t axis, int64_t rank, const char* what) const;

 private:
  const onnx::NodeProto& node_;
  const OnnxAttributes& attrs_;
  int64_t opset_;
  const std::vector<const KnownValue*>& inputs_;
};

// Row-major strides of `shape` (elements).
std::vector<int64_t> RowMajorStrides(const Shape& shape);
// Product of the dimensions (callers have checked the shape).
int64_t ElementCount(const Shape& shape);

// For every coordinate of `shape` in row-major order, index_of(coordinate): how Slice, Transpose, Tile, broadcasting
// and reductions map each element to the element it reads or writes.
template <typename IndexOf>
std::vector<int64_t> MapCoordinates(const Shape& shape, IndexOf index_of) {
  const int64_t count = ElementCount(shape), rank = static_cast<int64_t>(shape.size());
  std::vector<int64_t> indices(count);
  std::vector<int64_t> coord(rank, 0);
  for (int64_t flat = 0; flat < count; ++flat) {
    indices[flat] = index_of(coord);
    for (int64_t d = rank - 1; d >= 0; --d) {
      if (++coord[d] < shape[d]) break;
      coord[d] = 0;
    }
  }
  return indices;
}
// An empty value of `type` and `shape` whose storage (floats or ints) will receive ElementCount(shape) elements.
KnownValue EmptyLike(int32_t type, Shape shape);
// Output element i is element source[i] of `src` (any type): the common core of Gather, Slice, Transpose, Expand.
KnownValue TakeElements(const KnownValue& src, Shape shape, const std::vector<int64_t>& source);

// Multidirectional (numpy) broadcast of `shapes`; fails naming the node when they are incompatible.
absl::StatusOr<Shape> BroadcastShapes(const EvalCall& c, const std::vector<Shape>& shapes);
// For each element of `out`, the flat index of the element of a tensor of shape `in` broadcast to it.
std::vector<int64_t> BroadcastSourceIndices(const Shape& in, const Shape& out);

// Element-wise ops, Where, Clip, Cast/CastLike and reductions (onnx_constant_elementwise.cc).
bool IsElementwiseOp(const std::string& op);
absl::StatusOr<Outputs> EvaluateElementwise(const EvalCall& c);
absl::StatusOr<Outputs> EvaluateWhere(const EvalCall& c);
absl::StatusOr<Outputs> EvaluateClip(const EvalCall& c);
absl::StatusOr<Outputs> EvaluateCast(const EvalCall& c);
absl::StatusOr<Outputs> EvaluateReduce(const EvalCall& c);

}  // namespace convoy::repository::constant_eval

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_CONSTANT_EVALUATOR_INTERNAL_H_
