// The INT8 convolution cases and check (quantized_conv2d_cases.h).
#include "kernels/testing/quantized_conv2d_cases.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/residual_in_output.h"

namespace convoy::testing {
namespace {

QuantizedConv2dProblem Conv(int n, int c, int h, int w, int k, int r, int stride, int pad, int groups, Layout layout) {
  QuantizedConv2dProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w, p.k = k, p.r = r, p.s = r;
  p.stride_h = p.stride_w = stride;
  p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = pad;
  p.groups = groups;
  p.layout = layout;
  return p;
}

// Fills `count` elements of an integer type uniformly over [lo, hi].
template <typename T>
std::vector<T> RandomInts(size_t count, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> v(count);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

// A device copy of `bytes` host bytes (at least one byte allocated).
absl::StatusOr<DeviceAllocation> Upload(Device& device, const void* data, size_t bytes) {
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation allocation, device.Allocate(std::max<size_t>(bytes, 1)));
  if (bytes > 0) CONVOY_RETURN_IF_ERROR(device.CopyToDevice(allocation.data(), data, bytes));
  return allocation;
}

// Every element of y against the reference within `tolerance` (a fused add: none off).
absl::Status CompareWithReference(const QuantizedConv2dProblem& p, const std::vector<uint8_t>& y,
                                  const std::vector<uint8_t>& y_reference, int64_t y_count,
                                  const QuantizedTolerance& tolerance) {
  int64_t off_by_one = 0;
  for (int64_t i = 0; i < y_count; ++i) {
    const float a = LoadAsFloat(y.data(), p.dst_type, i), e = LoadAsFloat(y_reference.data(), p.dst_type, i);
    if (p.dst_type == DataType::kFloat32) {
      const bool close = tolerance.fp32_relative == 0.0f
                             ? a == e
                             : std::fabs(a - e) <= tolerance.fp32_relative * std::max(1.0f, std::fabs(e));
      if (!close) return absl::InternalError(absl::StrCat("element ", i, ": ", a, " vs reference ", e));
      continue;
    }
    if (a == e) continue;
    if (std::fabs(a - e) > 1.0f) return absl::InternalError(absl::StrCat("element ", i, ": ", a, " vs reference ", e));
    ++off_by_one;
  }
  const int64_t allowed = p.fused_add != QuantizedFusedAdd::kNone
                              ? 0
                              : std::max<int64_t>(tolerance.min_off_by_one_allowed,
                                                  static_cast<int64_t>(tolerance.max_off_by_one_fraction * y_count));
  if (off_by_one > allowed) {
    return absl::InternalError(absl::StrCat(off_by_one, " of ", y_count, " outputs one step off (allowed ", allowed, ")"));
  }
  if (off_by_one > 0) {
    std::printf("%s: %lld of %lld one step off\n", p.ToString().c_str(), static_cast<long long>(off_by_one),
                static_cast<long long>(y_count));
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<QuantizedConv2dProblem> QuantizedConv2dTestShapes(Layout layout) {
  QuantizedConv2dProblem asymmetric = Conv(2, 16, 15, 13, 32, 3, 2, 1, 1, layout);  // TF "SAME": more pad after
  asymmetric.pad_top = asymmetric.pad_left = 0;
  return {
      Conv(2, 3, 32, 32, 16, 7, 2, 3, 1, layout),    // the ResNet stem on a 3-channel image
      asymmetric,
      Conv(2, 64, 8, 8, 64, 3, 1, 1, 1, layout),     // ResNet basic block
      Conv(2, 96, 8, 8, 24, 1, 1, 0, 1, layout),     // MobileNetV2 projection (the residual epilogues)
      Conv(1, 48, 12, 12, 48, 3, 2, 1, 48, layout),  // depthwise, stride 2
      Conv(1, 32, 9, 9, 32, 3, 1, 1, 4, layout),     // grouped (8 channels per group)
  };
}

std::vector<QuantizedEpilogueCase> QuantizedConv2dTestEpilogues() {
  std::vector<QuantizedEpilogueCase> out;
  auto add = [&out](DataType src, DataType dst, int src_zp, int dst_zp, bool bias, bool relu, bool residual) {
    QuantizedEpilogueCase e{src, dst, {}};
    e.epilogue.src_zero_point = src_zp, e.epilogue.dst_zero_point = dst_zp;
    e.epilogue.has_bias = bias, e.epilogue.relu = relu;
    if (residual) {
      e.epilogue.residual = ResidualMode::kBeforeActivation;
      e.epilogue.residual_scale = 0.6875f, e.epilogue.residual_zero_point = dst == DataType::kUInt8 ? 111 : -9;
    }
    out.push_back(e);
  };
  add(DataType::kUInt8, DataType::kUInt8, 0, 0, false, false, false);     // plain
  add(DataType::kUInt8, DataType::kUInt8, 128, 0, true, true, false);     // QDQ conv + relu (u8 activations)
  add(DataType::kUInt8, DataType::kUInt8, 97, 131, true, false, false);   // no relu: output zero point mid-range
  add(DataType::kUInt8, DataType::kUInt8, 120, 5, true, true, true);      // ResNet: relu(conv + bias + residual)
  add(DataType::kInt8, DataType::kInt8, -3, -7, true, false, true);       // INT8 activations, residual, no relu
  add(DataType::kInt8, DataType::kUInt8, 0, 0, true, true, false);
  add(DataType::kUInt8, DataType::kFloat32, 140, 0, true, false, false);  // dequantized output (the last layer)
  return out;
}

std::vector<QuantizedConv2dProblem> QuantizedConv2dTestProblems(Layout layout) {
  std::vector<QuantizedConv2dProblem> out;
  for (const QuantizedConv2dProblem& shape : QuantizedConv2dTestShapes(layout)) {
    for (const QuantizedEpilogueCase& e : QuantizedConv2dTestEpilogues()) {
      QuantizedConv2dProblem p = shape;
      p.src_type = e.src_type, p.dst_type = e.dst_type, p.epilogue = e.epilogue;
      out.push_back(p);
    }
  }
  return out;
}

QuantizedConv2dProblem WithFusedAdd(QuantizedConv2dProblem p, QuantizedFusedAdd which, float conv_scale, int conv_zp,
                                    float residual_scale, float y_scale, DataType conv_type, DataType residual_type) {
  p.src_type = DataType::kUInt8;
  p.epilogue = QuantizedEpilogue{};
  p.epilogue.has_bias = true;
  p.epilogue.dst_zero_point = conv_zp;
  p.fused_add = which;
  const bool conv_is_a = which == QuantizedFusedAdd::kConvIsA;
  QuantizedAddProblem& q = p.add;
  q.a_type = conv_is_a ? conv_type : residual_type, q.b_type = conv_is_a ? residual_type : conv_type;
  q.a_scale = conv_is_a ? conv_scale : residual_scale, q.b_scale = conv_is_a ? residual_scale : conv_scale;
  q.a_zero_point = conv_is_a ? conv_zp : 0, q.b_zero_point = conv_is_a ? 0 : conv_zp;
  q.y_scale = y_scale;  // into UINT8 (add.y_type's default), whatever the operands' types
  p.dst_type = q.y_type;
  return p;
}

std::vector<QuantizedConv2dProblem> QuantizedConv2dFusedAddTestProblems(Layout layout) {
  std::vector<QuantizedConv2dProblem> out;
  for (const QuantizedConv2dProblem& shape : QuantizedConv2dTestShapes(layout)) {
    out.push_back(WithFusedAdd(shape, QuantizedFusedAdd::kConvIsB, 0.0067857676185667515f, 140,
                               0.0071817971765995026f, 0.0046936883591115475f));
    out.push_back(WithFusedAdd(shape, QuantizedFusedAdd::kConvIsA, 0.009907187893986702f, 127,
                               0.0046936883591115475f, 0.00786774791777134f));
    out.push_back(WithFusedAdd(shape, QuantizedFusedAdd::kConvIsB, 0.05f, -3, 0.04f, 0.07f, DataType::kInt8,
                               DataType::kInt8));
    out.back().epilogue.relu = true;
  }
  return out;
}

absl::Status CheckQuantizedConv2d(const QuantizedConv2dAlgorithm& algorithm, const QuantizedConv2dProblem& problem,
                                  Device& device, uint32_t seed, const QuantizedTolerance& tolerance,
                                  QuantizedScaleSource scales, QuantizedOperands operands) {
  QuantizedConv2dProblem p = problem;
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(p));
  std::mt19937 rng(seed);
  const bool u8_src = p.src_type == DataType::kUInt8;
  const int64_t x_count = p.input_desc().num_elements(), y_count = p.output_desc().num_elements();
  const bool extreme = operands == QuantizedOperands::kExtreme;
  std::vector<uint8_t> x = RandomInts<uint8_t>(x_count, u8_src ? 0 : -128, u8_src ? 255 : 127, rng);
  std::vector<int8_t> w = RandomInts<int8_t>(p.filter_elements(), -127, 127, rng);
  if (extreme) {
    std::fill(x.begin(), x.end(), static_cast<uint8_t>(u8_src ? 255 : 128));  // 255, or INT8 -128
    for (int8_t& v : w) v = static_cast<int8_t>(v < 0 ? -128 : 127);
  }
  const std::vector<int32_t> bias = RandomInts<int32_t>(p.k, -20000, 20000, rng);
  // Multipliers that spread the outputs over the whole quantized range (some saturating): the accumulator's spread is
  // about sqrt(C/g * R * S) * 74 * 73 for uniform operands.
  const double spread = std::sqrt(double(p.c_per_group()) * p.r * p.s) * (extreme ? 255.0 * 128 : 74.0 * 73);
  std::uniform_real_distribution<float> jitter(0.5f, 1.5f);
  std::vector<float> scale(p.k);
  for (float& s : scale) s = static_cast<float>(jitter(rng) * 80 / spread);
  const bool scales_in_problem = scales == QuantizedScaleSource::kProblem;
  if (scales_in_problem) p.epilogue.scales = scale;
  const size_t y_bytes = static_cast<size_t>(y_count) * DataTypeSize(p.dst_type);
  // The residual: y's type for the sum, the add's other operand's for a fused add.
  const DataType residual_type = p.fused_add == QuantizedFusedAdd::kNone      ? p.dst_type
                                 : p.fused_add == QuantizedFusedAdd::kConvIsA ? p.add.b_type
                                                                              : p.add.a_type;
  const bool u8_dst = residual_type == DataType::kUInt8;
  std::vector<uint8_t> residual(static_cast<size_t>(y_count) * DataTypeSize(residual_type));
  if (p.dst_type == DataType::kFloat32) {
    for (size_t i = 0; i < residual.size() / 4; ++i) {
      const float value = jitter(rng);
      std::memcpy(residual.data() + 4 * i, &value, 4);
    }
  } else {
    residual = RandomInts<uint8_t>(residual.size(), u8_dst ? 0 : -128, u8_dst ? 255 : 127, rng);
  }
  // The reference first, so the algorithm's output can be poisoned with a value differing from the expected one in
  // every element (FP32: NaN; integers: the bitwise complement): an element the algorithm leaves unwritten fails.
  std::vector<uint8_t> y_reference(y_bytes);
  QuantizedConv2dArgs host_args{x.data(),        w.data(), bias.data(), scales_in_problem ? nullptr : scale.data(),
                                residual.data(), y_reference.data()};
  CONVOY_RETURN_IF_ERROR(reference::QuantizedConv2d(p, host_args));
  std::vector<uint8_t> y(y_bytes);
  for (size_t i = 0; i < y_bytes; ++i) y[i] = p.dst_type == DataType::kFloat32 ? 0xFF : ~y_reference[i];

  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation x_device, Upload(device, x.data(), x.size()));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation w_device, Upload(device, w.data(), w.size()));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation bias_device, Upload(device, bias.data(), 4 * bias.size()));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation scale_device, Upload(device, scale.data(), 4 * scale.size()));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation residual_device, Upload(device, residual.data(), residual.size()));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation y_device, Upload(device, y.data(), y.size()));
  const size_t workspace_bytes = algorithm.WorkspaceBytes(p);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation workspace, device.Allocate(std::max<size_t>(workspace_bytes, 1)));
  const ExecutionContext context = device.context();
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(p, context));
  QuantizedConv2dArgs args{x_device.data(),   w_device.as<int8_t>(),      bias_device.as<int32_t>(),
                           scales_in_problem ? nullptr : scale_device.as<float>(), residual_device.data(),
                           y_device.data()};
  DeviceAllocation packed;
  if (const size_t packed_bytes = algorithm.PackedFilterBytes(p); packed_bytes > 0) {
    CONVOY_ASSIGN_OR_RETURN(packed, device.Allocate(packed_bytes));
    CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(p, w_device.data(), packed.data(), context));
    args.w = packed.as<int8_t>();
  }
  CONVOY_RETURN_IF_ERROR(algorithm.Run(p, args, Workspace{workspace.data(), workspace_bytes, state.get()}, context));
  CONVOY_RETURN_IF_ERROR(device.Synchronize());
  CONVOY_RETURN_IF_ERROR(device.CopyToHost(y.data(), y_device.data(), y_bytes));
  CONVOY_RETURN_IF_ERROR(CompareWithReference(p, y, y_reference, y_count, tolerance));
  // An algorithm that adds the residual onto the output buffer runs again as plans run it, with the residual in y.
  if (AccumulatesOntoOutput(algorithm, p) && residual.size() == y_bytes) {
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(y_device.data(), residual.data(), y_bytes));
    args.residual = y_device.data();
    CONVOY_RETURN_IF_ERROR(
        algorithm.Run(p, args, Workspace{workspace.data(), workspace_bytes, state.get()}, context));
    CONVOY_RETURN_IF_ERROR(device.Synchronize());
    CONVOY_RETURN_IF_ERROR(device.CopyToHost(y.data(), y_device.data(), y_bytes));
    const absl::Status in_place = CompareWithReference(p, y, y_reference, y_count, tolerance);
    if (!in_place.ok()) return absl::InternalError(absl::StrCat("with the residual in y: ", in_place.message()));
  }
  return absl::OkStatus();
}

}  // namespace convoy::testing
