#include "kernels/cpu/channel_shuffle.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

// NHWC: each pixel's C elements of type T permuted; T is an unsigned integer of the element's size.
template <typename T>
void ShufflePixels(const ChannelShuffleProblem& p, const T* x, T* y, ThreadPool& pool) {
  const int per_group = p.c / p.groups;
  pool.ParallelFor(int64_t{p.n} * p.h * p.w, [&](int64_t begin, int64_t end) {
    for (int64_t pixel = begin; pixel < end; ++pixel) {
      const T* in = x + pixel * p.c;
      T* out = y + pixel * p.c;
      for (int g = 0; g < p.groups; ++g)
        for (int j = 0; j < per_group; ++j) out[j * p.groups + g] = in[g * per_group + j];
    }
  }, 64);
}

}  // namespace

absl::Status CpuChannelShuffleAlgorithm::CanImplement(const ChannelShuffleProblem& problem) const {
  CONVOY_RETURN_IF_ERROR(problem.Validate());
  const size_t element = DataTypeSize(problem.dtype);
  if (element != 1 && element != 2 && element != 4 && element != 8) {
    return absl::UnimplementedError(absl::StrCat("elements of ", element, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status CpuChannelShuffleAlgorithm::Run(const ChannelShuffleProblem& p, const ChannelShuffleArgs& args,
                                             Workspace, const ExecutionContext& context) const {
  const size_t element = DataTypeSize(p.dtype);
  ThreadPool& pool = *context.thread_pool;
  if (p.layout == Layout::kNCHW) {
    const size_t plane_bytes = static_cast<size_t>(p.h) * p.w * element;
    const int per_group = p.c / p.groups;
    pool.ParallelFor(int64_t{p.n} * p.c, [&](int64_t begin, int64_t end) {
      for (int64_t nc = begin; nc < end; ++nc) {  // output (n, channel = j * groups + g)
        const int64_t n = nc / p.c, out_c = nc % p.c;
        const int64_t in_c = (out_c % p.groups) * per_group + out_c / p.groups;
        std::memcpy(static_cast<char*>(args.y) + nc * plane_bytes,
                    static_cast<const char*>(args.x) + (n * p.c + in_c) * plane_bytes, plane_bytes);
      }
    });
    return absl::OkStatus();
  }
  switch (element) {
    case 1: ShufflePixels(p, static_cast<const uint8_t*>(args.x), static_cast<uint8_t*>(args.y), pool); break;
    case 2: ShufflePixels(p, static_cast<const uint16_t*>(args.x), static_cast<uint16_t*>(args.y), pool); break;
    case 4: ShufflePixels(p, static_cast<const uint32_t*>(args.x), static_cast<uint32_t*>(args.y), pool); break;
    default: ShufflePixels(p, static_cast<const uint64_t*>(args.x), static_cast<uint64_t*>(args.y), pool); break;
  }
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(ChannelShuffleOp, CpuChannelShuffleAlgorithm);

}  // namespace convoy::cpu
