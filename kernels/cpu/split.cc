#include "kernels/cpu/split.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {

absl::Status CpuSplitAlgorithm::Run(const SplitProblem& p, const SplitArgs& args, Workspace,
                                    const ExecutionContext& context) const {
  if (args.outputs.size() != p.channels.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name(), ": expected ", p.channels.size(), " outputs, got ", args.outputs.size()));
  }
  const size_t element = DataTypeSize(p.dtype);
  const int64_t plane = int64_t{p.h} * p.w, total = p.total_channels();
  const bool nchw = p.layout == Layout::kNCHW;
  const int64_t units = nchw ? p.n : p.n * plane;  // images (NCHW) or pixels (NHWC), as in concat.cc
  const int64_t unit_elements = nchw ? plane : 1;
  const char* x = static_cast<const char*>(args.x);
  context.thread_pool->ParallelFor(units, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      int64_t first_channel = 0;
      for (size_t i = 0; i < p.channels.size(); ++i) {
        const size_t bytes = static_cast<size_t>(p.channels[i] * unit_elements) * element;
        std::memcpy(static_cast<char*>(args.outputs[i]) + unit * bytes,
                    x + (unit * total + first_channel) * unit_elements * element, bytes);
        first_channel += p.channels[i];
      }
    }
  }, nchw ? 1 : 64);
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(SplitOp, CpuSplitAlgorithm);

}  // namespace convoy::cpu
