#include "kernels/cpu/concat.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

absl::Status CpuConcatAlgorithm::Run(const ConcatProblem& p, const ConcatArgs& args, Workspace,
                                     const ExecutionContext& context) const {
  if (args.inputs.size() != p.channels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": expected ", p.channels.size(), " inputs, got ", args.inputs.size()));
  }
  const size_t element = DataTypeSize(p.dtype);
  const int64_t plane = int64_t{p.h} * p.w, total = p.total_channels();
  // NCHW: per image, input i is one block of C_i * H * W; NHWC: per pixel, C_i channels. Both are "units" of
  // C_i * unit_elements elements, N (or N * H * W) units per input.
  const bool nchw = p.layout == Layout::kNCHW;
  const int64_t units = nchw ? p.n : p.n * plane;
  const int64_t unit_elements = nchw ? plane : 1;
  char* y = static_cast<char*>(args.y);
  context.thread_pool->ParallelFor(units, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t first_channel = 0;
      for (size_t i = 0; i < p.channels.size(); ++i) {
        const size_t bytes = static_cast<size_t>(p.channels[i] * unit_elements) * element;
        std::memcpy(y + (unit * total + first_channel) * unit_elements * element,
                    static_cast<const char*>(args.inputs[i]) + unit * bytes, bytes);
        first_channel += p.channels[i];
      }
    }
  }, nchw ? 1 : 64);
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(ConcatOp, CpuConcatAlgorithm);

}  // namespace convoy::cpu
