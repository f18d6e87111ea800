#include "kernels/testing/test_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "absl/strings/str_cat.h"

namespace convoy::testing {

void FillUniform(void* data, DataType dtype, int64_t count, uint32_t seed, float lo, float hi) {
  std::mt19937 rng(seed);
  if (dtype == DataType::kUInt8) {
    std::uniform_int_distribution<int> bytes(0, 255);
    for (int64_t i = 0; i < count; ++i) static_cast<uint8_t*>(data)[i] = static_cast<uint8_t>(bytes(rng));
    return;
  }
  std::uniform_real_distribution<float> dist(lo, hi);
  for (int64_t i = 0; i < count; ++i) StoreFromFloat(data, dtype, static_cast<size_t>(i), dist(rng));
}

std::vector<float> RandomFloats(size_t count, uint32_t seed, float lo, float hi) {
  std::vector<float> v(count);
  FillUniform(v.data(), DataType::kFloat32, static_cast<int64_t>(count), seed, lo, hi);
  return v;
}

absl::StatusOr<HostBuffer> RandomBuffer(DataType dtype, int64_t count, uint32_t seed, float lo, float hi) {
  absl::StatusOr<HostBuffer> buffer = HostBuffer::Allocate(static_cast<size_t>(count) * DataTypeSize(dtype));
  if (!buffer.ok()) return buffer.status();
  FillUniform(buffer->data(), dtype, count, seed, lo, hi);
  return buffer;
}

void PoisonWithNaN(void* data, DataType dtype, int64_t count) {
  if (!IsFloatingPoint(dtype)) {
    std::memset(data, 0xA5, static_cast<size_t>(count) * DataTypeSize(dtype));
    return;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t i = 0; i < count; ++i) StoreFromFloat(data, dtype, static_cast<size_t>(i), nan);
}

std::vector<float> ToFloats(const void* data, DataType dtype, int64_t count) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) out[i] = LoadAsFloat(data, dtype, static_cast<size_t>(i));
  return out;
}

absl::Status CompareFloats(const std::vector<float>& actual, const std::vector<float>& expected,
                           const Tolerance& tolerance) {
  if (actual.size() != expected.size()) {
    return absl::InternalError(absl::StrCat("expected ", expected.size(), " elements, got ", actual.size()));
  }
  struct Mismatch {
    size_t index;
    double excess;
  };
  std::vector<Mismatch> mismatches;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i], e = expected[i];
    const double allowed = tolerance.absolute + tolerance.relative * std::fabs(e);
    if (std::isnan(e) && std::isnan(a)) continue;
    if (std::isnan(a) || std::isnan(e)) {
      mismatches.push_back({i, std::numeric_limits<double>::infinity()});
    } else if (std::isinf(e) || std::isinf(a)) {
      if (a != e) mismatches.push_back({i, std::numeric_limits<double>::infinity()});
    } else if (!(std::fabs(a - e) <= allowed)) {
      mismatches.push_back({i, std::fabs(a - e) - allowed});
    }
  }
  if (mismatches.empty()) return absl::OkStatus();
  std::stable_sort(mismatches.begin(), mismatches.end(),
                   [](const Mismatch& x, const Mismatch& y) { return x.excess > y.excess; });
  std::string message = absl::StrCat(mismatches.size(), " of ", actual.size(),
                                     " elements differ (tolerance relative=", tolerance.relative,
                                     " absolute=", tolerance.absolute, "); worst:");
  for (size_t j = 0; j < std::min<size_t>(mismatches.size(), 5); ++j) {
    const size_t i = mismatches[j].index;
    absl::StrAppend(&message, "\n  [", i, "] actual ", actual[i], " expected ", expected[i], " allowed +-",
                    tolerance.absolute + tolerance.relative * std::fabs(expected[i]));
  }
  return absl::InternalError(message);
}

}  // namespace convoy::testing
