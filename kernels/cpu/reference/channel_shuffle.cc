// Reference channel shuffle: y[:, j * groups + g] = x[:, g * (C / groups) + j], bit for bit.
#include <cstring>

#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {

absl::Status ChannelShuffle(const ChannelShuffleProblem& p, const ChannelShuffleArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.x", args.x}, {"args.y", args.y}}));
  const size_t element = DataTypeSize(p.dtype);
  const TensorDesc desc = TensorDesc::Image(p.dtype, p.n, p.c, p.h, p.w, p.layout);
  const int per_group = p.c / p.groups;
  for (int n = 0; n < p.n; ++n)
    for (int g = 0; g < p.groups; ++g)
      for (int j = 0; j < per_group; ++j)
        for (int y = 0; y < p.h; ++y)
          for (int x = 0; x < p.w; ++x) {
            std::memcpy(static_cast<char*>(args.y) + desc.Offset4(n, j * p.groups + g, y, x) * element,
                        static_cast<const char*>(args.x) + desc.Offset4(n, g * per_group + j, y, x) * element,
                        element);
          }
  return absl::OkStatus();
}

}  // namespace convoy::reference
