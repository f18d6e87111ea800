// The computing half of the load-time evaluator (see onnx_constant_evaluator.h): element-wise arithmetic,
// comparisons and logic with multidirectional broadcasting, Where, Cast/CastLike, and the Reduce ops exporters put in
// shape subgraphs. Integers are computed in int64 with two's-complement wrap-around (no signed overflow, so no
// undefined behaviour on hostile models) and then wrapped to their type's width; floats in double, then rounded to
// their type.
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "server/repository/onnx_constant_evaluator.h"
#include "server/repository/onnx_constant_evaluator_internal.h"

namespace convoy::repository::constant_eval {
namespace {

using T = onnx::TensorProto;

enum class Fn {
  kAdd, kSub, kMul, kDiv, kMod, kPow, kMin, kMax, kSum,
  kEqual, kLess, kLessOrEqual, kGreater, kGreaterOrEqual,
  kAnd, kOr, kXor, kNot,
  kNeg, kAbs, kSign, kFloor, kCeil, kRound, kSqrt, kReciprocal, kRelu,
};

struct ElementwiseOp {
  Fn fn;
  int min_inputs, max_inputs;  // 1/1 unary, 2/2 binary, 1/many variadic (Min, Max, Sum)
  bool bool_result;            // comparisons and logic produce BOOL
  bool logic;                  // inputs must be BOOL
};

const std::map<std::string, ElementwiseOp>& ElementwiseOps() {
  constexpr int kMany = std::numeric_limits<int>::max();
  static const auto* ops = new std::map<std::string, ElementwiseOp>{
      {"Add", {Fn::kAdd, 2, 2, false, false}},
      {"Sub", {Fn::kSub, 2, 2, false, false}},
      {"Mul", {Fn::kMul, 2, 2, false, false}},
      {"Div", {Fn::kDiv, 2, 2, false, false}},
      {"Mod", {Fn::kMod, 2, 2, false, false}},
      {"Pow", {Fn::kPow, 2, 2, false, false}},
      {"Min", {Fn::kMin, 1, kMany, false, false}},
      {"Max", {Fn::kMax, 1, kMany, false, false}},
      {"Sum", {Fn::kSum, 1, kMany, false, false}},
      {"Equal", {Fn::kEqual, 2, 2, true, false}},
      {"Less", {Fn::kLess, 2, 2, true, false}},
      {"LessOrEqual", {Fn::kLessOrEqual, 2, 2, true, false}},
      {"Greater", {Fn::kGreater, 2, 2, true, false}},
      {"GreaterOrEqual", {Fn::kGreaterOrEqual, 2, 2, true, false}},
      {"And", {Fn::kAnd, 2, 2, true, true}},
      {"Or", {Fn::kOr, 2, 2, true, true}},
      {"Xor", {Fn::kXor, 2, 2, true, true}},
      {"Not", {Fn::kNot, 1, 1, true, true}},
      {"Neg", {Fn::kNeg, 1, 1, false, false}},
      {"Abs", {Fn::kAbs, 1, 1, false, false}},
      {"Sign", {Fn::kSign, 1, 1, false, false}},
      {"Floor", {Fn::kFloor, 1, 1, false, false}},
      {"Ceil", {Fn::kCeil, 1, 1, false, false}},
      {"Round", {Fn::kRound, 1, 1, false, false}},
      {"Sqrt", {Fn::kSqrt, 1, 1, false, false}},
      {"Reciprocal", {Fn::kReciprocal, 1, 1, false, false}},
      {"Relu", {Fn::kRelu, 1, 1, false, false}},
  };
  return *ops;
}

// Two's-complement arithmetic without signed overflow.
int64_t WrapAdd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t WrapSub(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b)); }
int64_t WrapMul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

// `v` as a value of the integer ONNX type `type` (two's-complement truncation, like a C++ cast), BOOL as 0/1.
int64_t WrapToType(int32_t type, int64_t v) {
  switch (type) {
    case T::INT8: return static_cast<int8_t>(v);
    case T::INT16: return static_cast<int16_t>(v);
    case T::INT32: return static_cast<int32_t>(v);
    case T::UINT8: return static_cast<uint8_t>(v);
    case T::UINT16: return static_cast<uint16_t>(v);
    case T::UINT32: return static_cast<uint32_t>(v);
    case T::BOOL: return v != 0;
    default: return v;  // INT64, and UINT64 kept as its bit pattern
  }
}

