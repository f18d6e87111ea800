// oneDNN INT8 conv2d against the exact integer reference (reference::QuantizedConv2d), NHWC, on the
// kinds of layers quantized ResNets and MobileNets have (the 3-channel stem, strided 3x3 with asymmetric padding,
// 1x1 with a residual, depthwise, grouped), UINT8 and INT8 sources with nonzero zero points, and every epilogue:
// INT32 bias, per-channel requantization, the residual sum with its own scale and zero point, ReLU, UINT8 / INT8 /
// FP32 outputs with destination zero points. Fresh random data each run (the seed is printed on failure).
//
// Tolerance. The accumulation is exact on both sides; the requantization is one FP32 product float(acc + bias) *
// scale[k] (plus the residual term) rounded half to even, then the zero point. oneDNN may form that value in another
// order (the bias converted and added in FP32, the residual term fused with an FMA), so where the exact value lies
// within an FP32 rounding of a tie, it may round to the neighbouring step. Asserted: every quantized output within one
// step of the reference, and at most 0.1 % of a problem's outputs (at least 2) one step off; FP32 outputs within 1e-5
// relative. Measured over 8 runs of the 42 problems (AVX-512 VNNI Xeon, brgconv and jit_int8 kernels) when oneDNN
// added the zero point before rounding: 39 runs exact, 3 with one output of 1728 to 8192 one step off; since the
// algorithm rounds first (an eltwise_round post-op): 5 runs of 5 exact.
#include "kernels/cpu/quantized_conv2d_onednn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/status_matchers.h"
#include "kernels/common/thread_pool.h"
#include "kernels/cpu/reference/reference_ops.h"

