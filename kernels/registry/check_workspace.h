// The check a Run that uses its workspace starts with, worded the same for every algorithm. A target of its own
// (//kernels/registry:check_workspace), so that only its users recompile when it changes.
#ifndef CONVOY_KERNELS_REGISTRY_CHECK_WORKSPACE_H_
#define CONVOY_KERNELS_REGISTRY_CHECK_WORKSPACE_H_

#include <cstddef>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "kernels/registry/algorithm.h"

namespace convoy {

// OK, or INVALID_ARGUMENT "<algorithm>: workspace of B bytes, needs N" where the workspace holds fewer than `needed`
// bytes.
inline absl::Status CheckWorkspaceBytes(absl::string_view algorithm, const Workspace& workspace, size_t needed) {
  if (workspace.bytes >= needed) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(algorithm, ": workspace of ", workspace.bytes, " bytes, needs ", needed));
}

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_CHECK_WORKSPACE_H_
