// Reference channel concat: output channel offset + c of input i takes input i's channel c, bit for bit.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status Concat(const ConcatProblem& p, const ConcatArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  const std::string name = p.ToString();
  if (args.inputs.size() != p.channels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": expected ", p.channels.size(), " inputs, got ", args.inputs.size()));
  }
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(name, {{"args.y", args.y}}));
  for (size_t i = 0; i < args.inputs.size(); ++i) {
    if (args.inputs[i] == nullptr) return absl::InvalidArgumentError(absl::StrCat(name, ": args.inputs[", i, "] is null"));
  }
  const size_t element = DataTypeSize(p.dtype);
  const TensorDesc y_desc = TensorDesc::Image(p.dtype, p.n, p.total_channels(), p.h, p.w, p.layout);
  int first_channel = 0;
  for (size_t i = 0; i < p.channels.size(); ++i) {
    const TensorDesc x_desc = TensorDesc::Image(p.dtype, p.n, p.channels[i], p.h, p.w, p.layout);
    for (int n = 0; n < p.n; ++n)
      for (int c = 0; c < p.channels[i]; ++c)
        for (int y = 0; y < p.h; ++y)
          for (int x = 0; x < p.w; ++x) {
            std::memcpy(static_cast<char*>(args.y) + y_desc.Offset4(n, first_channel + c, y, x) * element,
                        static_cast<const char*>(args.inputs[i]) + x_desc.Offset4(n, c, y, x) * element, element);
          }
    first_channel += p.channels[i];
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
