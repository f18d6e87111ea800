// See onnx_constant_evaluator.h. This half holds the dispatch table, the shared helpers and the ops that create or
// move elements; arithmetic, comparisons, Where, Cast and reductions are in onnx_constant_elementwise.cc.
#include "server/repository/onnx_constant_evaluator.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "server/repository/onnx_constant_evaluator_internal.h"

namespace convoy::repository {
namespace constant_eval {

// ---- EvalCall and shared helpers ----------------------------------------------------------------------------------

absl::Status EvalCall::ExpectInputs(int min, int max) const {
  if (num_inputs() < min || num_inputs() > max) {
    return Error(absl::StrCat("expected ", min, "-", max, " inputs, got ", num_inputs()));
  }
  for (int i = 0; i < min; ++i) {
    if (!has(i)) return Error(absl::StrCat("required input ", i, " is empty"));
  }
  return absl::OkStatus();
}

absl::Status EvalCall::Error(const std::string& what) const { return attrs_.Error(what); }

absl::Status EvalCall::Unsupported(const std::string& what) const {
  return absl::UnimplementedError(absl::StrCat(attrs_.label(), ": ", what));
}

std::string EvalCall::InputLabel(int i) const {
  return absl::StrCat("input ", i, " ('", i < node_.input_size() ? node_.input(i) : "", "')");
}

absl::Status EvalCall::RejectBatchStandIn(int i) const {
  if (!has(i) || !in(i).is_int()) return absl::OkStatus();
  for (int64_t v : in(i).ints) {
    if (v == kSymbolicBatchValue) {
      return Unsupported(absl::StrCat(InputLabel(i), " holds the dynamic batch size, which is known only at run "
                                      "time; ", op(), " cannot compute with it at load time (export the model with "
                                      "a fixed batch, or keep the batch dimension out of this computation)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int64_t>> EvalCall::Ints(int i) const {
  if (!has(i)) return Error(absl::StrCat(InputLabel(i), " is missing"));
  if (!in(i).is_int()) {
    return Error(absl::StrCat(InputLabel(i), " must be an integer tensor, got ", in(i).Describe()));
  }
  CONVOY_RETURN_IF_ERROR(RejectBatchStandIn(i));
  return in(i).ints;
}

absl::StatusOr<int64_t> EvalCall::IntScalar(int i) const {
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> v, Ints(i));
  if (v.size() != 1) return Error(absl::StrCat(InputLabel(i), " must hold one value, got ", in(i).Describe()));
  return v[0];
}

absl::StatusOr<int64_t> EvalCall::CheckedElementCount(const Shape& shape) const {
  int64_t count = 1;
  for (int64_t d : shape) {
    if (d < 0) return Error(absl::StrCat("negative dimension in shape ", runtime::ShapeToString(shape)));
    if (d > 0 && count > kMaxEvaluatedElements / d) {
      return Unsupported(absl::StrCat("result shape ", runtime::ShapeToString(shape), " exceeds ",
                                      kMaxEvaluatedElements, " elements"));
    }
    count *= d;
  }
  if (count > kMaxEvaluatedElements) {
    return Unsupported(absl::StrCat("result shape ", runtime::ShapeToString(shape), " exceeds ",
                                    kMaxEvaluatedElements, " elements"));
  }
  return count;
}

absl::StatusOr<int64_t> EvalCall::NormalizeAxis(int64_t axis, int64_t rank, const char* what) const {
  if (axis < -rank || axis >= rank) return Error(absl::StrCat(what, " ", axis, " is out of range for rank ", rank));
  return axis < 0 ? axis + rank : axis;
}

std::vector<int64_t> RowMajorStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d) strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

int64_t ElementCount(const Shape& shape) {
  int64_t count = 1;
  for (int64_t d : shape) count *= d;
  return count;
}

KnownValue EmptyLike(int32_t type, Shape shape) {
  KnownValue v;
  v.type = type;
  v.shape = std::move(shape);
  if (v.is_int()) {
    v.ints.reserve(ElementCount(v.shape));
  } else {
    v.floats.reserve(ElementCount(v.shape));
  }
  return v;
}

KnownValue TakeElements(const KnownValue& src, Shape shape, const std::vector<int64_t>& source) {
  KnownValue out = EmptyLike(src.type, std::move(shape));
  for (int64_t s : source) {
    if (src.is_int()) {
      out.ints.push_back(src.ints[s]);
    } else {
      out.floats.push_back(src.floats[s]);
    }
  }
  return out;
}

absl::StatusOr<Shape> BroadcastShapes(const EvalCall& c, const std::vector<Shape>& shapes) {
  size_t rank = 0;
  for (const Shape& s : shapes) rank = std::max(rank, s.size());
  Shape out(rank, 1);
  for (const Shape& s : shapes) {
    for (size_t i = 0; i < s.size(); ++i) {
      int64_t& o = out[rank - s.size() + i];
      const int64_t d = s[i];
      if (d == o || d == 1) continue;
      if (o != 1) {
        std::vector<std::string> names;
        for (const Shape& t : shapes) names.push_back(runtime::ShapeToString(t));
        return c.Error(absl::StrCat("shapes ", absl::StrJoin(names, ", "), " do not broadcast"));
      }
      o = d;
    }
  }
  return out;
}

std::vector<int64_t> BroadcastSourceIndices(const Shape& in, const Shape& out) {
  const size_t offset = out.size() - in.size();
  const std::vector<int64_t> in_strides = RowMajorStrides(in);
  return MapCoordinates(out, [&](const std::vector<int64_t>& coord) {
    int64_t s = 0;
    for (size_t d = 0; d < in.size(); ++d) {
      if (in[d] != 1) s += coord[d + offset] * in_strides[d];
    }
    return s;
  });
}

namespace {

// ---- ops that create values -----------------------------------------------------------------------------------

absl::StatusOr<Outputs> ConstantOp(const EvalCall& c) {
  const OnnxAttributes& a = c.attrs();
  CONVOY_RETURN_IF_ERROR(a.CheckKnown({"value", "value_float", "value_floats", "value_int", "value_ints",
                                       "sparse_value", "value_string", "value_strings"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(0, 0));
  if (a.Has("value")) {
    CONVOY_ASSIGN_OR_RETURN(const onnx::TensorProto* t, a.TensorAttr("value"));
    CONVOY_ASSIGN_OR_RETURN(KnownValue v, DecodeTensor(*t, a.label()));
    return Outputs{std::move(v)};
  }
  if (a.Has("value_float")) {
    CONVOY_ASSIGN_OR_RETURN(float f, a.Float("value_float", 0));
    return Outputs{KnownValue::Float({}, {f})};
  }
  if (a.Has("value_floats")) {
    CONVOY_ASSIGN_OR_RETURN(std::vector<float> f, a.Floats("value_floats"));
    const int64_t n = static_cast<int64_t>(f.size());
    return Outputs{KnownValue::Float({n}, std::move(f))};
  }
  if (a.Has("value_int")) {
    CONVOY_ASSIGN_OR_RETURN(int64_t i, a.Int("value_int", 0));
    return Outputs{KnownValue::Int64({}, {i})};
  }
  if (a.Has("value_ints")) {
    CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> i, a.Ints("value_ints", {}));
    const int64_t n = static_cast<int64_t>(i.size());
    return Outputs{KnownValue::Int64({n}, std::move(i))};
  }
  if (a.Has("sparse_value") || a.Has("value_string") || a.Has("value_strings")) {
    return c.Unsupported("sparse and string constants are not supported");
  }
  return c.Error("no value attribute");
}

absl::StatusOr<Outputs> ConstantOfShapeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"value"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> shape, c.Ints(0));
  CONVOY_ASSIGN_OR_RETURN(int64_t count, c.CheckedElementCount(shape));
  KnownValue fill = KnownValue::Float({1}, {0.0f});
  if (c.attrs().Has("value")) {
    CONVOY_ASSIGN_OR_RETURN(const onnx::TensorProto* t, c.attrs().TensorAttr("value"));
    CONVOY_ASSIGN_OR_RETURN(fill, DecodeTensor(*t, c.attrs().label()));
    if (fill.size() != 1) return c.Error(absl::StrCat("attribute 'value' must hold one element, got ", fill.Describe()));
  }
  KnownValue out = EmptyLike(fill.type, shape);
  if (out.is_int()) {
    out.ints.assign(count, fill.ints[0]);
  } else {
    out.floats.assign(count, fill.floats[0]);
  }
  return Outputs{std::move(out)};
}

// Range(start, limit, delta): max(ceil((limit - start) / delta), 0) elements start + i * delta.
absl::StatusOr<Outputs> RangeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(3, 3));
  for (int i = 0; i < 3; ++i) {
    CONVOY_RETURN_IF_ERROR(c.RejectBatchStandIn(i));
    if (c.in(i).size() != 1) return c.Error(absl::StrCat(c.InputLabel(i), " must be a scalar, got ", c.in(i).Describe()));
  }
  const KnownValue& start = c.in(0);
  if (start.is_int()) {
    const int64_t s = start.ints[0], limit = c.in(1).ints.at(0), delta = c.in(2).ints.at(0);
    if (delta == 0) return c.Error("delta is 0");
    // ceil(span / delta) in 128 bits: no operand can overflow.
    const __int128 span = static_cast<__int128>(limit) - s;
    __int128 steps = span / delta;
    if (span % delta != 0 && (span > 0) == (delta > 0)) ++steps;
    if (steps > kMaxEvaluatedElements) {
      return c.Unsupported(absl::StrCat("the range from ", s, " to ", limit, " by ", delta, " has more than ",
                                        kMaxEvaluatedElements, " elements"));
    }
    const int64_t n = steps < 0 ? 0 : static_cast<int64_t>(steps);
    KnownValue out = EmptyLike(start.type, {n});
    for (int64_t i = 0; i < n; ++i) out.ints.push_back(static_cast<int64_t>(s + static_cast<__int128>(i) * delta));
    return Outputs{std::move(out)};
  }
  const double s = start.floats[0], limit = c.in(1).floats.at(0), delta = c.in(2).floats.at(0);
  if (delta == 0 || !std::isfinite(s) || !std::isfinite(limit) || !std::isfinite(delta)) {
    return c.Error("start, limit and delta must be finite and delta non-zero");
  }
  const double steps = std::ceil((limit - s) / delta);
  if (steps > static_cast<double>(kMaxEvaluatedElements)) {
    return c.Unsupported(absl::StrCat("the range has ", steps, " elements, more than ", kMaxEvaluatedElements));
  }
  const int64_t n = std::max<int64_t>(0, static_cast<int64_t>(steps));
  KnownValue out = EmptyLike(start.type, {n});
  for (int64_t i = 0; i < n; ++i) out.floats.push_back(static_cast<float>(s + i * delta));
  return Outputs{std::move(out)};
}

// ---- ops on shapes ----------------------------------------------------------------------------------------------

absl::StatusOr<Outputs> ShapeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"start", "end"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  const Shape& x = c.in(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t start, c.attrs().Int("start", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t end, c.attrs().Int("end", rank));
  start = std::clamp<int64_t>(start < 0 ? start + rank : start, 0, rank);
  end = std::clamp<int64_t>(end < 0 ? end + rank : end, 0, rank);
  std::vector<int64_t> dims(x.begin() + start, x.begin() + std::max(start, end));
  const int64_t n = static_cast<int64_t>(dims.size());
  return Outputs{KnownValue::Int64({n}, std::move(dims))};
}

absl::StatusOr<Outputs> SizeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  return Outputs{KnownValue::Int64({}, {c.in(0).size()})};
}

absl::StatusOr<Outputs> IdentityOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  return Outputs{c.in(0)};
}