// `v` rounded to the floating-point ONNX type `type` (stored as float).
float RoundToType(int32_t type, double v) {
  const float f = static_cast<float>(v);
  if (type == T::FLOAT16) return convoy::HalfBitsToFloat(convoy::FloatToHalfBits(f));
  if (type == T::BFLOAT16) return convoy::BFloat16BitsToFloat(convoy::FloatToBFloat16Bits(f));
  return f;
}

double ElementAsDouble(const KnownValue& v, int64_t i) {
  return v.is_int() ? static_cast<double>(v.ints[i]) : static_cast<double>(v.floats[i]);
}

// A float converted to int64 by truncation toward zero; NaN and values outside int64 are errors.
absl::StatusOr<int64_t> TruncateToInt(const EvalCall& c, double v) {
  if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0)) {
    return c.Error(absl::StrCat("value ", v, " cannot be converted to an integer"));
  }
  return static_cast<int64_t>(v);
}

absl::StatusOr<int64_t> IntegerResult(const EvalCall& c, Fn fn, const std::vector<int64_t>& x) {
  const int64_t a = x[0], b = x.size() > 1 ? x[1] : 0;
  switch (fn) {
    case Fn::kAdd: case Fn::kSum: return WrapAdd(a, b);
    case Fn::kSub: return WrapSub(a, b);
    case Fn::kMul: return WrapMul(a, b);
    case Fn::kDiv:
      if (b == 0) return c.Error("integer division by zero");
      if (b == -1) return WrapSub(0, a);  // INT64_MIN / -1 wraps
      return a / b;                         // truncates toward zero, as onnxruntime
    case Fn::kMod: {
      if (b == 0) return c.Error("integer modulo by zero");
      if (b == -1) return 0;
      CONVOY_ASSIGN_OR_RETURN(int64_t fmod, c.attrs().Int("fmod", 0));
      int64_t r = a % b;  // the sign of the dividend (C fmod)
      if (!fmod && r != 0 && (r < 0) != (b < 0)) r += b;  // the sign of the divisor (Python %)
      return r;
    }
    case Fn::kPow: return TruncateToInt(c, std::pow(static_cast<double>(a), static_cast<double>(b)));
    case Fn::kMin: return std::min(a, b);
    case Fn::kMax: return std::max(a, b);
    case Fn::kEqual: return a == b;
    case Fn::kLess: return a < b;
    case Fn::kLessOrEqual: return a <= b;
    case Fn::kGreater: return a > b;
    case Fn::kGreaterOrEqual: return a >= b;
    case Fn::kAnd: return (a != 0) && (b != 0);
    case Fn::kOr: return (a != 0) || (b != 0);
    case Fn::kXor: return (a != 0) != (b != 0);
    case Fn::kNot: return a == 0;
    case Fn::kNeg: return WrapSub(0, a);
    case Fn::kAbs: return a < 0 ? WrapSub(0, a) : a;
    case Fn::kSign: return (a > 0) - (a < 0);
    case Fn::kFloor: case Fn::kCeil: case Fn::kRound: return a;
    case Fn::kRelu: return std::max<int64_t>(a, 0);
    case Fn::kSqrt: case Fn::kReciprocal: break;
  }
  return c.Unsupported(absl::StrCat(c.op(), " of integers"));
}

absl::StatusOr<double> FloatResult(const EvalCall& c, Fn fn, const std::vector<double>& x) {
  const double a = x[0], b = x.size() > 1 ? x[1] : 0;
  switch (fn) {
    case Fn::kAdd: case Fn::kSum: return a + b;
    case Fn::kSub: return a - b;
    case Fn::kMul: return a * b;
    case Fn::kDiv: return a / b;
    case Fn::kMod: {
      CONVOY_ASSIGN_OR_RETURN(int64_t fmod, c.attrs().Int("fmod", 0));
      if (!fmod) return c.Error("Mod of floating-point values needs fmod=1");
      return std::fmod(a, b);
    }
    case Fn::kPow: return std::pow(a, b);
    case Fn::kMin: return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case Fn::kMax: return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case Fn::kEqual: return a == b;
    case Fn::kLess: return a < b;
    case Fn::kLessOrEqual: return a <= b;
    case Fn::kGreater: return a > b;
    case Fn::kGreaterOrEqual: return a >= b;
    case Fn::kNeg: return -a;
    case Fn::kAbs: return std::fabs(a);
    case Fn::kSign: return std::isnan(a) ? a : (a > 0) - (a < 0);
    case Fn::kFloor: return std::floor(a);
    case Fn::kCeil: return std::ceil(a);
    case Fn::kRound: return std::nearbyint(a);  // halves to even (the default rounding mode)
    case Fn::kSqrt: return std::sqrt(a);
    case Fn::kReciprocal: return 1.0 / a;
    case Fn::kRelu: return std::isnan(a) ? a : std::max(a, 0.0);
    case Fn::kAnd: case Fn::kOr: case Fn::kXor: case Fn::kNot: break;
  }
  return c.Unsupported(absl::StrCat(c.op(), " of floating-point values"));
}

