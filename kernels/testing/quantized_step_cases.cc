#include "kernels/testing/quantized_step_cases.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/tensor.h"
#include "kernels/common/thread_pool.h"

namespace convoy::testing {
namespace {

struct Range {
  int lo, hi;
};
Range RangeOf(DataType q) { return q == DataType::kUInt8 ? Range{0, 255} : Range{-128, 127}; }

int LoadByte(const std::vector<uint8_t>& v, DataType t, size_t i) {
  return t == DataType::kUInt8 ? int{v[i]} : int{static_cast<int8_t>(v[i])};
}

// ONNX QuantizeLinear of one FP32 value: the FP32 quotient rounded half to even, the zero point added, saturated.
int QuantizeLinear(float x, float scale, int zero_point, Range r) {
  const float quotient = x / scale;
  if (std::isnan(quotient)) return r.lo;
  const double q = std::nearbyint(static_cast<double>(quotient)) + zero_point;
  return static_cast<int>(std::fmin(std::fmax(q, r.lo), r.hi));
}

// onnxruntime's QLinearAdd on one pair (quantized_vector_loops.h).
int QuantizedAddDefinition(const QuantizedAddProblem& p, int a, int b) {
  const float ra = p.a_scale / p.y_scale, rb = p.b_scale / p.y_scale;
  const float fixed = static_cast<float>(p.y_zero_point) -
                      std::fmaf(ra, static_cast<float>(p.a_zero_point), rb * static_cast<float>(p.b_zero_point));
  const float v = std::fmaf(static_cast<float>(a), ra, std::fmaf(static_cast<float>(b), rb, fixed));
  const Range r = RangeOf(p.y_type);
  return static_cast<int>(std::fmin(std::fmax(std::nearbyint(static_cast<double>(v)), r.lo), r.hi));
}

// Random FP32 values on and around the grid of `scale` (ties included), some far outside the range, NaN and +-inf.
std::vector<float> GridFloats(int64_t count, float scale, int zero_point, Range r, std::mt19937& rng) {
  std::uniform_int_distribution<int> step(r.lo - 40, r.hi + 40);
  std::uniform_int_distribution<int> kind(0, 3);
  std::uniform_real_distribution<float> fraction(-0.5f, 0.5f);
  std::vector<float> x(count);
  for (float& v : x) {
    const float base = static_cast<float>(step(rng) - zero_point);
    switch (kind(rng)) {
      case 0: v = (base + 0.5f) * scale; break;  // a tie
      case 1: v = base * scale; break;            // on the grid
      default: v = (base + fraction(rng)) * scale; break;
    }
  }
  x[count / 2] = std::nanf("");
  x[count / 3] = std::numeric_limits<float>::infinity();
  x[count / 5] = -std::numeric_limits<float>::infinity();
  return x;
}

// Runs `algorithm` on `device` with the host inputs copied in (`offset` bytes into each buffer) and y starting as
// `initial_y` (the poison); returns y's bytes. `y_input` >= 0: y is that input's buffer (written over it).
template <typename Op>
absl::StatusOr<std::vector<uint8_t>> RunOnDevice(const typename Op::AlgorithmType& algorithm,
                                                 const typename Op::Problem& problem,
                                                 const std::vector<const std::vector<uint8_t>*>& inputs,
                                                 const std::vector<uint8_t>& initial_y, int y_input, int offset,
                                                 Device& device) {
  CONVOY_RETURN_IF_ERROR(algorithm.CanImplement(problem));
  std::vector<DeviceAllocation> buffers;
  std::vector<void*> pointers;
  for (const std::vector<uint8_t>* input : inputs) {
    CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(input->size() + offset));
    void* data = static_cast<char*>(buffer.data()) + offset;
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(data, input->data(), input->size()));
    pointers.push_back(data);
    buffers.push_back(std::move(buffer));
  }
  void* y = nullptr;
  if (y_input >= 0) {
    y = pointers[y_input];
  } else {
    CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(initial_y.size() + offset));
    y = static_cast<char*>(buffer.data()) + offset;
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(y, initial_y.data(), initial_y.size()));
    buffers.push_back(std::move(buffer));
  }
  typename Op::Args args;
  if constexpr (std::is_same_v<Op, ConvertOp>) {
    args = ConvertArgs{pointers[0], y};
  } else {
    args = QuantizedAddArgs{pointers[0], pointers[1], y};
  }
  CONVOY_RETURN_IF_ERROR(algorithm.Run(problem, args, Workspace{}, device.context()));
  CONVOY_RETURN_IF_ERROR(device.Synchronize());
  std::vector<uint8_t> out(initial_y.size());
  CONVOY_RETURN_IF_ERROR(device.CopyToHost(out.data(), y, out.size()));
  return out;
}

std::vector<uint8_t> Bytes(const void* data, size_t size) {
  std::vector<uint8_t> bytes(size);
  std::memcpy(bytes.data(), data, size);
  return bytes;
}