// Reshape semantics shared by Reshape, Flatten, Squeeze and Unsqueeze: the data is unchanged, the shape replaced.
absl::StatusOr<Outputs> WithShape(const EvalCall& c, Shape shape) {
  CONVOY_ASSIGN_OR_RETURN(int64_t count, c.CheckedElementCount(shape));
  if (count != c.in(0).size()) {
    return c.Error(absl::StrCat("cannot view ", c.in(0).Describe(), " as ", runtime::ShapeToString(shape)));
  }
  KnownValue out = c.in(0);
  out.shape = std::move(shape);
  return Outputs{std::move(out)};
}

absl::StatusOr<Outputs> ReshapeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"allowzero", "shape"}));
  std::vector<int64_t> target;
  if (c.opset() < 5) {
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    CONVOY_ASSIGN_OR_RETURN(target, c.attrs().Ints("shape", {}));
  } else {
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
    CONVOY_ASSIGN_OR_RETURN(target, c.Ints(1));
  }
  CONVOY_ASSIGN_OR_RETURN(int64_t allow_zero, c.attrs().Int("allowzero", 0));
  const Shape& x = c.in(0).shape;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == 0 && !allow_zero) {
      if (i >= x.size()) return c.Error(absl::StrCat("shape entry ", i, " is 0 but the input has rank ", x.size()));
      target[i] = x[i];
    }
    if (target[i] == -1) {
      if (infer >= 0) return c.Error("more than one -1 in the target shape");
      infer = static_cast<int>(i);
      continue;
    }
    if (target[i] < 0) return c.Error(absl::StrCat("invalid target dimension ", target[i]));
    known *= target[i];
  }
  if (infer >= 0) {
    if (known == 0 || c.in(0).size() % known != 0) {
      return c.Error(absl::StrCat("cannot infer the -1 of [", absl::StrJoin(target, ","), "] for ", c.in(0).Describe()));
    }
    target[infer] = c.in(0).size() / known;
  }
  return WithShape(c, target);
}

