// Reference transpose: every output element, in order, copied bit for bit from the input coordinate its output
// coordinate names through perm (no coalescing, no blocking: the plain definition).
#include <cstring>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Transpose(const TransposeProblem& p, const TransposeArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const size_t element = DataTypeSize(p.dtype);
  const int rank = p.rank();
  std::vector<int64_t> input_strides(rank, 1);  // row-major strides of x
  for (int d = rank - 2; d >= 0; --d) input_strides[d] = input_strides[d + 1] * p.dims[d + 1];
  const std::vector<int64_t> out_dims = p.output_dims();
  std::vector<int64_t> coord(rank, 0);  // output coordinate of element `i`
  for (int64_t i = 0; i < p.num_elements(); ++i) {
    int64_t source = 0;
    for (int k = 0; k < rank; ++k) source += coord[k] * input_strides[p.perm[k]];
    std::memcpy(static_cast<char*>(args.y) + i * element, static_cast<const char*>(args.x) + source * element,
                element);
    for (int k = rank - 1; k >= 0; --k) {  // next output coordinate, row-major
      if (++coord[k] < out_dims[k]) break;
      coord[k] = 0;
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
