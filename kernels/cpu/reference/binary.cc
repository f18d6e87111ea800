// Reference binary element-wise op with broadcast of b: y = act(a OP b), in double.
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_internal.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::reference {
namespace {

// Element index into b for the a/y element at logical (n, c, h, w) of offset `offset`.
int64_t BroadcastIndex(const BinaryProblem& p, int n, int c, int64_t offset) {
  switch (p.broadcast) {
    case BinaryBroadcast::kNone: return offset;  // b has a's shape and layout
    case BinaryBroadcast::kPerImageChannel: return int64_t{n} * p.c + c;
    case BinaryBroadcast::kPerChannel: return c;
    case BinaryBroadcast::kScalar: return 0;
  }
  return 0;
}

double Combine(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
  }
  return a;
}

}  // namespace

absl::Status Binary(const BinaryProblem& p, const BinaryArgs& args) {
  CONVOY_RETURN_IF_ERROR(p.Validate());
  CONVOY_RETURN_IF_ERROR(internal::CheckNotNull(p.ToString(), {{"args.a", args.a}, {"args.b", args.b}, {"args.y", args.y}}));
  const TensorDesc desc = p.desc();
  for (int n = 0; n < p.n; ++n) {
    for (int c = 0; c < p.c; ++c) {
      for (int y = 0; y < p.h; ++y) {
        for (int x = 0; x < p.w; ++x) {
          const int64_t offset = desc.Offset4(n, c, y, x);
          const double a = LoadAsFloat(args.a, p.dtype, offset);
          const double b = LoadAsFloat(args.b, p.dtype, BroadcastIndex(p, n, c, offset));
          const double v = ApplyActivationReference(Combine(p.op, a, b), p.activation);
          StoreFromFloat(args.y, p.dtype, offset, static_cast<float>(v));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::reference
