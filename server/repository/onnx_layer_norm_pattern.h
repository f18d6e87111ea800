// Finds the decomposed layer normalization that exporters write for LayerNorm at opsets before 17 (torch.onnx's
// F.layer_norm, ConvNeXt's LayerNorm2d written by hand) so the importer can read it as one LayerNorm:
//
//   m = ReduceMean(x, axes)          d = Sub(x, m)           q = Pow(d, 2) or Mul(d, d)
//   v = ReduceMean(q, axes)          e = Add(v, epsilon)     s = Sqrt(e)       n = Div(d, s)
//   [y = Mul(n, scale)]              [z = Add(y, bias)]      (scale and bias constants, either operand order)
//
// Both ReduceMeans keep their dims and name the same axes (an attribute, or a constant input from opset 18); every
// intermediate tensor is read only inside the pattern and is not a graph output. Which axes the runtime can
// normalize (the trailing ones, or the channels of [N,C,H,W]) is the importer's question: it knows the shapes.
//
//   for (const LayerNormPattern& p : FindLayerNormPatterns(model.graph())) ...
#ifndef CONVOY_SERVER_REPOSITORY_ONNX_LAYER_NORM_PATTERN_H_
#define CONVOY_SERVER_REPOSITORY_ONNX_LAYER_NORM_PATTERN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace convoy::repository {

struct LayerNormPattern {
  std::vector<int> nodes;      // indices of every node of the pattern, ascending; the last produces `output`
  std::string x;               // the normalized tensor
  std::string output;          // the pattern's result (n, y or z above)
  std::vector<int64_t> axes;   // as the ReduceMeans name them (may be negative)
  float epsilon = 0.0f;
  std::string scale, bias;     // constant tensors, empty when the pattern has none
  std::string normalized;      // the Div's output (n above)
  std::string scaled;          // the scale Mul's output (y above), empty without a scale
};

// Every match in `graph`, in node order; a node belongs to at most one.
std::vector<LayerNormPattern> FindLayerNormPatterns(const onnx::GraphProto& graph);

}  // namespace convoy::repository

#endif  // CONVOY_SERVER_REPOSITORY_ONNX_LAYER_NORM_PATTERN_H_
