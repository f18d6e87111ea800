#include "server/runtime/unary_lowering.h"

namespace convoy::runtime {

convoy::UnaryKind LowerUnaryKind(UnaryKind kind) {
  switch (kind) {
    case UnaryKind::kElu: return convoy::UnaryKind::kElu;
    case UnaryKind::kSelu: return convoy::UnaryKind::kSelu;
    case UnaryKind::kCelu: return convoy::UnaryKind::kCelu;
    case UnaryKind::kSoftplus: return convoy::UnaryKind::kSoftplus;
    case UnaryKind::kSoftsign: return convoy::UnaryKind::kSoftsign;
    case UnaryKind::kMish: return convoy::UnaryKind::kMish;
    case UnaryKind::kThresholdedRelu: return convoy::UnaryKind::kThresholdedRelu;
    case UnaryKind::kGeluTanh: return convoy::UnaryKind::kGeluTanh;
    case UnaryKind::kErf: return convoy::UnaryKind::kErf;
    case UnaryKind::kExp: return convoy::UnaryKind::kExp;
    case UnaryKind::kLog: return convoy::UnaryKind::kLog;
    case UnaryKind::kAbs: return convoy::UnaryKind::kAbs;
    case UnaryKind::kNeg: return convoy::UnaryKind::kNeg;
    case UnaryKind::kSqrt: return convoy::UnaryKind::kSqrt;
    case UnaryKind::kReciprocal: return convoy::UnaryKind::kReciprocal;
    case UnaryKind::kFloor: return convoy::UnaryKind::kFloor;
    case UnaryKind::kCeil: return convoy::UnaryKind::kCeil;
    case UnaryKind::kRound: return convoy::UnaryKind::kRound;
    case UnaryKind::kSign: return convoy::UnaryKind::kSign;
  }
  return convoy::UnaryKind::kExp;
}

}  // namespace convoy::runtime
