// Checks the reference concat, split, channel shuffle, pad and convert through identities that do not reuse their
// code: split inverts concat, shuffling by g then by C/g restores the input, padding's interior is the input and its
// border follows each mode's rule, NCHW -> NHWC -> NCHW round-trips, and a transpose by a permutation and then by
// its inverse restores the input.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::reference {
namespace {

using ::convoy::testing::IsOk;
using ::convoy::testing::RandomFloats;
using ::convoy::testing::StatusIs;
using ::testing::HasSubstr;

TEST(ReferenceDataMovementTest, SplitInvertsConcatWithUnevenChannels) {
  for (Layout layout : {Layout::kNCHW, Layout::kNHWC}) {
    ConcatProblem concat;
    concat.n = 2, concat.h = 3, concat.w = 5, concat.channels = {3, 1, 6}, concat.layout = layout;
    const int plane = concat.n * concat.h * concat.w;
    std::vector<std::vector<float>> inputs;
    for (int c : concat.channels) inputs.push_back(RandomFloats(plane * c, 10 + c));
    std::vector<float> joined(plane * concat.total_channels());
    ConcatArgs concat_args;
    for (auto& in : inputs) concat_args.inputs.push_back(in.data());
    concat_args.y = joined.data();
    ASSERT_THAT(Concat(concat, concat_args), IsOk());
    // Channel 3 of the output is input 1's only channel.
    const TensorDesc jd = TensorDesc::Image(DataType::kFloat32, 2, 10, 3, 5, layout);
    EXPECT_EQ(joined[jd.Offset4(1, 3, 2, 4)], inputs[1][TensorDesc::Image(DataType::kFloat32, 2, 1, 3, 5, layout)
                                                             .Offset4(1, 0, 2, 4)]);
    SplitProblem split;
    split.n = 2, split.h = 3, split.w = 5, split.channels = concat.channels, split.layout = layout;
    std::vector<std::vector<float>> outputs;
    SplitArgs split_args{joined.data(), {}};
    for (int c : split.channels) outputs.emplace_back(plane * c, -1.0f);
    for (auto& out : outputs) split_args.outputs.push_back(out.data());
    ASSERT_THAT(Split(split, split_args), IsOk());
    for (size_t i = 0; i < inputs.size(); ++i) EXPECT_EQ(outputs[i], inputs[i]) << "part " << i;
  }
}

TEST(ReferenceDataMovementTest, ShuffleByGroupsThenByChannelsPerGroupRestoresTheInput) {
  ChannelShuffleProblem p;
  p.n = 2, p.c = 12, p.h = 3, p.w = 2, p.groups = 3, p.layout = Layout::kNHWC;
  const std::vector<float> x = RandomFloats(p.n * p.c * p.h * p.w, 20);
  std::vector<float> shuffled(x.size()), restored(x.size());
  ASSERT_THAT(ChannelShuffle(p, ChannelShuffleArgs{x.data(), shuffled.data()}), IsOk());
  const TensorDesc d = TensorDesc::Image(DataType::kFloat32, 2, 12, 3, 2, p.layout);
  EXPECT_EQ(shuffled[d.Offset4(1, 1, 2, 1)], x[d.Offset4(1, 4, 2, 1)]);  // y channel 1 = j 0 of group 1 = x channel 4
  ChannelShuffleProblem inverse = p;
  inverse.groups = p.c / p.groups;
  ASSERT_THAT(ChannelShuffle(inverse, ChannelShuffleArgs{shuffled.data(), restored.data()}), IsOk());
  EXPECT_EQ(restored, x);
}

TEST(ReferenceDataMovementTest, TransposeByPermThenByItsInverseRestoresTheInput) {
  TransposeProblem p;
  p.dims = {2, 3, 4, 5}, p.perm = {0, 2, 3, 1};  // NCHW -> NHWC
  const std::vector<float> x = RandomFloats(120, 40);
  std::vector<float> y(x.size()), restored(x.size());
  ASSERT_THAT(Transpose(p, TransposeArgs{x.data(), y.data()}), IsOk());
  const TensorDesc nchw = TensorDesc::Image(DataType::kFloat32, 2, 3, 4, 5, Layout::kNCHW);
  const TensorDesc nhwc = TensorDesc::Image(DataType::kFloat32, 2, 3, 4, 5, Layout::kNHWC);
  EXPECT_EQ(y[nhwc.Offset4(1, 2, 3, 4)], x[nchw.Offset4(1, 2, 3, 4)]);
  EXPECT_EQ(y[nhwc.Offset4(0, 1, 2, 0)], x[nchw.Offset4(0, 1, 2, 0)]);
  TransposeProblem inverse;
  inverse.dims = p.output_dims(), inverse.perm = {0, 3, 1, 2};
  ASSERT_THAT(Transpose(inverse, TransposeArgs{y.data(), restored.data()}), IsOk());
  EXPECT_EQ(restored, x);
  p.perm = {0, 1, 2};
  EXPECT_THAT(Transpose(p, TransposeArgs{x.data(), y.data()}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("perm has 3 entries for rank 4")));
}

TEST(ReferenceDataMovementTest, PadBordersFollowEachMode) {
  PadProblem p;
  p.n = 1, p.c = 2, p.h = 4, p.w = 5, p.pad_top = 2, p.pad_bottom = 1, p.pad_left = 3, p.pad_right = 2, p.value = 7.5f;
  const std::vector<float> x = RandomFloats(p.n * p.c * p.h * p.w, 30);
  const TensorDesc xd = TensorDesc::Image(DataType::kFloat32, 1, 2, 4, 5, Layout::kNCHW);
  const TensorDesc yd = TensorDesc::Image(DataType::kFloat32, 1, 2, p.out_h(), p.out_w(), Layout::kNCHW);
  for (PadMode mode : {PadMode::kConstant, PadMode::kReflect, PadMode::kEdge}) {
    p.mode = mode;
    std::vector<float> y(yd.num_elements());
    testing::PoisonWithNaN(y.data(), DataType::kFloat32, y.size());
    ASSERT_THAT(Pad(p, PadArgs{x.data(), y.data()}), IsOk());
    for (int c = 0; c < 2; ++c) {
      for (int i = 0; i < p.h; ++i)
        for (int j = 0; j < p.w; ++j) ASSERT_EQ(y[yd.Offset4(0, c, i + 2, j + 3)], x[xd.Offset4(0, c, i, j)]);
      const float corner = y[yd.Offset4(0, c, 0, 0)];  // padded (-2, -3)
      const float bottom_right = y[yd.Offset4(0, c, p.out_h() - 1, p.out_w() - 1)];  // padded (4, 6)
      if (mode == PadMode::kConstant) {
        EXPECT_EQ(corner, 7.5f);
        EXPECT_EQ(bottom_right, 7.5f);
      } else if (mode == PadMode::kReflect) {
        EXPECT_EQ(corner, x[xd.Offset4(0, c, 2, 3)]);
        EXPECT_EQ(bottom_right, x[xd.Offset4(0, c, 2, 2)]);
      } else {
        EXPECT_EQ(corner, x[xd.Offset4(0, c, 0, 0)]);
        EXPECT_EQ(bottom_right, x[xd.Offset4(0, c, 3, 4)]);
      }
    }
  }
  p.mode = PadMode::kReflect, p.pad_left = 5;
  std::vector<float> y(1000);
  EXPECT_THAT(Pad(p, PadArgs{x.data(), y.data()}), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("reflect")));
}