absl::StatusOr<Outputs> FlattenOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  const Shape& x = c.in(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.attrs().Int("axis", 1));
  if (axis < -rank || axis > rank) return c.Error(absl::StrCat("axis ", axis, " is out of range for rank ", rank));
  if (axis < 0) axis += rank;
  return WithShape(c, {ElementCount(Shape(x.begin(), x.begin() + axis)), ElementCount(Shape(x.begin() + axis, x.end()))});
}

// Squeeze/Unsqueeze axes: an attribute before opset 13, an input from 13 on.
absl::StatusOr<std::vector<int64_t>> AxesOf(const EvalCall& c) {
  if (c.opset() < 13) {
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    return c.attrs().Ints("axes", {});
  }
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  if (!c.has(1)) return std::vector<int64_t>{};
  return c.Ints(1);
}

absl::StatusOr<Outputs> UnsqueezeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axes"}));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(c));
  if (axes.empty()) return c.Error("no axes to insert");
  const Shape& x = c.in(0).shape;
  const int64_t out_rank = static_cast<int64_t>(x.size() + axes.size());
  std::set<int64_t> inserted;
  for (int64_t axis : axes) {
    CONVOY_ASSIGN_OR_RETURN(int64_t a, c.NormalizeAxis(axis, out_rank, "axis"));
    if (!inserted.insert(a).second) return c.Error(absl::StrCat("axis ", axis, " is repeated"));
  }
  Shape out;
  size_t next = 0;
  for (int64_t d = 0; d < out_rank; ++d) out.push_back(inserted.count(d) ? 1 : x[next++]);
  return WithShape(c, out);
}

