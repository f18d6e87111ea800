// ONNX Resize (opsets 10, 11, 13, 18, 19) and Upsample (7, 9) as the graph's Resize node (runtime::ResizeAttrs):
// attributes read as the node's opset defines them, the scales or sizes (constants, or values the load-time
// evaluator folded from a shape subgraph) turned into output extents, and everything Convoy does not run refused
// with the node, the opset and the attribute or input named. The importer (onnx_importer.cc) gathers the constant
// inputs and emits the node.
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_RESIZE_IMPORT_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_RESIZE_IMPORT_H_

#include "absl/status/statusor.h"
#include "onnx/onnx_pb.h"
#include "server/repository/onnx_proto_reader.h"
#include "server/runtime/graph.h"

namespace convoy::repository {

// The constant inputs of a Resize / Upsample node, null where the input is absent (no name). For Resize-10 and
// Upsample-9 `scales` is input 1; for Resize-11+ roi, scales and sizes are inputs 1, 2, 3.
struct OnnxResizeInputs {
  const KnownValue* roi = nullptr;
  const KnownValue* scales = nullptr;
  const KnownValue* sizes = nullptr;
};

// `x` is the data input's shape (kBatch for the dynamic batch).
absl::StatusOr<runtime::ResizeAttrs> ImportResizeAttrs(const onnx::NodeProto& n, const OnnxAttributes& a,
                                                       int64_t opset, const runtime::Shape& x,
                                                       const OnnxResizeInputs& inputs);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_RESIZE_IMPORT_H_