TEST(ReferenceDataMovementTest, ConvertRoundTripsLayoutsAndRoundsToHalf) {
  ConvertProblem to_nhwc;
  to_nhwc.n = 2, to_nhwc.c = 3, to_nhwc.h = 4, to_nhwc.w = 5;
  to_nhwc.dst_layout = Layout::kNHWC, to_nhwc.dst_dtype = DataType::kFloat16;
  const std::vector<float> x = RandomFloats(2 * 3 * 4 * 5, 40);
  std::vector<uint16_t> half(x.size());
  ASSERT_THAT(Convert(to_nhwc, ConvertArgs{x.data(), half.data()}), IsOk());
  const TensorDesc nhwc = TensorDesc::Image(DataType::kFloat16, 2, 3, 4, 5, Layout::kNHWC);
  EXPECT_EQ(half[nhwc.Offset4(1, 2, 3, 1)], FloatToHalfBits(x[((1 * 3 + 2) * 4 + 3) * 5 + 1]));
  ConvertProblem back = to_nhwc;
  std::swap(back.src_layout, back.dst_layout);
  std::swap(back.src_dtype, back.dst_dtype);
  std::vector<float> restored(x.size());
  ASSERT_THAT(Convert(back, ConvertArgs{half.data(), restored.data()}), IsOk());
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(restored[i], HalfBitsToFloat(FloatToHalfBits(x[i]))) << i;
}

// ArgMax against an independent definition (std::max_element and a reverse scan), on integer-valued data full of
// ties, with every index type; an index past UINT8's range is refused.
TEST(ReferenceDataMovementTest, ArgMaxPicksTheFirstOrLastMaximum) {
  ArgMaxProblem p;
  p.outer = 3, p.axis = 7, p.inner = 5;
  std::vector<float> x = RandomFloats(p.outer * p.axis * p.inner, 50);
  for (float& v : x) v = std::floor(v * 2.0f);  // values in {-2, -1, 0, 1}: ties
  for (bool last : {false, true}) {
    for (DataType index_dtype : {DataType::kUInt8, DataType::kInt32, DataType::kInt64, DataType::kFloat32}) {
      p.select_last_index = last, p.index_dtype = index_dtype;
      std::vector<int64_t> y(p.outer * p.inner, -1);  // large enough for every index type
      ASSERT_THAT(ArgMax(p, ArgMaxArgs{x.data(), y.data()}), IsOk());
      for (int64_t o = 0; o < p.outer; ++o)
        for (int64_t i = 0; i < p.inner; ++i) {
          std::vector<float> column;
          for (int64_t a = 0; a < p.axis; ++a) column.push_back(x[(o * p.axis + a) * p.inner + i]);
          const int64_t first = std::max_element(column.begin(), column.end()) - column.begin();
          const int64_t last_index = p.axis - 1 - (std::max_element(column.rbegin(), column.rend()) - column.rbegin());
          const int64_t want = last ? last_index : first;
          EXPECT_EQ(LoadAsFloat(y.data(), index_dtype, o * p.inner + i), static_cast<float>(want))
              << DataTypeName(index_dtype) << " last=" << last << " at " << o << "," << i;
        }
    }
  }
  p.index_dtype = DataType::kUInt8, p.axis = 300;
  EXPECT_THAT(p.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("UINT8 holds indices up to 255")));
}

}  // namespace
}  // namespace convoy::reference
