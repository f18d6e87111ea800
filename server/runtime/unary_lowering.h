// The graph's unary functions (graph.h UnaryKind) as the kernel library's (kernels/common/unary_function.h): the one
// place the two enums meet, used by the planner (planner_ops.cc) and the reference interpreter.
#ifndef CONVOY_SERVER_RUNTIME_UNARY_LOWERING_H_
#define CONVOY_SERVER_RUNTIME_UNARY_LOWERING_H_

#include "kernels/common/problems.h"
#include "server/runtime/graph.h"

namespace convoy::runtime {

convoy::UnaryKind LowerUnaryKind(UnaryKind kind);

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_UNARY_LOWERING_H_
