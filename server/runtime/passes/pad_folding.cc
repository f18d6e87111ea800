// Pad folding: a zero constant Pad of H and W that feeds a convolution becomes that convolution's own padding,
// Conv(Pad(x, top, left, bottom, right), pads p) = Conv(x, pads p + (top, left, bottom, right)). Exporters write
// TensorFlow-style "same" padding and F.pad this way (EfficientNet's static_padding before every strided conv).
//
// Folded only where it is exact and the kernels' range: constant mode with value 0, non-negative pads of the two
// spatial axes of a rank-4 tensor, and a resulting padding of at most the dilated kernel extent minus one per side
// (every output then still reads at least one input element, as with ordinary "same" or "valid" padding). A Pad read
// by other nodes too stays for them; one nobody reads any more is removed.
#include "kernels/common/status_macros.h"
#include "server/runtime/passes/graph_rewrite.h"
#include "server/runtime/passes/passes.h"

namespace convoy::runtime::passes {
namespace {

// True for a Pad the convolution's padding can absorb: zero constant padding of H and W only.
bool IsZeroSpatialPad(const Node& node) {
  if (node.op() != OpKind::kPad) return false;
  const auto& a = node.As<PadAttrs>();
  if (a.mode != PadMode::kConstant || a.value != 0.0f || a.pads.size() != 8) return false;
  for (int64_t p : a.pads) {
    if (p < 0) return false;
  }
  return a.pads[0] == 0 && a.pads[1] == 0 && a.pads[4] == 0 && a.pads[5] == 0;
}

// Adds the Pad's H/W padding (pads = [0, 0, top, left, 0, 0, bottom, right]) to `conv`'s window when the result
// stays within the kernel's extent on every side; returns whether it did.
bool AddPaddingToConv(const std::vector<int64_t>& pads, Conv2dAttrs& conv) {
  Window2d w = conv.window;
  w.pad_top += pads[2];
  w.pad_left += pads[3];
  w.pad_bottom += pads[6];
  w.pad_right += pads[7];
  const int64_t reach_h = w.dilation_h * (w.kernel_h - 1), reach_w = w.dilation_w * (w.kernel_w - 1);
  if (w.pad_top > reach_h || w.pad_bottom > reach_h || w.pad_left > reach_w || w.pad_right > reach_w) return false;
  conv.window = w;
  return true;
}

}  // namespace

absl::StatusOr<int> FoldPadIntoConv(Graph& graph) {
  int folded = 0;
  for (size_t i = 0; i < graph.nodes().size(); ++i) {
    const Node& pad = graph.nodes()[i];
    if (!IsZeroSpatialPad(pad)) continue;
    const std::vector<int64_t> pads = pad.As<PadAttrs>().pads;
    const std::string padded = pad.outputs[0], unpadded = pad.inputs[0];
    for (int consumer : graph.ConsumerIndices(padded)) {
      Node& conv = graph.mutable_nodes()[consumer];
      if (conv.op() != OpKind::kConv2d || conv.inputs[0] != padded) continue;
      if (!AddPaddingToConv(pads, conv.As<Conv2dAttrs>())) continue;
      conv.inputs[0] = unpadded;
      ++folded;
    }
  }
  if (folded == 0) return 0;
  CONVOY_RETURN_IF_ERROR(EliminateDeadNodes(graph).status());
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  return folded;
}

}  // namespace convoy::runtime::passes