std::string Index(int64_t n, int64_t c, int64_t h, int64_t w) { return absl::StrCat("(", n, ",", c, ",", h, ",", w, ")"); }

}  // namespace

ConvertProblem QuantizedConvertCase::Quantize(float scale, int zero_point) const {
  ConvertProblem p;
  p.n = n, p.c = c, p.h = h, p.w = w;
  p.src_dtype = DataType::kFloat32, p.dst_dtype = quantized;
  p.src_layout = src_layout, p.dst_layout = dst_layout;
  p.scale = scale, p.zero_point = zero_point;
  return p;
}

std::string QuantizedConvertCase::ToString() const {
  return absl::StrCat(DataTypeName(quantized), " ", LayoutName(src_layout), " -> ", LayoutName(dst_layout), " [", n,
                      ",", c, ",", h, ",", w, "]");
}

std::vector<QuantizedConvertCase> QuantizedConvertTestCases() {
  std::vector<QuantizedConvertCase> out;
  for (DataType q : {DataType::kUInt8, DataType::kInt8}) {
    for (Layout a : {Layout::kNCHW, Layout::kNHWC}) {
      for (Layout b : {Layout::kNCHW, Layout::kNHWC}) {
        out.push_back({q, a, b, 2, 40, 5, 7});
        out.push_back({q, a, b, 1, 3, 9, 11});
        out.push_back({q, a, b, 3, 64, 1, 1});
      }
    }
  }
  return out;
}

absl::Status CheckQuantizeRoundTrip(const ConvertAlgorithm& algorithm, const QuantizedConvertCase& c, Device& device,
                                    uint32_t seed, const ConvertAlgorithm* also) {
  std::mt19937 rng(seed);
  const Range range = RangeOf(c.quantized);
  const ConvertProblem quantize = c.Quantize(std::uniform_real_distribution<float>(0.004f, 0.2f)(rng),
                                             std::uniform_int_distribution<int>(range.lo, range.hi)(rng));
  const int64_t count = int64_t{c.n} * c.c * c.h * c.w;
  const std::vector<float> x = GridFloats(count, quantize.scale, quantize.zero_point, range, rng);
  const TensorDesc src = TensorDesc::Image(DataType::kFloat32, c.n, c.c, c.h, c.w, c.src_layout);
  const TensorDesc dst = TensorDesc::Image(c.quantized, c.n, c.c, c.h, c.w, c.dst_layout);
  std::vector<uint8_t> expected(count);
  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int h = 0; h < c.h; ++h)
        for (int w = 0; w < c.w; ++w) {
          const int q = QuantizeLinear(x[src.Offset4(n, ch, h, w)], quantize.scale, quantize.zero_point, range);
          expected[dst.Offset4(n, ch, h, w)] = static_cast<uint8_t>(q);
        }
  std::vector<uint8_t> poisoned(count);
  for (int64_t i = 0; i < count; ++i) poisoned[i] = static_cast<uint8_t>(~expected[i]);
  const std::vector<uint8_t> x_bytes = Bytes(x.data(), x.size() * sizeof(float));
  CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> q,
                          RunOnDevice<ConvertOp>(algorithm, quantize, {&x_bytes}, poisoned, -1, 0, device));

  ConvertProblem dequantize = quantize;
  std::swap(dequantize.src_dtype, dequantize.dst_dtype);
  std::swap(dequantize.src_layout, dequantize.dst_layout);
  const std::vector<float> nans(count, std::numeric_limits<float>::quiet_NaN());
  CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> y_bytes,
                          RunOnDevice<ConvertOp>(algorithm, dequantize, {&expected},
                                                 Bytes(nans.data(), nans.size() * sizeof(float)), -1, 0, device));
  std::vector<float> y(count);
  std::memcpy(y.data(), y_bytes.data(), y_bytes.size());

  std::vector<uint8_t> also_q;
  std::vector<float> also_y(count);
  if (also != nullptr) {
    ThreadPool pool(2);
    const ExecutionContext host{Backend::kCpu, &pool};
    also_q = poisoned;
    CONVOY_RETURN_IF_ERROR(also->Run(quantize, ConvertArgs{x.data(), also_q.data()}, Workspace{}, host));
    CONVOY_RETURN_IF_ERROR(also->Run(dequantize, ConvertArgs{expected.data(), also_y.data()}, Workspace{}, host));
  }

  for (int n = 0; n < c.n; ++n)
    for (int ch = 0; ch < c.c; ++ch)
      for (int h = 0; h < c.h; ++h)
        for (int w = 0; w < c.w; ++w) {
          const int64_t qi = dst.Offset4(n, ch, h, w), fi = src.Offset4(n, ch, h, w);
          if (q[qi] != expected[qi] || (also != nullptr && also_q[qi] != expected[qi])) {
            return absl::InternalError(absl::StrCat(
                quantize.ToString(), ": element ", Index(n, ch, h, w), " (x = ", x[fi], ") quantized to ",
                LoadByte(q, c.quantized, qi), also != nullptr ? absl::StrCat(" (", also->name(), ": ",
                                                                              LoadByte(also_q, c.quantized, qi), ")")
                                                              : "",
                ", ONNX's QuantizeLinear gives ", LoadByte(expected, c.quantized, qi)));
          }
          // The dequantized tensor has the quantize's source layout.
          const float want = static_cast<float>(LoadByte(expected, c.quantized, qi) - quantize.zero_point) *
                             quantize.scale;
          const bool same = std::memcmp(&y[fi], &want, sizeof(float)) == 0 &&
                            (also == nullptr || std::memcmp(&also_y[fi], &want, sizeof(float)) == 0);
          if (!same) {
            return absl::InternalError(absl::StrCat(dequantize.ToString(), ": element ", Index(n, ch, h, w), " is ",
                                                    y[fi], also != nullptr ? absl::StrCat(" (", also->name(), ": ",
                                                                                          also_y[fi], ")")
                                                                           : "",
                                                    ", ONNX's DequantizeLinear gives ", want));
          }
        }
  return absl::OkStatus();
}

