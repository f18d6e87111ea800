// Status propagation macros for code that returns absl::Status / absl::StatusOr (Debian's Abseil 20220623 has
// none). Use them only in functions that themselves return a Status or StatusOr.
//
//   CONVOY_RETURN_IF_ERROR(DoThing());
//   CONVOY_ASSIGN_OR_RETURN(auto plan, BuildPlan(graph));
#ifndef CONVOY_KERNELS_COMMON_STATUS_MACROS_H_
#define CONVOY_KERNELS_COMMON_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define CONVOY_RETURN_IF_ERROR(expr)                    \
  do {                                                  \
    ::absl::Status convoy_status_ = (expr);             \
    if (!convoy_status_.ok()) return convoy_status_;    \
  } while (false)

#define CONVOY_STATUS_CONCAT_INNER_(a, b) a##b
#define CONVOY_STATUS_CONCAT_(a, b) CONVOY_STATUS_CONCAT_INNER_(a, b)

#define CONVOY_ASSIGN_OR_RETURN(lhs, expr) \
  CONVOY_ASSIGN_OR_RETURN_IMPL_(CONVOY_STATUS_CONCAT_(convoy_statusor_, __LINE__), lhs, expr)

#define CONVOY_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                   \
  if (!statusor.ok()) return std::move(statusor).status();  \
  lhs = std::move(statusor).value()

#endif  // CONVOY_KERNELS_COMMON_STATUS_MACROS_H_