// Result type of an arithmetic op: Pow keeps its base's type; otherwise the first floating-point input's type
// (inputs of one op share a type in valid models), else input 0's.
int32_t ArithmeticResultType(const EvalCall& c, Fn fn) {
  if (fn == Fn::kPow) return c.in(0).type;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.in(i).is_int()) return c.in(i).type;
  }
  return c.in(0).type;
}

}  // namespace

bool IsElementwiseOp(const std::string& op) { return ElementwiseOps().count(op) > 0; }

absl::StatusOr<Outputs> EvaluateElementwise(const EvalCall& c) {
  const ElementwiseOp& op = ElementwiseOps().at(c.op());
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown(op.fn == Fn::kMod ? std::initializer_list<const char*>{"fmod"}
                                                                 : std::initializer_list<const char*>{}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(op.min_inputs, op.max_inputs));
  std::vector<Shape> shapes;
  bool all_int = true;
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has(i)) return c.Error(absl::StrCat("input ", i, " is empty"));
    CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(i));
    if (op.logic && c.in(i).type != T::BOOL) {
      return c.Error(absl::StrCat(c.InputLabel(i), " must be BOOL, got ", c.in(i).Describe()));
    }
    all_int = all_int && c.in(i).is_int();
    shapes.push_back(c.in(i).shape);
  }
  CONVOY_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(c, shapes));
  CONVOY_ASSIGN_OR_RETURN(int64_t count, c.CheckedElementCount(shape));
  const int32_t type = op.bool_result ? static_cast<int32_t>(T::BOOL) : ArithmeticResultType(c, op.fn);
  const bool int_result = KnownValue::IsIntegerOnnxType(type);
  std::vector<std::vector<int64_t>> source;
  for (const Shape& s : shapes) source.push_back(BroadcastSourceIndices(s, shape));
  KnownValue out = EmptyLike(type, shape);
  // Unary ops map input 0; binary and variadic ones fold their inputs left to right: Sum(a, b, c) = (a + b) + c,
  // and Min/Max/Sum of one input is that input.
  const bool unary = op.max_inputs == 1;
  for (int64_t e = 0; e < count; ++e) {
    if (all_int) {
      int64_t r = c.in(0).ints[source[0][e]];
      if (unary) {
        CONVOY_ASSIGN_OR_RETURN(r, IntegerResult(c, op.fn, {r}));
      }
      for (int i = 1; i < c.num_inputs(); ++i) {
        CONVOY_ASSIGN_OR_RETURN(r, IntegerResult(c, op.fn, {r, c.in(i).ints[source[i][e]]}));
      }
      out.ints.push_back(WrapToType(type, r));
      continue;
    }
    double r = ElementAsDouble(c.in(0), source[0][e]);
    if (unary) {
      CONVOY_ASSIGN_OR_RETURN(r, FloatResult(c, op.fn, {r}));
    }
    for (int i = 1; i < c.num_inputs(); ++i) {
      CONVOY_ASSIGN_OR_RETURN(r, FloatResult(c, op.fn, {r, ElementAsDouble(c.in(i), source[i][e])}));
    }
    if (int_result) {  // a comparison's 0/1, or Pow with an integer base
      CONVOY_ASSIGN_OR_RETURN(int64_t truncated, TruncateToInt(c, r));
      out.ints.push_back(WrapToType(type, truncated));
    } else {
      out.floats.push_back(RoundToType(type, r));
    }
  }
  return Outputs{std::move(out)};
}

