// Reading pieces of ONNX protobuf messages into plain values: tensors (raw_data and typed fields, with size checks)
// and node attributes (typed getters that reject wrong types and unknown attribute names). Used by onnx_importer.cc.
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_PROTO_READER_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_PROTO_READER_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

// A tensor known at import time, of any ONNX element type: initializers, Constant nodes, and everything the
// load-time evaluator (onnx_constant_evaluator.h) computes from them. Floating-point types (FLOAT, FLOAT16,
// BFLOAT16, DOUBLE) keep their values in `floats` (DOUBLE rounded to float), every integer type and BOOL in `ints`
// (wrapped to the type's width when computed). `type` is the ONNX TensorProto::DataType.
struct KnownValue {
  int32_t type = onnx::TensorProto::FLOAT;
  runtime::Shape shape;
  std::vector<float> floats;
  std::vector<int64_t> ints;

  static KnownValue Float(runtime::Shape shape, std::vector<float> values);
  static KnownValue Int64(runtime::Shape shape, std::vector<int64_t> values);

  bool is_int() const { return IsIntegerOnnxType(type); }
  int64_t size() const { return is_int() ? static_cast<int64_t>(ints.size()) : static_cast<int64_t>(floats.size()); }
  // "INT64 [2,4]" for messages.
  std::string Describe() const;

  static bool IsIntegerOnnxType(int32_t type);
  static bool IsFloatOnnxType(int32_t type);
};

// Stand-in for the dynamic batch size inside folded shape arithmetic (Shape -> Gather -> Concat -> Reshape).
inline constexpr int64_t kSymbolicBatchValue = -(int64_t{1} << 40);

// Decodes FLOAT, FLOAT16, BFLOAT16, DOUBLE (to float) and every integer type and BOOL (to int64) tensors.
// `what` names the tensor.
absl::StatusOr<KnownValue> DecodeTensor(const onnx::TensorProto& tensor, const std::string& what);

// Typed access to a node's attributes. Every getter fails on a wrong attribute type; CheckKnown fails on any
// attribute outside the list, so unsupported attributes are never silently ignored.
class OnnxAttributes {
 public:
  explicit OnnxAttributes(const onnx::NodeProto& node, std::string node_label)
      : node_(node), label_(std::move(node_label)) {}

  absl::Status CheckKnown(std::initializer_list<const char*> names) const;
  bool Has(const char* name) const { return Find(name) != nullptr; }
  absl::StatusOr<int64_t> Int(const char* name, int64_t default_value) const;
  absl::StatusOr<float> Float(const char* name, float default_value) const;
  absl::StatusOr<std::string> String(const char* name, const std::string& default_value) const;
  absl::StatusOr<std::vector<int64_t>> Ints(const char* name, std::vector<int64_t> default_value) const;
  absl::StatusOr<std::vector<float>> Floats(const char* name) const;
  absl::StatusOr<const onnx::TensorProto*> TensorAttr(const char* name) const;

  // "node 'conv1' (Conv)" for messages.
  const std::string& label() const { return label_; }
  absl::Status Error(const std::string& what) const;

 private:
  const onnx::AttributeProto* Find(const char* name) const;
  absl::Status ExpectType(const onnx::AttributeProto& attr, onnx::AttributeProto::AttributeType type) const;

  const onnx::NodeProto& node_;
  std::string label_;
};

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_PROTO_READER_H_