absl::StatusOr<Outputs> SqueezeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axes"}));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, AxesOf(c));
  const Shape& x = c.in(0).shape;
  const int64_t rank = static_cast<int64_t>(x.size());
  std::set<int64_t> dropped;
  for (int64_t axis : axes) {
    CONVOY_ASSIGN_OR_RETURN(int64_t a, c.NormalizeAxis(axis, rank, "axis"));
    if (x[a] != 1) return c.Error(absl::StrCat("cannot squeeze axis ", a, " of extent ", x[a]));
    dropped.insert(a);
  }
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    const bool drop = axes.empty() ? x[d] == 1 : dropped.count(d) > 0;
    if (!drop) out.push_back(x[d]);
  }
  return WithShape(c, out);
}

// ---- ops that move elements -------------------------------------------------------------------------------------

absl::StatusOr<Outputs> GatherOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  const KnownValue& data = c.in(0);
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> indices, c.Ints(1));
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t axis_attr, c.attrs().Int("axis", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.NormalizeAxis(axis_attr, rank, "axis"));
  Shape shape(data.shape.begin(), data.shape.begin() + axis);
  shape.insert(shape.end(), c.in(1).shape.begin(), c.in(1).shape.end());
  shape.insert(shape.end(), data.shape.begin() + axis + 1, data.shape.end());
  CONVOY_RETURN_IF_ERROR(c.CheckedElementCount(shape).status());
  const int64_t outer = ElementCount(Shape(data.shape.begin(), data.shape.begin() + axis));
  const int64_t inner = ElementCount(Shape(data.shape.begin() + axis + 1, data.shape.end()));
  const int64_t extent = data.shape[axis];
  std::vector<int64_t> source;
  source.reserve(ElementCount(shape));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t index : indices) {
      if (index < -extent || index >= extent) {
        return c.Error(absl::StrCat("index ", index, " is out of range for axis ", axis, " of extent ", extent));
      }
      if (index < 0) index += extent;
      for (int64_t i = 0; i < inner; ++i) source.push_back((o * extent + index) * inner + i);
    }
  }
  return Outputs{TakeElements(data, std::move(shape), source)};
}