// Clip(x, min, max): bounds as optional inputs from opset 11 on, attributes before; integers stay integers.
absl::StatusOr<Outputs> EvaluateClip(const EvalCall& c) {
  const KnownValue& x = c.in(0);
  double lo = -std::numeric_limits<double>::infinity(), hi = std::numeric_limits<double>::infinity();
  std::optional<int64_t> int_lo, int_hi;  // integer bounds, compared exactly
  if (c.opset() < 11) {
    CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"min", "max"}));
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    CONVOY_ASSIGN_OR_RETURN(float min_attr, c.attrs().Float("min", -std::numeric_limits<float>::infinity()));
    CONVOY_ASSIGN_OR_RETURN(float max_attr, c.attrs().Float("max", std::numeric_limits<float>::infinity()));
    lo = min_attr;
    hi = max_attr;
  } else {
    CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 3));
    for (int i = 1; i < c.num_inputs(); ++i) {
      if (!c.has(i)) continue;
      CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(i));
      if (c.in(i).size() != 1) return c.Error(absl::StrCat(c.InputLabel(i), " must be a scalar, got ", c.in(i).Describe()));
      (i == 1 ? lo : hi) = ElementAsDouble(c.in(i), 0);
      if (c.in(i).is_int()) (i == 1 ? int_lo : int_hi) = c.in(i).ints[0];
    }
  }
  CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(0));
  KnownValue out = EmptyLike(x.type, x.shape);
  for (int64_t e = 0; e < x.size(); ++e) {
    if (x.is_int()) {
      int64_t v = x.ints[e];
      if (int_lo) {
        v = std::max(v, *int_lo);
      } else if (static_cast<double>(v) < lo) {
        CONVOY_ASSIGN_OR_RETURN(v, TruncateToInt(c, std::ceil(lo)));
      }
      if (int_hi) {
        v = std::min(v, *int_hi);
      } else if (static_cast<double>(v) > hi) {
        CONVOY_ASSIGN_OR_RETURN(v, TruncateToInt(c, std::floor(hi)));
      }
      out.ints.push_back(v);
    } else {
      const double v = x.floats[e];
      out.floats.push_back(RoundToType(x.type, std::isnan(v) ? v : std::min(std::max(v, lo), hi)));
    }
  }
  return Outputs{std::move(out)};
}

absl::StatusOr<Outputs> EvaluateWhere(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  const KnownValue &cond = c.in(0), &x = c.in(1), &y = c.in(2);
  if (cond.type != T::BOOL) return c.Error(absl::StrCat(c.InputLabel(0), " must be BOOL, got ", cond.Describe()));
  if (x.is_int() != y.is_int()) {
    return c.Error(absl::StrCat("inputs 1 and 2 differ in type: ", x.Describe(), " and ", y.Describe()));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(c, {cond.shape, x.shape, y.shape}));
  CONVOY_ASSIGN_OR_RETURN(int64_t count, c.CheckedElementCount(shape));
  const std::vector<int64_t> sc = BroadcastSourceIndices(cond.shape, shape), sx = BroadcastSourceIndices(x.shape, shape),
                             sy = BroadcastSourceIndices(y.shape, shape);
  KnownValue out = EmptyLike(x.type, shape);
  for (int64_t e = 0; e < count; ++e) {
    const bool take_x = cond.ints[sc[e]] != 0;
    if (out.is_int()) {
      out.ints.push_back(take_x ? x.ints[sx[e]] : y.ints[sy[e]]);
    } else {
      out.floats.push_back(take_x ? x.floats[sx[e]] : y.floats[sy[e]]);
    }
  }
  return Outputs{std::move(out)};
}

