// The graph's Resize node (graph.h ResizeAttrs) as the kernel library's ResizeProblem: the one place the graph's
// resize enums meet the kernels' ones, used by the planner (planner_ops.cc) and the reference interpreter.
#ifndef CONVOY_SERVER_RUNTIME_RESIZE_LOWERING_H_
#define CONVOY_SERVER_RUNTIME_RESIZE_LOWERING_H_

#include "kernels/common/problems.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {

// FP32 NCHW; the caller sets dtype and layout for other plans.
ResizeProblem LowerResize(const ResizeAttrs& a, int64_t n, int64_t c, int64_t h, int64_t w);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_RESIZE_LOWERING_H_
