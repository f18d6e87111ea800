// Random-filled device buffers for timing conv2d, GEMM and INT8 conv2d candidates, and the autotuner's non-template parts.
#include <algorithm>
#include <cmath>
#include <random>

#include "absl/container/flat_hash_set.h"
#include "kernels/common/mutex.h"
#include "kernels/registry/autotuner.h"

namespace convoy {
namespace {

absl::StatusOr<DeviceAllocation> RandomBuffer(Device& device, DataType dtype, int64_t elements, uint32_t seed) {
  const size_t bytes = static_cast<size_t>(elements) * DataTypeSize(dtype);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(bytes));
  std::vector<unsigned char> host(bytes);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < elements; ++i) StoreFromFloat(host.data(), dtype, static_cast<size_t>(i), dist(rng));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), host.data(), bytes));
  return buffer;
}

// Random bytes (8-bit tensors: every bit pattern is a valid value).
absl::StatusOr<DeviceAllocation> RandomBytes(Device& device, size_t bytes, uint32_t seed) {
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(std::max<size_t>(bytes, 1)));
  std::vector<unsigned char> host(bytes);
  std::mt19937 rng(seed);
  for (unsigned char& b : host) b = static_cast<unsigned char>(rng());
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), host.data(), bytes));
  return buffer;
}

}  // namespace

namespace autotuner_internal {

bool ClaimColdStart(const Device& device) {
  static convoy::Mutex mu;
  static auto* warmed = new absl::flat_hash_set<const Device*>();  // guarded by mu
  convoy::MutexLock lock(&mu);
  return warmed->insert(&device).second;
}

int RecheckRuns(double time_ms, const TuningOptions& options) {
  const double budget_ms = options.min_timed_ms / 4;
  if (time_ms <= 0) return std::max(1, options.recheck_runs);
  const double fit = std::ceil(budget_ms / time_ms);
  return static_cast<int>(std::max(1.0, std::min<double>(options.recheck_runs, fit)));
}

double Fastest(const std::vector<double>& values) {
  return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}
void ConfirmLeaders(std::vector<CandidateTiming>& candidates, const TuningOptions& options,
                    const std::function<absl::StatusOr<double>(size_t)>& time_one_run) {
  size_t first = candidates.size(), second = candidates.size();
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!candidates[i].ok) continue;
    if (first == candidates.size() || candidates[i].time_ms < candidates[first].time_ms) {
      second = first;
      first = i;
    } else if (second == candidates.size() || candidates[i].time_ms < candidates[second].time_ms) {
      second = i;
    }
  }
  if (second == candidates.size() || options.confirm_rounds <= 0 ||
      candidates[second].time_ms > options.confirm_margin * candidates[first].time_ms) {
    return;
  }
  std::vector<double> a, b;
  for (int round = 0; round < options.confirm_rounds; ++round) {
    // Alternate which goes first so neither always runs right after the other's cache traffic.
    const bool a_first = round % 2 == 0;
    for (size_t index : a_first ? std::vector<size_t>{first, second} : std::vector<size_t>{second, first}) {
      absl::StatusOr<double> t = time_one_run(index);
      if (!t.ok()) return;  // keep the first-pass times
      (index == first ? a : b).push_back(*t);
    }
  }
  candidates[first].time_ms = Fastest(a);
  candidates[second].time_ms = Fastest(b);
}

}  // namespace autotuner_internal

absl::StatusOr<std::unique_ptr<TuningBuffers<Conv2dOp>>> TuningBuffers<Conv2dOp>::Create(const Conv2dProblem& p,
                                                                                         Device& device) {
  auto b = std::make_unique<TuningBuffers<Conv2dOp>>();
  const int64_t out_elements = p.output_desc().num_elements();
  CONVOY_ASSIGN_OR_RETURN(auto x, RandomBuffer(device, p.dtype, p.input_desc().num_elements(), 1));
  CONVOY_ASSIGN_OR_RETURN(auto w, RandomBuffer(device, p.dtype, p.filter_elements(), 2));
  CONVOY_ASSIGN_OR_RETURN(auto bias, RandomBuffer(device, DataType::kFloat32, p.k, 3));
  CONVOY_ASSIGN_OR_RETURN(auto scale, RandomBuffer(device, DataType::kFloat32, p.k, 4));
  CONVOY_ASSIGN_OR_RETURN(auto residual, RandomBuffer(device, p.dtype, out_elements, 5));
  CONVOY_ASSIGN_OR_RETURN(auto y, device.Allocate(static_cast<size_t>(out_elements) * DataTypeSize(p.dtype)));
  b->args = Conv2dArgs{x.data(), w.data(), bias.as<float>(), scale.as<float>(), residual.data(), y.data()};
  for (auto* a : {&x, &w, &bias, &scale, &residual, &y}) b->allocations.push_back(std::move(*a));
  return b;
}