namespace convoy::cpu {
namespace {

using ::convoy::testing::IsOk;

QuantizedConv2dProblem Conv(int n, int c, int h, int w, int k, int r, int stride, int pad, int groups, Layout layout) {
  QuantizedConv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.groups = groups;
  p.layout = layout;
  return p;
}

std::vector<QuantizedConv2dProblem> Shapes(Layout layout) {
  QuantizedConv2dProblem asymmetric = Conv(2, 16, 15, 13, 32, 3, 2, 1, 1, layout);  // TF "SAME": more pad after
  asymmetric.pad_top = asymmetric.pad_left = 0;
  return {
      Conv(2, 3, 32, 32, 16, 7, 2, 3, 1, layout),     // the ResNet stem on a 3-channel image
      asymmetric,
      Conv(2, 64, 8, 8, 64, 3, 1, 1, 1, layout),      // ResNet basic block
      Conv(2, 96, 8, 8, 24, 1, 1, 0, 1, layout),      // MobileNetV2 projection (the residual epilogues)
      Conv(1, 48, 12, 12, 48, 3, 2, 1, 48, layout),   // depthwise, stride 2
      Conv(1, 32, 9, 9, 32, 3, 1, 1, 4, layout),      // grouped (8 channels per group)
  };
}

struct EpilogueCase {
  DataType src_type, dst_type;
  QuantizedEpilogue epilogue;
  QuantizedFusedAdd fused_add = QuantizedFusedAdd::kNone;
  QuantizedAddProblem add;
};

// A residual add after the convolution with the quantization of one of ResNet-50's (a QDQ file from onnxruntime's
// quantizer): the conv's output (UINT8, zero point conv_zp) as operand a or b, the residual UINT8 with zero point 0.
EpilogueCase FusedAddCase(QuantizedFusedAdd which, float conv_scale, int conv_zp, float residual_scale, float y_scale,
                          DataType conv_type = DataType::kUInt8, DataType residual_type = DataType::kUInt8) {
  EpilogueCase e{DataType::kUInt8, DataType::kUInt8, {}, which, {}};
  e.epilogue.has_bias = true;
  e.epilogue.dst_zero_point = conv_zp;
  const bool conv_is_a = which == QuantizedFusedAdd::kConvIsA;
  QuantizedAddProblem& q = e.add;
  q.a_type = conv_is_a ? conv_type : residual_type, q.b_type = conv_is_a ? residual_type : conv_type;
  q.a_scale = conv_is_a ? conv_scale : residual_scale, q.b_scale = conv_is_a ? residual_scale : conv_scale;
  q.a_zero_point = conv_is_a ? conv_zp : 0, q.b_zero_point = conv_is_a ? 0 : conv_zp;
  q.y_scale = y_scale;
  return e;
}

// Every epilogue feature at least once, each source type with a nonzero zero point.
std::vector<EpilogueCase> Epilogues() {
  std::vector<EpilogueCase> out;
  auto add = [&out](DataType src, DataType dst, int src_zp, int dst_zp, bool bias, bool relu, bool residual) {
    EpilogueCase e{src, dst, {}};
    e.epilogue.src_zero_point = src_zp, e.epilogue.dst_zero_point = dst_zp;
    e.epilogue.has_bias = bias, e.epilogue.relu = relu;
    if (residual) {
      e.epilogue.residual = ResidualMode::kBeforeActivation;
      e.epilogue.residual_scale = 0.6875f, e.epilogue.residual_zero_point = dst == DataType::kUInt8 ? 111 : -9;
    }
    out.push_back(e);
  };
  add(DataType::kUInt8, DataType::kUInt8, 0, 0, false, false, false);    // plain
  add(DataType::kUInt8, DataType::kUInt8, 128, 0, true, true, false);    // QDQ conv + relu (u8 activations)
  add(DataType::kUInt8, DataType::kUInt8, 97, 131, true, false, false);  // no relu: output zero point mid-range
  add(DataType::kUInt8, DataType::kUInt8, 120, 5, true, true, true);     // ResNet: relu(conv + bias + residual)
  add(DataType::kInt8, DataType::kInt8, -3, -7, true, false, true);      // INT8 activations, residual, no relu
  add(DataType::kInt8, DataType::kUInt8, 0, 0, true, true, false);
  add(DataType::kUInt8, DataType::kFloat32, 140, 0, true, false, false); // dequantized output (the last layer)
  // The fused residual add: the conv as the second operand (always exact), as the first with a quantization whose
  // two FMA orders agree on every pair (ResNet-50's layer1.1), and INT8 tensors around a UINT8 sum.
  out.push_back(FusedAddCase(QuantizedFusedAdd::kConvIsB, 0.0067857676185667515f, 140, 0.0071817971765995026f,
                             0.0046936883591115475f));
  out.push_back(FusedAddCase(QuantizedFusedAdd::kConvIsA, 0.009907187893986702f, 127, 0.0046936883591115475f,
                             0.00786774791777134f));
  out.push_back(FusedAddCase(QuantizedFusedAdd::kConvIsB, 0.05f, -3, 0.04f, 0.07f, DataType::kInt8, DataType::kInt8));
  out.back().epilogue.relu = true;
  return out;
}

// Fills `count` elements of an integer type uniformly over its range.
template <typename T>
std::vector<T> RandomInts(size_t count, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> v(count);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// One problem: random data, the algorithm (filter packed, primitive prepared) against the reference. With
// `fixed_scales` the multipliers go into the problem (epilogue.scales, as plans make it) and args.scale is null, so
// an algorithm that still read it would fail; otherwise they come in args.scale.
absl::Status Check(const QuantizedConv2dAlgorithm& algorithm, QuantizedConv2dProblem p, uint32_t seed,
                   bool fixed_scales) {
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(p));
  std::mt19937 rng(seed);
  ThreadPool pool(2);
  ExecutionContext context{Backend::kCpu, &pool};
  const bool u8_src = p.src_type == DataType::kUInt8;
  const int64_t x_count = p.input_desc().num_elements(), y_count = p.output_desc().num_elements();
  const std::vector<uint8_t> x = RandomInts<uint8_t>(x_count, u8_src ? 0 : -128, u8_src ? 255 : 127, rng);
  const std::vector<int8_t> w = RandomInts<int8_t>(p.filter_elements(), -127, 127, rng);
  const std::vector<int32_t> bias = RandomInts<int32_t>(p.k, -20000, 20000, rng);
  // Multipliers that spread the outputs over the whole quantized range (some saturating): the accumulator's spread is
  // about sqrt(C/g * R * S) * 74 * 73 for uniform operands.
  const double spread = std::sqrt(double(p.c_per_group()) * p.r * p.s) * 74 * 73;
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  std::vector<float> scale(p.k);
  for (float& s : scale) s = static_cast<float>(jitter(rng) * 80 / spread);
  if (fixed_scales) p.epilogue.scales = scale;
  const size_t y_bytes = static_cast<size_t>(y_count) * DataTypeSize(p.dst_type);
  // The residual: y's type for the sum, the add's other operand's for a fused add.
  const DataType residual_type = p.fused_add == QuantizedFusedAdd::kNone  ? p.dst_type
                                 : p.fused_add == QuantizedFusedAdd::kConvIsA ? p.add.b_type
                                                                              : p.add.a_type;
  const bool u8_dst = residual_type == DataType::kUInt8;
  std::vector<uint8_t> residual(y_bytes);
  if (p.dst_type == DataType::kFloat32) {
    for (size_t i = 0; i < residual.size() / 4; ++i) reinterpret_cast<float*>(residual.data())[i] = jitter(rng);
  } else {
    residual = RandomInts<uint8_t>(y_bytes, u8_dst ? 0 : -128, u8_dst ? 255 : 127, rng);
  }
  // The reference first, so the algorithm's output can be poisoned with a value differing from the expected one in
  // every element (FP32: NaN; integers: the bitwise complement): an element the algorithm leaves unwritten fails.
  std::vector<uint8_t> y_reference(y_bytes);
  QuantizedConv2dArgs args{x.data(), w.data(), bias.data(), fixed_scales ? nullptr : scale.data(), residual.data(),
                           y_reference.data()};
  CONVOY_RETURN_IF_ERROR(reference::QuantizedConv2d(p, args));
  std::vector<uint8_t> y(y_bytes);
  for (size_t i = 0; i < y_bytes; ++i) y[i] = p.dst_type == DataType::kFloat32 ? 0xFF : ~y_reference[i];

  CONVOY_ASSIGN_OR_RETURN(HostBuffer workspace, HostBuffer::Allocate(algorithm.WorkspaceBytes(p)));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(p, context));
  CONVOY_ASSIGN_OR_RETURN(HostBuffer packed, HostBuffer::Allocate(std::max<size_t>(algorithm.PackedFilterBytes(p), 1)));
  CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(p, w.data(), packed.data(), context));
  args.w = packed.as<int8_t>();
  args.y = y.data();
  CONVOY_RETURN_IF_ERROR(algorithm.Run(p, args, Workspace{workspace.data(), workspace.size(), state.get()}, context));

