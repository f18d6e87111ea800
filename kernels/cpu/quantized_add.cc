#include "kernels/cpu/quantized_add.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/registry/registry.h"

namespace convoy::cpu {
namespace {

constexpr int64_t kChunk = 8192;

// The element loop, one instance per (a, b, y) type triple. The clamps are comparisons, not fminf/fmaxf, so GCC
// vectorizes the loop (as epilogue.h's QuantizeDequantize).
template <typename A, typename B, typename Y>
void AddLoop(const QuantizedAddProblem& p, const A* a, const B* b, Y* y, ThreadPool& pool) {
  const float sa = p.a_scale, za = static_cast<float>(p.a_zero_point);
  const float sb = p.b_scale, zb = static_cast<float>(p.b_zero_point);
  const float sy = p.y_scale, zy = static_cast<float>(p.y_zero_point);
  const float lo = static_cast<float>(std::numeric_limits<Y>::min());
  const float hi = static_cast<float>(std::numeric_limits<Y>::max());
  const int64_t count = p.count;
  pool.ParallelFor((count + kChunk - 1) / kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t first = chunk * kChunk, last = std::min(count, first + kChunk);
      for (int64_t i = first; i < last; ++i) {
        const float da = (static_cast<float>(a[i]) - za) * sa;
        const float db = (static_cast<float>(b[i]) - zb) * sb;
        float q = rintf((da + db) / sy) + zy;
        q = q > lo ? q : lo;
        q = q < hi ? q : hi;
        y[i] = static_cast<Y>(q);
      }
    }
  });
}

// Calls fn(T{}) with T uint8_t or int8_t for a UINT8 or INT8 type (Validate admits no other).
template <typename Fn>
void DispatchInt8(DataType type, Fn&& fn) {
  if (type == DataType::kUInt8) {
    fn(uint8_t{});
  } else {
    fn(int8_t{});
  }
}

}  // namespace

absl::Status QuantizedAddElementwise::Run(const QuantizedAddProblem& p, const QuantizedAddArgs& args, Workspace,
                                          const ExecutionContext& context) const {
  ThreadPool& pool = *context.thread_pool;
  DispatchInt8(p.a_type, [&](auto a_tag) {
    DispatchInt8(p.b_type, [&](auto b_tag) {
      DispatchInt8(p.y_type, [&](auto y_tag) {
        using A = decltype(a_tag);
        using B = decltype(b_tag);
        using Y = decltype(y_tag);
        AddLoop(p, static_cast<const A*>(args.a), static_cast<const B*>(args.b), static_cast<Y*>(args.y), pool);
      });
    });
  });
  return absl::OkStatus();
}

CONVOY_REGISTER_ALGORITHM(QuantizedAddOp, QuantizedAddElementwise);

}  // namespace convoy::cpu