// Slice with ONNX clamping: for a positive step start and end clamp to [0, dim]; for a negative one start clamps
// to [0, dim - 1] and end to [-1, dim - 1] (so INT64_MIN-style ends run to the beginning).
absl::StatusOr<Outputs> SliceOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"starts", "ends", "axes"}));
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset() < 10) {
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
    CONVOY_ASSIGN_OR_RETURN(starts, c.attrs().Ints("starts", {}));
    CONVOY_ASSIGN_OR_RETURN(ends, c.attrs().Ints("ends", {}));
    CONVOY_ASSIGN_OR_RETURN(axes, c.attrs().Ints("axes", {}));
  } else {
    CONVOY_RETURN_IF_ERROR(c.ExpectInputs(3, 5));
    CONVOY_ASSIGN_OR_RETURN(starts, c.Ints(1));
    CONVOY_ASSIGN_OR_RETURN(ends, c.Ints(2));
    if (c.has(3)) {
      CONVOY_ASSIGN_OR_RETURN(axes, c.Ints(3));
    }
    if (c.has(4)) {
      CONVOY_ASSIGN_OR_RETURN(steps, c.Ints(4));
    }
  }
  const KnownValue& data = c.in(0);
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (axes.empty()) {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size()) {
    return c.Error(absl::StrCat("starts, ends, axes and steps have ", starts.size(), ", ", ends.size(), ", ",
                                axes.size(), " and ", steps.size(), " entries"));
  }
  std::vector<int64_t> begin(rank, 0), step(rank, 1);
  Shape count = data.shape;
  std::set<int64_t> seen;
  for (size_t i = 0; i < starts.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.NormalizeAxis(axes[i], rank, "axis"));
    if (!seen.insert(axis).second) return c.Error(absl::StrCat("axis ", axis, " is sliced twice"));
    if (steps[i] == 0) return c.Error(absl::StrCat("step 0 on axis ", axis));
    const int64_t dim = data.shape[axis];
    // A step longer than the axis takes one element, like one of dim + 1: clamping keeps the index math in range.
    const int64_t st = std::clamp<int64_t>(steps[i], -(dim + 1), dim + 1);
    int64_t s = starts[i], e = ends[i];
    if (s < 0) s += dim;
    if (e < 0) e += dim;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      count[axis] = e > s ? (e - s - 1) / st + 1 : 0;
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      count[axis] = s > e ? (s - e - 1) / -st + 1 : 0;
    }
    begin[axis] = s;
    step[axis] = st;
  }
  const std::vector<int64_t> strides = RowMajorStrides(data.shape);
  const std::vector<int64_t> source = MapCoordinates(count, [&](const std::vector<int64_t>& coord) {
    int64_t s = 0;
    for (int64_t d = 0; d < rank; ++d) s += (begin[d] + coord[d] * step[d]) * strides[d];
    return s;
  });
  return Outputs{TakeElements(data, count, source)};
}