absl::StatusOr<Outputs> EvaluateCast(const EvalCall& c) {
  int64_t to = 0;
  if (c.op() == "CastLike") {
    CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"saturate"}));
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
    to = c.in(1).type;
  } else {
    CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"to", "saturate"}));
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    CONVOY_ASSIGN_OR_RETURN(to, c.attrs().Int("to", 0));
  }
  const int32_t type = static_cast<int32_t>(to);
  if (!KnownValue::IsIntegerOnnxType(type) && !KnownValue::IsFloatOnnxType(type)) {
    return c.Unsupported(absl::StrCat("cast to element type ", to, " (only floating-point, integer and BOOL types)"));
  }
  const KnownValue& x = c.in(0);
  // The batch stand-in survives only a cast to INT64 (a no-op for shapes); any other target would change it.
  if (type != T::INT64 || !x.is_int()) CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(0));
  KnownValue out = EmptyLike(type, x.shape);
  for (int64_t e = 0; e < x.size(); ++e) {
    if (out.is_int()) {
      int64_t v = 0;
      if (x.is_int()) {
        v = x.ints[e];
      } else if (type == T::BOOL) {
        v = x.floats[e] != 0.0f;
      } else {
        CONVOY_ASSIGN_OR_RETURN(v, TruncateToInt(c, x.floats[e]));
      }
      out.ints.push_back(WrapToType(type, v));
    } else {
      out.floats.push_back(RoundToType(type, ElementAsDouble(x, e)));
    }
  }
  return Outputs{std::move(out)};
}

// ReduceSum / ReduceProd / ReduceMin / ReduceMax over `axes` (an attribute, or input 1 as ReduceSum has from
// opset 13); no axes reduces everything unless noop_with_empty_axes.
absl::StatusOr<Outputs> EvaluateReduce(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axes", "keepdims", "noop_with_empty_axes"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(0));
  const KnownValue& x = c.in(0);
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, c.attrs().Ints("axes", {}));
  if (c.has(1)) {
    CONVOY_ASSIGN_OR_RETURN(axes, c.Ints(1));
  }
  CONVOY_ASSIGN_OR_RETURN(int64_t keepdims, c.attrs().Int("keepdims", 1));
  CONVOY_ASSIGN_OR_RETURN(int64_t noop, c.attrs().Int("noop_with_empty_axes", 0));
  if (axes.empty() && noop) return Outputs{x};
  std::set<int64_t> reduced;
  for (int64_t axis : axes) {
    CONVOY_ASSIGN_OR_RETURN(int64_t a, c.NormalizeAxis(axis, rank, "axis"));
    reduced.insert(a);
  }
  if (axes.empty()) {
    for (int64_t d = 0; d < rank; ++d) reduced.insert(d);
  }
  Shape kept_shape, out_shape;
  for (int64_t d = 0; d < rank; ++d) {
    kept_shape.push_back(reduced.count(d) ? 1 : x.shape[d]);
    if (!reduced.count(d) || keepdims) out_shape.push_back(kept_shape.back());
  }
  const int64_t out_count = ElementCount(kept_shape);
  const std::string& op = c.op();
  if (x.size() == 0 && (op == "ReduceMin" || op == "ReduceMax")) return c.Error("reduction over no elements");
  // Accumulate each input element into the output element it reduces to.
  const std::vector<int64_t> out_strides = RowMajorStrides(kept_shape);
  std::vector<double> acc_f(out_count, op == "ReduceProd" ? 1.0 : 0.0);
  std::vector<int64_t> acc_i(out_count, op == "ReduceProd" ? 1 : 0);
  std::vector<bool> seen(out_count, false);
  const std::vector<int64_t> target = MapCoordinates(x.shape, [&](const std::vector<int64_t>& coord) {
    int64_t o = 0;
    for (int64_t d = 0; d < rank; ++d) o += (reduced.count(d) ? 0 : coord[d]) * out_strides[d];
    return o;
  });
  for (int64_t e = 0; e < x.size(); ++e) {
    const int64_t o = target[e];
    const bool first = !seen[o];
    seen[o] = true;
    if (x.is_int()) {
      const int64_t v = x.ints[e];
      int64_t& a = acc_i[o];
      a = op == "ReduceSum" ? WrapAdd(a, v) : op == "ReduceProd" ? WrapMul(a, v)
          : first ? v : op == "ReduceMin" ? std::min(a, v) : std::max(a, v);
    } else {
      const double v = x.floats[e];
      double& a = acc_f[o];
      a = op == "ReduceSum" ? a + v : op == "ReduceProd" ? a * v
          : first ? v : op == "ReduceMin" ? std::min(a, v) : std::max(a, v);
    }
  }
  KnownValue out = EmptyLike(x.type, out_shape);
  for (int64_t o = 0; o < out_count; ++o) {
    if (out.is_int()) {
      out.ints.push_back(WrapToType(x.type, acc_i[o]));
    } else {
      out.floats.push_back(RoundToType(x.type, acc_f[o]));
    }
  }
  return Outputs{std::move(out)};
}

}  // namespace convoy::repository::constant_eval