absl::StatusOr<std::unique_ptr<TuningBuffers<GemmOp>>> TuningBuffers<GemmOp>::Create(const GemmProblem& p,
                                                                                     Device& device) {
  auto b = std::make_unique<TuningBuffers<GemmOp>>();
  CONVOY_ASSIGN_OR_RETURN(auto a, RandomBuffer(device, p.dtype, int64_t{p.m} * p.k, 1));
  CONVOY_ASSIGN_OR_RETURN(auto w, RandomBuffer(device, p.dtype, int64_t{p.n} * p.k, 2));
  CONVOY_ASSIGN_OR_RETURN(auto bias, RandomBuffer(device, DataType::kFloat32, p.n, 3));
  CONVOY_ASSIGN_OR_RETURN(auto scale, RandomBuffer(device, DataType::kFloat32, p.n, 4));
  CONVOY_ASSIGN_OR_RETURN(auto residual, RandomBuffer(device, p.dtype, int64_t{p.m} * p.n, 5));
  CONVOY_ASSIGN_OR_RETURN(auto y, device.Allocate(size_t{1} * p.m * p.n * DataTypeSize(p.dtype)));
  b->args = GemmArgs{a.data(), w.data(), bias.as<float>(), scale.as<float>(), residual.data(), y.data()};
  for (auto* x : {&a, &w, &bias, &scale, &residual, &y}) b->allocations.push_back(std::move(*x));
  return b;
}

absl::StatusOr<std::unique_ptr<TuningBuffers<QuantizedConv2dOp>>> TuningBuffers<QuantizedConv2dOp>::Create(
    const QuantizedConv2dProblem& p, Device& device) {
  auto b = std::make_unique<TuningBuffers<QuantizedConv2dOp>>();
  const size_t out_elements = static_cast<size_t>(p.output_desc().num_elements());
  CONVOY_ASSIGN_OR_RETURN(auto x, RandomBytes(device, p.input_desc().size_bytes(), 1));
  CONVOY_ASSIGN_OR_RETURN(auto w, RandomBytes(device, static_cast<size_t>(p.filter_elements()), 2));
  // INT32 biases of the size a requantized layer has (|bias| < 2^16), so that no accumulation overflows.
  CONVOY_ASSIGN_OR_RETURN(auto bias, device.Allocate(size_t{4} * std::max(p.k, 1)));
  {
    std::vector<int32_t> host(static_cast<size_t>(p.k));
    std::mt19937 rng(3);
    std::uniform_int_distribution<int32_t> dist(-(1 << 16), 1 << 16);
    for (int32_t& v : host) v = dist(rng);
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(bias.data(), host.data(), host.size() * sizeof(int32_t)));
  }
  CONVOY_ASSIGN_OR_RETURN(auto scale, RandomBuffer(device, DataType::kFloat32, p.k, 4));
  // The residual: 8-bit (the residual sum's or the fused add's other operand); sized for 4-byte values to be safe.
  CONVOY_ASSIGN_OR_RETURN(auto residual, RandomBytes(device, out_elements * 4, 5));
  CONVOY_ASSIGN_OR_RETURN(auto y, device.Allocate(std::max<size_t>(p.output_desc().size_bytes(), 1)));
  b->args = QuantizedConv2dArgs{x.data(), w.as<int8_t>(), bias.as<int32_t>(), scale.as<float>(), residual.data(),
                                y.data()};
  for (auto* a : {&x, &w, &bias, &scale, &residual, &y}) b->allocations.push_back(std::move(*a));
  return b;
}

}  // namespace convoy