absl::StatusOr<Outputs> ConcatOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axis"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, std::numeric_limits<int>::max()));
  for (int i = 0; i < c.num_inputs(); ++i) {
    if (!c.has(i)) return c.Error(absl::StrCat("input ", i, " is empty"));
  }
  const KnownValue& first = c.in(0);
  const int64_t rank = static_cast<int64_t>(first.shape.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t axis_attr, c.attrs().Int("axis", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.NormalizeAxis(axis_attr, rank, "axis"));
  Shape shape = first.shape;
  shape[axis] = 0;
  for (int i = 0; i < c.num_inputs(); ++i) {
    const KnownValue& v = c.in(i);
    bool compatible = v.shape.size() == first.shape.size() && v.is_int() == first.is_int();
    for (int64_t d = 0; compatible && d < rank; ++d) compatible = d == axis || v.shape[d] == first.shape[d];
    if (!compatible) {
      return c.Error(absl::StrCat(c.InputLabel(i), " ", v.Describe(), " does not concatenate with ",
                                  first.Describe(), " on axis ", axis));
    }
    shape[axis] += v.shape[axis];
  }
  CONVOY_RETURN_IF_ERROR(c.CheckedElementCount(shape).status());
  KnownValue out = EmptyLike(first.type, shape);
  const int64_t outer = ElementCount(Shape(shape.begin(), shape.begin() + axis));
  for (int64_t o = 0; o < outer; ++o) {
    for (int i = 0; i < c.num_inputs(); ++i) {
      const KnownValue& v = c.in(i);
      const int64_t block = ElementCount(Shape(v.shape.begin() + axis, v.shape.end()));
      if (v.is_int()) {
        out.ints.insert(out.ints.end(), v.ints.begin() + o * block, v.ints.begin() + (o + 1) * block);
      } else {
        out.floats.insert(out.floats.end(), v.floats.begin() + o * block, v.floats.begin() + (o + 1) * block);
      }
    }
  }
  return Outputs{std::move(out)};
}

