#include "kernels/cpu/quantized_add.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/quantized_vector_loops.h"
#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 16384;

ByteQuantization Quantization(DataType type, float scale, int zero_point) {
  return {scale, zero_point, type == DataType::kUInt8};
}

}  // namespace

absl::Status QuantizedAddElementwise::Run(const QuantizedAddProblem& p, const QuantizedAddArgs& args, Workspace,
                                          const ExecutionContext& context) const {
  const ByteQuantization a = Quantization(p.a_type, p.a_scale, p.a_zero_point);
  const ByteQuantization b = Quantization(p.b_type, p.b_scale, p.b_zero_point);
  const ByteQuantization y = Quantization(p.y_type, p.y_scale, p.y_zero_point);
  const CpuIsa isa = BestCpuIsa();
  const auto* a_bytes = static_cast<const uint8_t*>(args.a);
  const auto* b_bytes = static_cast<const uint8_t*>(args.b);
  auto* y_bytes = static_cast<uint8_t*>(args.y);
  const int64_t count = p.count;
  context.thread_pool->ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    const int64_t first = begin * kChunk, last = std::min(count, end * kChunk);
    QuantizedAddLoop(isa, a, a_bytes + first, b, b_bytes + first, y, y_bytes + first, last - first);
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(QuantizedAddOp, QuantizedAddElementwise);

}  // namespace convoy::cpu
