#include "kernels/registry/algorithm.h"

namespace convoy {

absl::string_view BackendName(Backend backend) { return backend == Backend::kCpu ? "cpu" : "cuda"; }

}  // namespace convoy