  int64_t off_by_one = 0;
  for (int64_t i = 0; i < y_count; ++i) {
    const float a = LoadAsFloat(y.data(), p.dst_type, i), e = LoadAsFloat(y_reference.data(), p.dst_type, i);
    if (p.dst_type == DataType::kFloat32) {
      if (!(std::fabs(a - e) <= 1e-5f * std::max(1.0f, std::fabs(e)))) {
        return absl::InternalError(absl::StrCat("element ", i, ": ", a, " vs reference ", e));
      }
      continue;
    }
    if (a == e) continue;
    if (std::fabs(a - e) > 1.0f) return absl::InternalError(absl::StrCat("element ", i, ": ", a, " vs reference ", e));
    ++off_by_one;
  }
  // A fused add reproduces the separate steps bit for bit: nothing may be off.
  const int64_t allowed = p.fused_add != QuantizedFusedAdd::kNone ? 0 : std::max<int64_t>(2, y_count / 1000);
  if (off_by_one > allowed) {
    return absl::InternalError(absl::StrCat(off_by_one, " of ", y_count, " outputs one step off (allowed ", allowed, ")"));
  }
  if (off_by_one > 0) std::printf("%s: %lld of %lld one step off\n", p.ToString().c_str(),
                                  static_cast<long long>(off_by_one), static_cast<long long>(y_count));
  return absl::OkStatus();
}