absl::StatusOr<Outputs> SplitOp(const EvalCall& c) {
  // `split` is an attribute before opset 13 and input 1 after; opset 18 adds `num_outputs` (parts of
  // ceil(extent / num_outputs), the last one smaller).
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"axis", "split", "num_outputs"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 2));
  const KnownValue& data = c.in(0);
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  CONVOY_ASSIGN_OR_RETURN(int64_t axis_attr, c.attrs().Int("axis", 0));
  CONVOY_ASSIGN_OR_RETURN(int64_t axis, c.NormalizeAxis(axis_attr, rank, "axis"));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> sizes, c.attrs().Ints("split", {}));
  if (c.has(1)) {
    CONVOY_ASSIGN_OR_RETURN(sizes, c.Ints(1));
  }
  const int64_t parts = c.num_outputs(), extent = data.shape[axis];
  if (c.attrs().Has("num_outputs")) {
    if (c.opset() < 18) {
      return c.Error(absl::StrCat("attribute 'num_outputs' is not part of Split at opset ", c.opset()));
    }
    CONVOY_ASSIGN_OR_RETURN(int64_t num_outputs, c.attrs().Int("num_outputs", 0));
    if (c.has(1)) return c.Error("has both the 'split' input and the 'num_outputs' attribute");
    if (num_outputs != parts) {
      return c.Error(absl::StrCat("num_outputs ", num_outputs, " but the node has ", parts, " outputs"));
    }
    const int64_t chunk = (extent + parts - 1) / parts;
    if (chunk * (parts - 1) >= extent) {
      return c.Error(absl::StrCat("cannot split extent ", extent, " into ", parts, " parts of ", chunk));
    }
    sizes.assign(parts - 1, chunk);
    sizes.push_back(extent - chunk * (parts - 1));
  }
  if (sizes.empty()) {
    if (extent % parts != 0) return c.Error(absl::StrCat("cannot split extent ", extent, " into ", parts, " parts"));
    sizes.assign(parts, extent / parts);
  }
  int64_t total = 0;
  for (int64_t s : sizes) total += s < 0 ? extent + 1 : s;
  if (static_cast<int64_t>(sizes.size()) != parts || total != extent) {
    return c.Error(absl::StrCat("split [", absl::StrJoin(sizes, ","), "] does not cut extent ", extent, " into ",
                                parts, " outputs"));
  }
  const int64_t outer = ElementCount(Shape(data.shape.begin(), data.shape.begin() + axis));
  const int64_t inner = ElementCount(Shape(data.shape.begin() + axis + 1, data.shape.end()));
  Outputs outs;
  int64_t offset = 0;
  for (int64_t size : sizes) {
    Shape shape = data.shape;
    shape[axis] = size;
    std::vector<int64_t> source;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < size * inner; ++i) source.push_back((o * extent + offset) * inner + i);
    }
    outs.push_back(TakeElements(data, shape, source));
    offset += size;
  }
  return outs;
}

absl::StatusOr<Outputs> TransposeOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({"perm"}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(1, 1));
  const KnownValue& data = c.in(0);
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  std::vector<int64_t> reversed;
  for (int64_t d = rank - 1; d >= 0; --d) reversed.push_back(d);
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> perm, c.attrs().Ints("perm", reversed));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(rank);
  for (int64_t d = 0; d < rank; ++d) identity[d] = d;
  if (sorted != identity) {
    return c.Error(absl::StrCat("perm [", absl::StrJoin(perm, ","), "] is not a permutation of rank ", rank));
  }
  Shape shape(rank);
  for (int64_t d = 0; d < rank; ++d) shape[d] = data.shape[perm[d]];
  const std::vector<int64_t> in_strides = RowMajorStrides(data.shape);
  const std::vector<int64_t> source = MapCoordinates(shape, [&](const std::vector<int64_t>& coord) {
    int64_t s = 0;
    for (int64_t d = 0; d < rank; ++d) s += coord[d] * in_strides[perm[d]];
    return s;
  });
  return Outputs{TakeElements(data, shape, source)};
}

absl::StatusOr<Outputs> ExpandOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> target, c.Ints(1));
  CONVOY_ASSIGN_OR_RETURN(Shape shape, BroadcastShapes(c, {c.in(0).shape, target}));
  CONVOY_RETURN_IF_ERROR(c.CheckedElementCount(shape).status());
  return Outputs{TakeElements(c.in(0), shape, BroadcastSourceIndices(c.in(0).shape, shape))};
}