absl::Status CheckQuantizedAdd(const QuantizedAddAlgorithm& algorithm, DataType a_type, DataType b_type,
                               DataType y_type, QuantizedAddOutput output, int offset, Device& device, uint32_t seed,
                               const QuantizedAddAlgorithm* also) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale(0.005f, 0.1f);
  std::uniform_int_distribution<int> byte(0, 255);
  auto zero_point = [&rng](DataType t) {
    const Range r = RangeOf(t);
    return std::uniform_int_distribution<int>(r.lo, r.hi)(rng);
  };
  QuantizedAddProblem p;
  p.count = 65536 + std::uniform_int_distribution<int>(0, 999)(rng);
  p.a_type = a_type, p.b_type = b_type, p.y_type = y_type;
  p.a_scale = scale(rng), p.b_scale = scale(rng), p.y_scale = scale(rng);
  p.a_zero_point = zero_point(a_type), p.b_zero_point = zero_point(b_type), p.y_zero_point = zero_point(y_type);
  if (output == QuantizedAddOutput::kOverA) p.y_type = a_type, p.y_zero_point = p.a_zero_point;
  if (output == QuantizedAddOutput::kOverB) p.y_type = b_type, p.y_zero_point = p.b_zero_point;
  // Every pair of operand bytes once, shuffled, then a random tail.
  std::vector<int> pairs(65536);
  for (int i = 0; i < 65536; ++i) pairs[i] = i;
  std::shuffle(pairs.begin(), pairs.end(), rng);
  std::vector<uint8_t> a(p.count), b(p.count);
  for (int64_t i = 0; i < p.count; ++i) {
    a[i] = static_cast<uint8_t>(i < 65536 ? pairs[i] & 255 : byte(rng));
    b[i] = static_cast<uint8_t>(i < 65536 ? pairs[i] >> 8 : byte(rng));
  }
  std::vector<uint8_t> expected(p.count);
  for (int64_t i = 0; i < p.count; ++i) {
    expected[i] = static_cast<uint8_t>(QuantizedAddDefinition(p, LoadByte(a, a_type, i), LoadByte(b, b_type, i)));
  }
  std::vector<uint8_t> poisoned(p.count);
  for (int64_t i = 0; i < p.count; ++i) poisoned[i] = static_cast<uint8_t>(~expected[i]);
  const int y_input = output == QuantizedAddOutput::kOverA ? 0 : output == QuantizedAddOutput::kOverB ? 1 : -1;
  CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> y,
                          RunOnDevice<QuantizedAddOp>(algorithm, p, {&a, &b}, poisoned, y_input, offset, device));
  std::vector<uint8_t> also_y;
  if (also != nullptr) {
    ThreadPool pool(2);
    also_y = poisoned;
    CONVOY_RETURN_IF_ERROR(also->Run(p, QuantizedAddArgs{a.data(), b.data(), also_y.data()}, Workspace{},
                                     ExecutionContext{Backend::kCpu, &pool}));
  }
  for (int64_t i = 0; i < p.count; ++i) {
    if (y[i] != expected[i] || (also != nullptr && also_y[i] != expected[i])) {
      return absl::InternalError(absl::StrCat(
          p.ToString(), ": element ", i, " (a ", LoadByte(a, a_type, i), ", b ", LoadByte(b, b_type, i), ") is ",
          LoadByte(y, p.y_type, i),
          also != nullptr ? absl::StrCat(" (", also->name(), ": ", LoadByte(also_y, p.y_type, i), ")") : "",
          ", QLinearAdd's arithmetic gives ", LoadByte(expected, p.y_type, i)));
    }
  }
  return absl::OkStatus();
}

}  // namespace convoy::testing
