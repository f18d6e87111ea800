// Per-op tests of the load-time evaluator (onnx_constant_evaluator.h). Expected values are the ONNX specification's
// semantics worked out by hand on small inputs (each case says the rule it checks), plus randomized Slice, Transpose
// and broadcasting cases against direct index arithmetic written here. End-to-end agreement with onnxruntime on
// exported models is tests/python/test_padded_exports.py.
#include "server/repository/onnx_constant_evaluator.h"

#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"

namespace convoy::repository {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using runtime::Shape;
using T = onnx::TensorProto;

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

KnownValue I64(Shape shape, std::vector<int64_t> v) { return KnownValue::Int64(std::move(shape), std::move(v)); }
KnownValue F32(Shape shape, std::vector<float> v) { return KnownValue::Float(std::move(shape), std::move(v)); }
KnownValue Typed(int32_t type, Shape shape, std::vector<int64_t> v) {
  KnownValue k = I64(std::move(shape), std::move(v));
  k.type = type;
  return k;
}

// A node under test: op, attributes, inputs; Run() evaluates it.
class NodeUnderTest {
 public:
  explicit NodeUnderTest(const std::string& op, int outputs = 1) {
    node_.set_name("n");
    node_.set_op_type(op);
    for (int i = 0; i < outputs; ++i) node_.add_output("out" + std::to_string(i));
  }
  NodeUnderTest& Input(KnownValue v) {
    node_.add_input("in" + std::to_string(node_.input_size()));
    values_.push_back(std::move(v));
    present_.push_back(true);
    return *this;
  }
  NodeUnderTest& Omitted() {
    node_.add_input("");
    values_.emplace_back();
    present_.push_back(false);
    return *this;
  }
  NodeUnderTest& Int(const char* name, int64_t v) {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  NodeUnderTest& Float(const char* name, float v) {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  NodeUnderTest& Ints(const char* name, const std::vector<int64_t>& v) {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
    return *this;
  }
  NodeUnderTest& TensorInt64(const char* name, int64_t v) {
    auto* a = node_.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(T::INT64);
    a->mutable_t()->add_dims(1);
    a->mutable_t()->add_int64_data(v);
    return *this;
  }
  absl::StatusOr<std::vector<KnownValue>> Run(int64_t opset = 13) const {
    OnnxAttributes attrs(node_, "m.onnx: node 'n' (" + node_.op_type() + ")");
    std::vector<const KnownValue*> inputs;
    for (size_t i = 0; i < values_.size(); ++i) inputs.push_back(present_[i] ? &values_[i] : nullptr);
    return EvaluateConstantNode(node_, attrs, opset, inputs);
  }
  // The single output; fails the test on an error.
  KnownValue Value(int64_t opset = 13) const {
    auto out = Run(opset);
    EXPECT_THAT(out, IsOk());
    return out.ok() ? (*out)[0] : KnownValue{};
  }

 private:
  onnx::NodeProto node_;
  std::vector<KnownValue> values_;
  std::vector<bool> present_;
};

TEST(ConstantEvaluatorTest, ShapeAndSize) {
  KnownValue x = F32({2, 3, 4}, std::vector<float>(24, 1.0f));
  KnownValue s = NodeUnderTest("Shape").Input(x).Value();
  EXPECT_EQ(s.type, T::INT64);
  EXPECT_EQ(s.shape, Shape{3});
  EXPECT_THAT(s.ints, ElementsAre(2, 3, 4));
  // Shape-15 start/end, negative end counts from the back.
  EXPECT_THAT(NodeUnderTest("Shape").Input(x).Int("start", 1).Int("end", -1).Value(15).ints, ElementsAre(3));
  KnownValue size = NodeUnderTest("Size").Input(x).Value();
  EXPECT_EQ(size.shape, Shape{});
  EXPECT_THAT(size.ints, ElementsAre(24));
}

TEST(ConstantEvaluatorTest, GatherScalarAndTensorIndicesWithNegatives) {
  KnownValue shape = I64({4}, {1, 3, 224, 224});
  // A scalar index yields a scalar (rank 0), the usual Shape -> Gather(0).
  KnownValue d = NodeUnderTest("Gather").Input(shape).Input(I64({}, {-1})).Int("axis", 0).Value();
  EXPECT_EQ(d.shape, Shape{});
  EXPECT_THAT(d.ints, ElementsAre(224));
  // Axis 1 of a [2,3] float matrix with indices [2,0]: columns 2 and 0.
  KnownValue m = F32({2, 3}, {0, 1, 2, 3, 4, 5});
  KnownValue g = NodeUnderTest("Gather").Input(m).Input(I64({2}, {2, 0})).Int("axis", 1).Value();
  EXPECT_EQ(g.shape, (Shape{2, 2}));
  EXPECT_THAT(g.floats, ElementsAre(2, 0, 5, 3));
  EXPECT_THAT(NodeUnderTest("Gather").Input(shape).Input(I64({}, {4})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 'n' (Gather): index 4 is out of range")));
}

TEST(ConstantEvaluatorTest, SliceNegativeStepReversesRowsAsTorchPadExportsDo) {
  // torch.onnx writes F.pad's pads as rows [[l,r],[t,b],[0,0],[0,0]] reversed with Slice(-1, INT64_MIN, -1).
  KnownValue rows = I64({4, 2}, {1, 2, 3, 4, 0, 0, 0, 0});
  KnownValue r = NodeUnderTest("Slice")
                     .Input(rows)
                     .Input(I64({1}, {-1}))
                     .Input(I64({1}, {-kInt64Max}))
                     .Input(I64({1}, {0}))
                     .Input(I64({1}, {-1}))
                     .Value();
  EXPECT_EQ(r.shape, (Shape{4, 2}));
  EXPECT_THAT(r.ints, ElementsAre(0, 0, 0, 0, 3, 4, 1, 2));
  // INT64_MIN as the end runs to the beginning too.
  KnownValue r2 = NodeUnderTest("Slice").Input(rows).Input(I64({1}, {3})).Input(I64({1}, {kInt64Min}))
                      .Input(I64({1}, {0})).Input(I64({1}, {-2})).Value();
  EXPECT_THAT(r2.ints, ElementsAre(0, 0, 3, 4));
}

TEST(ConstantEvaluatorTest, SliceStepsClampingAndOpset9Attributes) {
  KnownValue v = I64({10}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto slice = [&](int64_t s, int64_t e, int64_t step) {
    return NodeUnderTest("Slice").Input(v).Input(I64({1}, {s})).Input(I64({1}, {e})).Omitted()
        .Input(I64({1}, {step})).Value().ints;
  };
  EXPECT_THAT(slice(1, 8, 3), ElementsAre(1, 4, 7));
  EXPECT_THAT(slice(-3, 100, 1), ElementsAre(7, 8, 9));         // end clamps to the extent
  EXPECT_THAT(slice(100, -100, -4), ElementsAre(9, 5, 1));      // start clamps to extent - 1
  EXPECT_THAT(slice(2, kInt64Max, kInt64Max), ElementsAre(2));  // a step longer than the axis takes one element
  EXPECT_THAT(slice(5, 5, 1), ElementsAre());
  KnownValue v9 = NodeUnderTest("Slice").Input(v).Ints("starts", {2}).Ints("ends", {-5}).Ints("axes", {0}).Value(9);
  EXPECT_THAT(v9.ints, ElementsAre(2, 3, 4));
  EXPECT_THAT(NodeUnderTest("Slice").Input(v).Input(I64({1}, {0})).Input(I64({1}, {3})).Omitted()
                  .Input(I64({1}, {0})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step 0 on axis 0")));
}

TEST(ConstantEvaluatorTest, SliceMatchesDirectIndexingOnRandomCases) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t rows = 1 + rng() % 6, cols = 1 + rng() % 7;
    std::vector<int64_t> data(rows * cols);
    for (int64_t& x : data) x = static_cast<int64_t>(rng() % 1000);
    std::uniform_int_distribution<int64_t> pos(-9, 9), step_dist(-3, 3);
    const int64_t axis = rng() % 2, dim = axis == 0 ? rows : cols;
    int64_t start = pos(rng), end = pos(rng), step = 0;
    while (step == 0) step = step_dist(rng);
    // The ONNX rule written out directly.
    int64_t s = start < 0 ? start + dim : start, e = end < 0 ? end + dim : end;
    s = step > 0 ? std::clamp<int64_t>(s, 0, dim) : std::clamp<int64_t>(s, 0, dim - 1);
    e = step > 0 ? std::clamp<int64_t>(e, 0, dim) : std::clamp<int64_t>(e, -1, dim - 1);
    std::vector<int64_t> picked;
    for (int64_t i = s; step > 0 ? i < e : i > e; i += step) picked.push_back(i);
    std::vector<int64_t> expected;
    const int64_t out_rows = axis == 0 ? static_cast<int64_t>(picked.size()) : rows;
    const int64_t out_cols = axis == 1 ? static_cast<int64_t>(picked.size()) : cols;
    for (int64_t r = 0; r < out_rows; ++r) {
      for (int64_t c = 0; c < out_cols; ++c) {
        expected.push_back(data[(axis == 0 ? picked[r] : r) * cols + (axis == 1 ? picked[c] : c)]);
      }
    }
    KnownValue out = NodeUnderTest("Slice").Input(I64({rows, cols}, data)).Input(I64({1}, {start}))
                         .Input(I64({1}, {end})).Input(I64({1}, {axis})).Input(I64({1}, {step})).Value();
    ASSERT_EQ(out.shape, (Shape{out_rows, out_cols})) << start << ":" << end << ":" << step << " axis " << axis;
    ASSERT_EQ(out.ints, expected) << start << ":" << end << ":" << step << " axis " << axis;
  }
}

TEST(ConstantEvaluatorTest, ConcatAnyRankAndAxis) {
  KnownValue c1 = NodeUnderTest("Concat").Input(I64({2}, {1, 2})).Input(I64({0}, {})).Input(I64({1}, {3}))
                      .Int("axis", 0).Value();
  EXPECT_THAT(c1.ints, ElementsAre(1, 2, 3));
  KnownValue c2 = NodeUnderTest("Concat").Input(F32({2, 1}, {1, 2})).Input(F32({2, 2}, {3, 4, 5, 6}))
                      .Int("axis", -1).Value();
  EXPECT_EQ(c2.shape, (Shape{2, 3}));
  EXPECT_THAT(c2.floats, ElementsAre(1, 3, 4, 2, 5, 6));
  EXPECT_THAT(NodeUnderTest("Concat").Input(F32({2, 1}, {1, 2})).Input(F32({3, 1}, {1, 2, 3})).Int("axis", 1).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not concatenate")));
}

TEST(ConstantEvaluatorTest, ReshapeZeroCopiesMinusOneInfersAllowZeroKeepsZero) {
  KnownValue x = I64({2, 3, 4}, std::vector<int64_t>(24, 7));
  EXPECT_EQ(NodeUnderTest("Reshape").Input(x).Input(I64({2}, {0, -1})).Value().shape, (Shape{2, 12}));
  EXPECT_EQ(NodeUnderTest("Reshape").Input(x).Input(I64({3}, {-1, 3, 2})).Value().shape, (Shape{4, 3, 2}));
  KnownValue empty = I64({0, 3}, {});
  EXPECT_EQ(NodeUnderTest("Reshape").Input(empty).Input(I64({2}, {3, 0})).Int("allowzero", 1).Value(14).shape,
            (Shape{3, 0}));
  EXPECT_THAT(NodeUnderTest("Reshape").Input(x).Input(I64({2}, {5, -1})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot infer the -1")));
}

TEST(ConstantEvaluatorTest, TransposeMatchesDirectIndexingOnRandomPermutations) {
  std::mt19937 rng(std::random_device{}());
  const Shape shape = {2, 3, 4, 5};
  std::vector<int64_t> data(120);
  for (int64_t& v : data) v = static_cast<int64_t>(rng() % 10000);
  for (int trial = 0; trial < 10; ++trial) {
    std::vector<int64_t> perm = {0, 1, 2, 3};
    std::shuffle(perm.begin(), perm.end(), rng);
    KnownValue t = NodeUnderTest("Transpose").Input(I64(shape, data)).Ints("perm", perm).Value();
    Shape out_shape;
    for (int64_t p : perm) out_shape.push_back(shape[p]);
    ASSERT_EQ(t.shape, out_shape);
    int64_t flat = 0;
    int64_t idx[4];
    for (idx[0] = 0; idx[0] < out_shape[0]; ++idx[0])
      for (idx[1] = 0; idx[1] < out_shape[1]; ++idx[1])
        for (idx[2] = 0; idx[2] < out_shape[2]; ++idx[2])
          for (idx[3] = 0; idx[3] < out_shape[3]; ++idx[3]) {
            int64_t in[4];
            for (int d = 0; d < 4; ++d) in[perm[d]] = idx[d];
            ASSERT_EQ(t.ints[flat++], data[((in[0] * 3 + in[1]) * 4 + in[2]) * 5 + in[3]]);
          }
  }
  // No perm: the axes reversed.
  EXPECT_THAT(NodeUnderTest("Transpose").Input(I64({2, 3}, {0, 1, 2, 3, 4, 5})).Value().ints,
              ElementsAre(0, 3, 1, 4, 2, 5));
}

TEST(ConstantEvaluatorTest, CastTruncatesWrapsRoundsAndRefusesNaN) {
  KnownValue f = F32({4}, {-2.7f, 2.7f, 0.0f, 3e9f});
  KnownValue i64 = NodeUnderTest("Cast").Input(f).Int("to", T::INT64).Value();
  EXPECT_EQ(i64.type, T::INT64);
  EXPECT_THAT(i64.ints, ElementsAre(-2, 2, 0, 3000000000));  // toward zero
  // To INT32, 3e9 wraps as a two's-complement truncation.
  EXPECT_THAT(NodeUnderTest("Cast").Input(f).Int("to", T::INT32).Value().ints,
              ElementsAre(-2, 2, 0, static_cast<int32_t>(int64_t{3000000000})));
  EXPECT_THAT(NodeUnderTest("Cast").Input(f).Int("to", T::BOOL).Value().ints, ElementsAre(1, 1, 0, 1));
  KnownValue back = NodeUnderTest("Cast").Input(I64({2}, {-3, 5})).Int("to", T::FLOAT).Value();
  EXPECT_EQ(back.type, T::FLOAT);
  EXPECT_THAT(back.floats, ElementsAre(-3.0f, 5.0f));
  // FLOAT16 keeps 11 significant bits: 2049 rounds to even (2048).
  EXPECT_THAT(NodeUnderTest("Cast").Input(I64({1}, {2049})).Int("to", T::FLOAT16).Value().floats, ElementsAre(2048.0f));
  EXPECT_THAT(NodeUnderTest("Cast").Input(F32({1}, {NAN})).Int("to", T::INT64).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot be converted to an integer")));
  KnownValue like = NodeUnderTest("CastLike").Input(F32({1}, {7.9f})).Input(Typed(T::UINT8, {0}, {})).Value(15);
  EXPECT_EQ(like.type, T::UINT8);
  EXPECT_THAT(like.ints, ElementsAre(7));
  EXPECT_THAT(NodeUnderTest("Cast").Input(f).Int("to", T::STRING).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("cast to element type 8")));
}

TEST(ConstantEvaluatorTest, ConstantOfShapeAndConstant) {
  KnownValue zeros = NodeUnderTest("ConstantOfShape").Input(I64({2}, {2, 3})).Value();
  EXPECT_EQ(zeros.type, T::FLOAT);
  EXPECT_EQ(zeros.shape, (Shape{2, 3}));
  EXPECT_THAT(zeros.floats, ElementsAreArray(std::vector<float>(6, 0.0f)));
  KnownValue ones = NodeUnderTest("ConstantOfShape").Input(I64({1}, {4})).TensorInt64("value", 1).Value();
  EXPECT_EQ(ones.type, T::INT64);
  EXPECT_THAT(ones.ints, ElementsAre(1, 1, 1, 1));
  EXPECT_EQ(NodeUnderTest("ConstantOfShape").Input(I64({1}, {0})).Value().size(), 0);
  EXPECT_THAT(NodeUnderTest("ConstantOfShape").Input(I64({1}, {-2})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative dimension")));
  EXPECT_THAT(NodeUnderTest("ConstantOfShape").Input(I64({2}, {1 << 20, 1 << 20})).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("exceeds")));
  KnownValue c = NodeUnderTest("Constant").Ints("value_ints", {3, 1, 4}).Value();
  EXPECT_THAT(c.ints, ElementsAre(3, 1, 4));
}

TEST(ConstantEvaluatorTest, SqueezeAndUnsqueezeByInputAndByAttribute) {
  KnownValue scalar = I64({}, {5});
  KnownValue u = NodeUnderTest("Unsqueeze").Input(scalar).Input(I64({1}, {0})).Value(13);
  EXPECT_EQ(u.shape, Shape{1});
  EXPECT_EQ(NodeUnderTest("Unsqueeze").Input(I64({3}, {1, 2, 3})).Ints("axes", {0, -1}).Value(11).shape,
            (Shape{1, 3, 1}));
  KnownValue x = F32({1, 3, 1}, {1, 2, 3});
  EXPECT_EQ(NodeUnderTest("Squeeze").Input(x).Value(13).shape, Shape{3});
  EXPECT_EQ(NodeUnderTest("Squeeze").Input(x).Input(I64({1}, {-1})).Value(13).shape, (Shape{1, 3}));
  EXPECT_THAT(NodeUnderTest("Squeeze").Input(x).Ints("axes", {1}).Run(11),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot squeeze axis 1 of extent 3")));
}

TEST(ConstantEvaluatorTest, RangeIntegerFloatNegativeAndEmpty) {
  auto range = [](KnownValue s, KnownValue l, KnownValue d) {
    return NodeUnderTest("Range").Input(std::move(s)).Input(std::move(l)).Input(std::move(d)).Value(11);
  };
  EXPECT_THAT(range(I64({}, {1}), I64({}, {10}), I64({}, {3})).ints, ElementsAre(1, 4, 7));  // ceil(9/3) = 3
  EXPECT_THAT(range(I64({}, {10}), I64({}, {4}), I64({}, {-2})).ints, ElementsAre(10, 8, 6));
  EXPECT_THAT(range(I64({}, {5}), I64({}, {5}), I64({}, {1})).ints, ElementsAre());
  EXPECT_THAT(range(F32({}, {0.5f}), F32({}, {2.0f}), F32({}, {0.5f})).floats, ElementsAre(0.5f, 1.0f, 1.5f));
  EXPECT_THAT(NodeUnderTest("Range").Input(I64({}, {0})).Input(I64({}, {3})).Input(I64({}, {0})).Run(11),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("delta is 0")));
  EXPECT_THAT(NodeUnderTest("Range").Input(I64({}, {kInt64Min})).Input(I64({}, {kInt64Max})).Input(I64({}, {1})).Run(11),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("more than")));
}

TEST(ConstantEvaluatorTest, ExpandBroadcastsBothWaysAndTileRepeats) {
  KnownValue e = NodeUnderTest("Expand").Input(I64({3, 1}, {1, 2, 3})).Input(I64({3}, {2, 1, 2})).Value();
  EXPECT_EQ(e.shape, (Shape{2, 3, 2}));
  EXPECT_THAT(e.ints, ElementsAre(1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3));
  KnownValue t = NodeUnderTest("Tile").Input(F32({2}, {1, 2})).Input(I64({1}, {3})).Value();
  EXPECT_THAT(t.floats, ElementsAre(1, 2, 1, 2, 1, 2));
  EXPECT_THAT(NodeUnderTest("Expand").Input(I64({3}, {1, 2, 3})).Input(I64({1}, {2})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("do not broadcast")));
}

TEST(ConstantEvaluatorTest, IntegerArithmeticTruncatesWrapsAndRefusesDivisionByZero) {
  auto bin = [](const char* op, int64_t a, int64_t b, int64_t fmod = -1) {
    NodeUnderTest n(op);
    n.Input(I64({}, {a})).Input(I64({}, {b}));
    if (fmod >= 0) n.Int("fmod", fmod);
    return n.Value().ints.at(0);
  };
  EXPECT_EQ(bin("Div", -7, 2), -3);  // toward zero, as onnxruntime
  EXPECT_EQ(bin("Mod", -7, 3), 2);   // fmod=0: the divisor's sign
  EXPECT_EQ(bin("Mod", 7, -3), -2);
  EXPECT_EQ(bin("Mod", -7, 3, 1), -1);  // fmod=1: the dividend's sign
  EXPECT_EQ(bin("Add", kInt64Max, 1), kInt64Min);  // two's complement, no undefined behaviour
  EXPECT_EQ(bin("Mul", kInt64Min, -1), kInt64Min);
  EXPECT_EQ(bin("Div", kInt64Min, -1), kInt64Min);
  EXPECT_EQ(bin("Pow", 3, 4), 81);
  EXPECT_EQ(bin("Sub", 2, 9), -7);
  EXPECT_THAT(NodeUnderTest("Div").Input(I64({}, {1})).Input(I64({}, {0})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("node 'n' (Div): integer division by zero")));
  // INT32 results wrap to 32 bits.
  KnownValue big = Typed(T::INT32, {}, {2147483647});
  KnownValue wrapped = NodeUnderTest("Add").Input(big).Input(Typed(T::INT32, {}, {1})).Value();
  EXPECT_EQ(wrapped.type, T::INT32);
  EXPECT_THAT(wrapped.ints, ElementsAre(-2147483648LL));
}

TEST(ConstantEvaluatorTest, BroadcastingArithmeticMatchesDirectLoops) {
  std::mt19937 rng(std::random_device{}());
  std::uniform_real_distribution<float> dist(-4, 4);
  std::vector<float> a(2 * 3 * 4), b(3 * 1);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    KnownValue out = NodeUnderTest(op).Input(F32({2, 3, 4}, a)).Input(F32({3, 1}, b)).Value();
    ASSERT_EQ(out.shape, (Shape{2, 3, 4})) << op;
    for (int n = 0; n < 2; ++n) {
      for (int c = 0; c < 3; ++c) {
        for (int w = 0; w < 4; ++w) {
          const float x = a[(n * 3 + c) * 4 + w], y = b[c];
          const std::string o = op;
          const float want = o == "Add" ? x + y : o == "Sub" ? x - y : o == "Mul" ? x * y : o == "Div" ? x / y
                             : o == "Max" ? std::max(x, y) : std::min(x, y);
          ASSERT_EQ(out.floats[(n * 3 + c) * 4 + w], want) << op;
        }
      }
    }
  }
}

TEST(ConstantEvaluatorTest, UnaryVariadicAndFloatOps) {
  KnownValue x = F32({6}, {-2.5f, -0.5f, 0.5f, 1.5f, 2.5f, 3.7f});
  EXPECT_THAT(NodeUnderTest("Round").Input(x).Value().floats, ElementsAre(-2, -0.0f, 0, 2, 2, 4));  // halves to even
  EXPECT_THAT(NodeUnderTest("Floor").Input(x).Value().floats, ElementsAre(-3, -1, 0, 1, 2, 3));
  EXPECT_THAT(NodeUnderTest("Ceil").Input(x).Value().floats, ElementsAre(-2, -0.0f, 1, 2, 3, 4));
  EXPECT_THAT(NodeUnderTest("Abs").Input(I64({3}, {-4, 0, 4})).Value().ints, ElementsAre(4, 0, 4));
  EXPECT_THAT(NodeUnderTest("Neg").Input(I64({2}, {-4, 9})).Value().ints, ElementsAre(4, -9));
  EXPECT_THAT(NodeUnderTest("Sign").Input(F32({3}, {-3, 0, 2})).Value().floats, ElementsAre(-1, 0, 1));
  EXPECT_THAT(NodeUnderTest("Sqrt").Input(F32({2}, {4, 2.25f})).Value().floats, ElementsAre(2, 1.5f));
  EXPECT_THAT(NodeUnderTest("Reciprocal").Input(F32({2}, {4, -0.5f})).Value().floats, ElementsAre(0.25f, -2));
  EXPECT_THAT(NodeUnderTest("Max").Input(I64({2}, {1, 8})).Input(I64({}, {5})).Input(I64({2}, {7, 2})).Value().ints,
              ElementsAre(7, 8));
  EXPECT_THAT(NodeUnderTest("Min").Input(I64({2}, {1, 8})).Value().ints, ElementsAre(1, 8));  // one input: itself
  EXPECT_THAT(NodeUnderTest("Sum").Input(F32({2}, {1, 2})).Input(F32({2}, {3, 4})).Input(F32({1}, {10})).Value().floats,
              ElementsAre(14, 16));
  EXPECT_THAT(NodeUnderTest("Mod").Input(F32({1}, {-7})).Input(F32({1}, {3})).Int("fmod", 1).Value().floats,
              ElementsAre(-1));
  EXPECT_THAT(NodeUnderTest("Mod").Input(F32({1}, {-7})).Input(F32({1}, {3})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("needs fmod=1")));
  EXPECT_THAT(NodeUnderTest("Sqrt").Input(I64({1}, {4})).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("Sqrt of integers")));
}

TEST(ConstantEvaluatorTest, ClipAndReluOfIntegersAndFloats) {
  // torch.clamp(pad, min=0) on int64 pads: what torch.onnx writes for "same" padding computed from x.shape.
  KnownValue pads = I64({3}, {-2, 1, 9});
  EXPECT_THAT(NodeUnderTest("Clip").Input(pads).Input(I64({}, {0})).Value(13).ints, ElementsAre(0, 1, 9));
  KnownValue clipped = NodeUnderTest("Clip").Input(pads).Omitted().Input(I64({}, {4})).Value(13);
  EXPECT_EQ(clipped.type, T::INT64);
  EXPECT_THAT(clipped.ints, ElementsAre(-2, 1, 4));
  EXPECT_THAT(NodeUnderTest("Clip").Input(F32({3}, {-2, 0.5f, 9})).Float("min", 0).Float("max", 6).Value(9).floats,
              ElementsAre(0, 0.5f, 6));
  EXPECT_THAT(NodeUnderTest("Relu").Input(pads).Value().ints, ElementsAre(0, 1, 9));
  EXPECT_THAT(NodeUnderTest("Clip").Input(pads).Input(I64({2}, {0, 1})).Run(13),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input 1 ('in1') must be a scalar")));
}

TEST(ConstantEvaluatorTest, ComparisonsLogicAndWhere) {
  KnownValue a = I64({3}, {1, 5, 3}), b = I64({}, {3});
  KnownValue lt = NodeUnderTest("Less").Input(a).Input(b).Value();
  EXPECT_EQ(lt.type, T::BOOL);
  EXPECT_THAT(lt.ints, ElementsAre(1, 0, 0));
  EXPECT_THAT(NodeUnderTest("Equal").Input(a).Input(b).Value().ints, ElementsAre(0, 0, 1));
  EXPECT_THAT(NodeUnderTest("GreaterOrEqual").Input(a).Input(b).Value().ints, ElementsAre(0, 1, 1));
  EXPECT_THAT(NodeUnderTest("Greater").Input(F32({2}, {0.5f, -1})).Input(F32({1}, {0})).Value().ints, ElementsAre(1, 0));
  EXPECT_THAT(NodeUnderTest("LessOrEqual").Input(a).Input(b).Value().ints, ElementsAre(1, 0, 1));
  KnownValue p = Typed(T::BOOL, {2}, {1, 0}), q = Typed(T::BOOL, {2}, {1, 1});
  EXPECT_THAT(NodeUnderTest("And").Input(p).Input(q).Value().ints, ElementsAre(1, 0));
  EXPECT_THAT(NodeUnderTest("Or").Input(p).Input(q).Value().ints, ElementsAre(1, 1));
  EXPECT_THAT(NodeUnderTest("Xor").Input(p).Input(q).Value().ints, ElementsAre(0, 1));
  EXPECT_THAT(NodeUnderTest("Not").Input(p).Value().ints, ElementsAre(0, 1));
  EXPECT_THAT(NodeUnderTest("And").Input(a).Input(a).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("input 0 ('in0') must be BOOL")));
  // Where broadcasts its three inputs: cond [2,1], x [1,3], y scalar.
  KnownValue w = NodeUnderTest("Where").Input(Typed(T::BOOL, {2, 1}, {1, 0})).Input(I64({1, 3}, {7, 8, 9}))
                     .Input(I64({}, {-1})).Value();
  EXPECT_EQ(w.shape, (Shape{2, 3}));
  EXPECT_THAT(w.ints, ElementsAre(7, 8, 9, -1, -1, -1));
}

TEST(ConstantEvaluatorTest, Reductions) {
  KnownValue x = I64({2, 3}, {1, 2, 3, 4, 5, 6});
  KnownValue prod = NodeUnderTest("ReduceProd").Input(x).Int("keepdims", 0).Value();
  EXPECT_EQ(prod.shape, Shape{});
  EXPECT_THAT(prod.ints, ElementsAre(720));
  KnownValue sum = NodeUnderTest("ReduceSum").Input(x).Input(I64({1}, {1})).Value(13);
  EXPECT_EQ(sum.shape, (Shape{2, 1}));
  EXPECT_THAT(sum.ints, ElementsAre(6, 15));
  EXPECT_THAT(NodeUnderTest("ReduceMax").Input(x).Ints("axes", {0}).Int("keepdims", 0).Value(11).ints,
              ElementsAre(4, 5, 6));
  EXPECT_THAT(NodeUnderTest("ReduceMin").Input(F32({3}, {2, -1, 5})).Value(11).floats, ElementsAre(-1));
}

TEST(ConstantEvaluatorTest, SplitOutputsAndSizes) {
  auto out = NodeUnderTest("Split", 2).Input(I64({5}, {1, 2, 3, 4, 5})).Input(I64({2}, {2, 3})).Run(13);
  ASSERT_THAT(out, IsOk());
  EXPECT_THAT((*out)[0].ints, ElementsAre(1, 2));
  EXPECT_THAT((*out)[1].ints, ElementsAre(3, 4, 5));
  auto halves = NodeUnderTest("Split", 2).Input(F32({2, 2}, {1, 2, 3, 4})).Int("axis", 1).Run(11);
  ASSERT_THAT(halves, IsOk());
  EXPECT_THAT((*halves)[0].floats, ElementsAre(1, 3));
  EXPECT_THAT((*halves)[1].floats, ElementsAre(2, 4));
}

// Opset 18: Split's num_outputs cuts parts of ceil(extent / n), the last one smaller; Reduce* take axes as input 1.
TEST(ConstantEvaluatorTest, Opset18SplitNumOutputsAndReduceAxesInput) {
  auto out = NodeUnderTest("Split", 3).Input(I64({7}, {1, 2, 3, 4, 5, 6, 7})).Int("num_outputs", 3).Run(18);
  ASSERT_THAT(out, IsOk());
  EXPECT_THAT((*out)[0].ints, ElementsAre(1, 2, 3));
  EXPECT_THAT((*out)[1].ints, ElementsAre(4, 5, 6));
  EXPECT_THAT((*out)[2].ints, ElementsAre(7));
  EXPECT_THAT(NodeUnderTest("Split", 2).Input(I64({4}, {1, 2, 3, 4})).Int("num_outputs", 3).Run(18),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'n' (Split): num_outputs 3 but the node has 2 outputs")));
  EXPECT_THAT(NodeUnderTest("Split", 2).Input(I64({4}, {1, 2, 3, 4})).Int("num_outputs", 2).Run(17),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("node 'n' (Split): attribute 'num_outputs' is not part of Split at opset 17")));
  KnownValue x = I64({2, 3}, {1, 5, 3, 4, 2, 6});
  EXPECT_THAT(NodeUnderTest("ReduceMax").Input(x).Input(I64({1}, {-1})).Int("keepdims", 0).Value(18).ints,
              ElementsAre(5, 6));
  EXPECT_THAT(NodeUnderTest("ReduceMin").Input(x).Input(I64({1}, {0})).Value(20).ints, ElementsAre(1, 2, 3));
  EXPECT_THAT(NodeUnderTest("ReduceProd").Input(x).Input(I64({0}, {})).Int("noop_with_empty_axes", 1).Value(18).ints,
              ElementsAre(1, 5, 3, 4, 2, 6));
}

TEST(ConstantEvaluatorTest, DynamicBatchStandInMovesButNeverComputes) {
  KnownValue shape = I64({4}, {kSymbolicBatchValue, 3, 8, 8});
  // Gather and Concat only move the stand-in: Reshape(x, [N, -1]) stays expressible.
  KnownValue n = NodeUnderTest("Gather").Input(shape).Input(I64({1}, {0})).Value();
  EXPECT_THAT(n.ints, ElementsAre(kSymbolicBatchValue));
  KnownValue target = NodeUnderTest("Concat").Input(n).Input(I64({1}, {-1})).Value();
  EXPECT_THAT(target.ints, ElementsAre(kSymbolicBatchValue, -1));
  EXPECT_THAT(NodeUnderTest("Cast").Input(target).Int("to", T::INT64).Value().ints,
              ElementsAre(kSymbolicBatchValue, -1));
  // Arithmetic on it fails, naming the node, the op and the input.
  EXPECT_THAT(NodeUnderTest("Mul").Input(n).Input(I64({1}, {2})).Run(),
              StatusIs(absl::StatusCode::kUnimplemented,
                       HasSubstr("node 'n' (Mul): input 0 ('in0') holds the dynamic batch size")));
  EXPECT_THAT(NodeUnderTest("ConstantOfShape").Input(shape).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("(ConstantOfShape): input 0 ('in0') holds")));
  EXPECT_THAT(NodeUnderTest("Cast").Input(n).Int("to", T::FLOAT).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("holds the dynamic batch size")));
}

TEST(ConstantEvaluatorTest, TorchPadsSubgraphEndToEnd) {
  // F.pad(x, [l=1, r=2, t=3, b=4]) on a 4-D tensor as torch.onnx (opset 13) writes it, evaluated node by node.
  KnownValue torch_pads = I64({4}, {1, 2, 3, 4});
  KnownValue zeros = NodeUnderTest("ConstantOfShape").Input(I64({1}, {4})).TensorInt64("value", 0).Value();
  KnownValue all = NodeUnderTest("Concat").Input(torch_pads).Input(zeros).Int("axis", 0).Value();
  KnownValue rows = NodeUnderTest("Reshape").Input(all).Input(I64({2}, {-1, 2})).Value();
  KnownValue reversed = NodeUnderTest("Slice").Input(rows).Input(I64({1}, {-1})).Input(I64({1}, {-kInt64Max}))
                            .Input(I64({1}, {0})).Input(I64({1}, {-1})).Value();
  KnownValue columns = NodeUnderTest("Transpose").Input(reversed).Ints("perm", {1, 0}).Value();
  KnownValue flat = NodeUnderTest("Reshape").Input(columns).Input(I64({1}, {-1})).Value();
  KnownValue pads = NodeUnderTest("Cast").Input(flat).Int("to", T::INT64).Value();
  // ONNX order: begins of N, C, H, W, then ends: [0, 0, t, l, 0, 0, b, r].
  EXPECT_EQ(pads.shape, Shape{8});
  EXPECT_THAT(pads.ints, ElementsAre(0, 0, 3, 1, 0, 0, 4, 2));
}

TEST(ConstantEvaluatorTest, RejectsUnknownAttributesAndWrongInputCounts) {
  EXPECT_THAT(NodeUnderTest("Add").Input(I64({}, {1})).Input(I64({}, {2})).Int("broadcast", 1).Run(),
              StatusIs(absl::StatusCode::kUnimplemented, HasSubstr("attribute 'broadcast' is not supported")));
  EXPECT_THAT(NodeUnderTest("Add").Input(I64({}, {1})).Run(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("expected 2-2 inputs, got 1")));
  EXPECT_TRUE(IsConstantEvaluableOp("Where"));
  EXPECT_FALSE(IsConstantEvaluableOp("Conv"));
}

}  // namespace
}  // namespace convoy::repository