TEST(QuantizedConv2dOnednnTest, RunsEveryProblemAndMatchesTheIntegerReference) {
  const QuantizedConv2dOnednnNhwc algorithm;
  for (const QuantizedConv2dProblem& shape : Shapes(Layout::kNHWC)) {
    for (const EpilogueCase& e : Epilogues()) {
      QuantizedConv2dProblem p = shape;
      p.src_type = e.src_type, p.dst_type = e.dst_type, p.epilogue = e.epilogue;
      p.fused_add = e.fused_add, p.add = e.add;
      if (p.fused_add != QuantizedFusedAdd::kNone) p.dst_type = p.add.y_type;
      for (bool fixed_scales : {false, true}) {
        const uint32_t seed = std::random_device{}();
        EXPECT_THAT(Check(algorithm, p, seed, fixed_scales), IsOk())
            << p.ToString() << (fixed_scales ? " scales fixed" : " scales in args") << " seed " << seed;
      }
    }
  }
}

// With the conv as the add's first operand, a quantization whose two FMA orders round some operand pair differently
// (ResNet-50's layer2.0 add: one pair of 65536) is declined, naming the count; the same add with the conv as the
// second operand runs.
TEST(QuantizedConv2dOnednnTest, DeclinesAFusedAddItCannotReproduce) {
  QuantizedConv2dProblem p = Shapes(Layout::kNHWC)[3];
  const EpilogueCase e = FusedAddCase(QuantizedFusedAdd::kConvIsA, 0.012813163921236992f, 140, 0.017131511121988297f,
                                      0.009712425991892815f);
  p.epilogue = e.epilogue, p.fused_add = e.fused_add, p.add = e.add;
  p.add.b_zero_point = 124;
  const absl::Status status = QuantizedConv2dOnednnNhwc().CanImplement(p);
  EXPECT_TRUE(absl::IsUnimplemented(status)) << status;
  EXPECT_THAT(status.message(), ::testing::HasSubstr("which rounds 1 pairs of 8-bit operands differently"));
  std::swap(p.add.a_scale, p.add.b_scale);
  std::swap(p.add.a_zero_point, p.add.b_zero_point);
  p.fused_add = QuantizedFusedAdd::kConvIsB;
  EXPECT_THAT(QuantizedConv2dOnednnNhwc().CanImplement(p), IsOk());
}

// oneDNN 2.6 has only its reference INT8 convolution in the other layouts: declined.
TEST(QuantizedConv2dOnednnTest, DeclinesOtherLayouts) {
  QuantizedConv2dProblem p = Shapes(Layout::kNCHW8c)[2];
  EXPECT_TRUE(absl::IsUnimplemented(QuantizedConv2dOnednnNhwc().CanImplement(p)));
}

TEST(QuantizedConv2dOnednnTest, ValidateNamesTheField) {
  QuantizedConv2dProblem p = Conv(1, 8, 4, 4, 8, 3, 1, 1, 1, Layout::kNHWC);
  p.src_type = DataType::kFloat32;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("the input must be UINT8 or INT8, got FP32"));
  p.src_type = DataType::kUInt8;
  p.epilogue.src_zero_point = 300;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("src zero point 300 is outside UINT8"));
  p.epilogue.src_zero_point = 0;
  p.dst_type = DataType::kFloat32;
  p.epilogue.dst_zero_point = 4;
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("dst zero point 4 does not fit FP32"));
  p.dst_type = DataType::kUInt8;
  p.epilogue.dst_zero_point = 0;
  p.epilogue.scales.assign(7, 0.5f);
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("epilogue.scales: expected k=8 multipliers, got 7"));
  p.epilogue.scales.assign(8, 0.5f);
  p.epilogue.scales[3] = std::nanf("");
  EXPECT_THAT(p.Validate().message(), ::testing::HasSubstr("epilogue.scales[3] is nan, not a finite number"));
}

}  // namespace
}  // namespace convoy::cpu