absl::StatusOr<Outputs> TileOp(const EvalCall& c) {
  CONVOY_RETURN_IF_ERROR(c.attrs().CheckKnown({}));
  CONVOY_RETURN_IF_ERROR(c.ExpectInputs(2, 2));
  const KnownValue& data = c.in(0);
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> repeats, c.Ints(1));
  const int64_t rank = static_cast<int64_t>(data.shape.size());
  if (static_cast<int64_t>(repeats.size()) != rank) {
    return c.Error(absl::StrCat("repeats has ", repeats.size(), " entries for rank ", rank));
  }
  Shape shape(rank);
  for (int64_t d = 0; d < rank; ++d) {
    if (repeats[d] < 0) return c.Error(absl::StrCat("negative repeat ", repeats[d]));
    shape[d] = data.shape[d] * repeats[d];
  }
  CONVOY_RETURN_IF_ERROR(c.CheckedElementCount(shape).status());
  const std::vector<int64_t> in_strides = RowMajorStrides(data.shape);
  const std::vector<int64_t> source = MapCoordinates(shape, [&](const std::vector<int64_t>& coord) {
    int64_t s = 0;
    for (int64_t d = 0; d < rank; ++d) s += (coord[d] % data.shape[d]) * in_strides[d];
    return s;
  });
  return Outputs{TakeElements(data, shape, source)};
}

using OpFunction = absl::StatusOr<Outputs> (*)(const EvalCall&);

const std::map<std::string, OpFunction>& OpTable() {
  static const auto* table = new std::map<std::string, OpFunction>{
      {"Constant", ConstantOp},
      {"ConstantOfShape", ConstantOfShapeOp},
      {"Range", RangeOp},
      {"Shape", ShapeOp},
      {"Size", SizeOp},
      {"Identity", IdentityOp},
      {"Reshape", ReshapeOp},
      {"Flatten", FlattenOp},
      {"Unsqueeze", UnsqueezeOp},
      {"Squeeze", SqueezeOp},
      {"Gather", GatherOp},
      {"Slice", SliceOp},
      {"Concat", ConcatOp},
      {"Split", SplitOp},
      {"Transpose", TransposeOp},
      {"Expand", ExpandOp},
      {"Tile", TileOp},
      {"Where", EvaluateWhere},
      {"Clip", EvaluateClip},
      {"Cast", EvaluateCast},
      {"CastLike", EvaluateCast},
      {"ReduceSum", EvaluateReduce},
      {"ReduceProd", EvaluateReduce},
      {"ReduceMin", EvaluateReduce},
      {"ReduceMax", EvaluateReduce},
  };
  return *table;
}

}  // namespace
}  // namespace constant_eval

bool IsConstantEvaluableOp(const std::string& op_type) {
  return constant_eval::OpTable().count(op_type) > 0 || constant_eval::IsElementwiseOp(op_type);
}

absl::StatusOr<std::vector<KnownValue>> EvaluateConstantNode(const onnx::NodeProto& node, const OnnxAttributes& attrs,
                                                             int64_t opset,
                                                             const std::vector<const KnownValue*>& inputs) {
  constant_eval::EvalCall call(node, attrs, opset, inputs);
  absl::StatusOr<std::vector<KnownValue>> outputs;
  auto it = constant_eval::OpTable().find(node.op_type());
  if (it != constant_eval::OpTable().end()) {
    outputs = it->second(call);
  } else if (constant_eval::IsElementwiseOp(node.op_type())) {
    outputs = constant_eval::EvaluateElementwise(call);
  } else {
    return absl::UnimplementedError(absl::StrCat(attrs.label(), ": op '", node.op_type(),
                                                 "' is not evaluated at load time"));
  }
  if (!outputs.ok()) return outputs.status();
  if (static_cast<int>(outputs->size()) < node.output_size()) {
    return attrs.Error(absl::StrCat("has ", node.output_size(), " outputs; the op produces ", outputs->size()));
  }
  outputs->resize(node.output_size());
  return outputs;
}

}  // namespace convoy::repository
