// Per-precision tolerances (see tolerance.h).
#include "kernels/common/tolerance.h"

#include <algorithm>
#include <cmath>

namespace convoy {

Tolerance ToleranceFor(DataType dtype, double reduction, bool allow_tf32) {
  const double scale = std::sqrt(std::max(reduction, 1.0));
  switch (dtype) {
    case DataType::kFloat16: return {1e-2, 2e-3 * scale};
    case DataType::kBFloat16: return {3e-2, 1.6e-2 * scale};
    default: return allow_tf32 ? Tolerance{2e-3, 1e-3 * scale} : Tolerance{1e-4, 1e-5 * scale};
  }
}

}  // namespace convoy
