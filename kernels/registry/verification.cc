// On-device verification of algorithm choices (see verification.h).
#include "kernels/registry/verification.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/common/tolerance.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/registry.h"

namespace convoy {
namespace {

// One operand of a verified op: its element type, count and value range (integers over [lo, hi] when `integer`,
// otherwise uniform in [lo, hi)); the output is the last one.
struct OperandSpec {
  DataType dtype = DataType::kFloat32;
  int64_t count = 0;
  float lo = -1.0f, hi = 1.0f;
  bool integer = false;
};

// Every value of an 8-bit type (integers), or [-64, 64) for FP32 (an INT8 convolution's FP32 residual).
OperandSpec WholeRangeOf(DataType dtype, int64_t count) {
  if (dtype == DataType::kUInt8) return {dtype, count, 0, 255, true};
  if (dtype == DataType::kInt8) return {dtype, count, -128, 127, true};
  return {dtype, count, -64, 64};
}

// What verification needs to know about an op: its operands, its arguments from operand pointers, its filter operand
// (packed for algorithms that want it), the length of its reductions (for the tolerance) and its FLOPs.
template <typename Op>
struct VerifiedOp;

template <>
struct VerifiedOp<Conv2dOp> {
  static std::vector<OperandSpec> Operands(const Conv2dProblem& p) {
    const Epilogue& e = p.epilogue;
    const int64_t out = p.output_desc().num_elements();
    return {{p.dtype, p.input_desc().num_elements()},
            {p.dtype, p.filter_elements()},
            {DataType::kFloat32, e.has_bias ? p.k : 0},
            {DataType::kFloat32, e.has_scale ? p.k : 0, 0.5f, 1.5f},
            {p.dtype, e.residual != ResidualMode::kNone ? out : 0},
            {p.dtype, out}};
  }
  static Conv2dArgs MakeArgs(const std::vector<void*>& b) {
    return Conv2dArgs{b[0], b[1], static_cast<const float*>(b[2]), static_cast<const float*>(b[3]), b[4], b[5]};
  }
  static void SetFilter(Conv2dArgs& args, const void* filter) { args.w = filter; }
  static constexpr int kFilter = 1;
  static Tolerance ToleranceOf(const Conv2dProblem& p) {
    return ToleranceFor(p.dtype, double{1.0} * p.c_per_group() * p.r * p.s, p.allow_tf32);
  }
  static int64_t Flops(const Conv2dProblem& p) { return p.flops(); }
};

template <>
struct VerifiedOp<GemmOp> {
  static std::vector<OperandSpec> Operands(const GemmProblem& p) {
    const Epilogue& e = p.epilogue;
    const int64_t out = int64_t{p.m} * p.n;
    return {{p.dtype, int64_t{p.m} * p.k},
            {p.dtype, int64_t{p.n} * p.k},
            {DataType::kFloat32, e.has_bias ? p.n : 0},
            {DataType::kFloat32, e.has_scale ? p.n : 0, 0.5f, 1.5f},
            {p.dtype, e.residual != ResidualMode::kNone ? out : 0},
            {p.dtype, out}};
  }
  static GemmArgs MakeArgs(const std::vector<void*>& b) {
    return GemmArgs{b[0], b[1], static_cast<const float*>(b[2]), static_cast<const float*>(b[3]), b[4], b[5]};
  }
  static void SetFilter(GemmArgs& args, const void* filter) { args.b = filter; }
  static constexpr int kFilter = 1;
  static Tolerance ToleranceOf(const GemmProblem& p) { return ToleranceFor(p.dtype, p.k, p.allow_tf32); }
  static int64_t Flops(const GemmProblem& p) { return p.flops(); }
};

// INT8 convolutions: activations over their type's whole range, weights over [-127, 127], INT32 biases within
// +-2^16, the multipliers (when the problem does not fix them) such that the outputs spread over the 8-bit range
// (some saturating), the residual over its type's range. Outputs of 8-bit types must equal the trusted result
// exactly (every CUDA INT8 kernel is bit-exact to the reference: the absolute tolerance of half a step fails any
// difference); FP32 outputs within a relative 1e-5.
template <>
struct VerifiedOp<QuantizedConv2dOp> {
  static std::vector<OperandSpec> Operands(const QuantizedConv2dProblem& p) {
    const QuantizedEpilogue& e = p.epilogue;
    const int64_t out = p.output_desc().num_elements();
    const bool has_residual = e.residual != ResidualMode::kNone || p.fused_add != QuantizedFusedAdd::kNone;
    const DataType residual_type = p.fused_add == QuantizedFusedAdd::kNone      ? p.dst_type
                                   : p.fused_add == QuantizedFusedAdd::kConvIsA ? p.add.b_type
                                                                                : p.add.a_type;
    const double spread = AccumulatorSpread(p);  // v = (acc + bias) * multiplier: about 64 steps either side
    return {WholeRangeOf(p.src_type, p.input_desc().num_elements()),
            {DataType::kInt8, p.filter_elements(), -127, 127, true},
            {DataType::kInt32, e.has_bias ? p.k : 0, -kBiasMagnitude, kBiasMagnitude, true},
            {DataType::kFloat32, e.scales.empty() ? p.k : 0, static_cast<float>(32 / spread),
             static_cast<float>(96 / spread)},
            WholeRangeOf(residual_type, has_residual ? out : 0),
            {p.dst_type, out}};
  }
  static QuantizedConv2dArgs MakeArgs(const std::vector<void*>& b) {
    return QuantizedConv2dArgs{b[0], static_cast<const int8_t*>(b[1]), static_cast<const int32_t*>(b[2]),
                               static_cast<const float*>(b[3]), b[4], b[5]};
  }
  static void SetFilter(QuantizedConv2dArgs& args, const void* filter) {
    args.w = static_cast<const int8_t*>(filter);
  }
  static constexpr int kFilter = 1;
  static Tolerance ToleranceOf(const QuantizedConv2dProblem& p) {
    if (p.dst_type == DataType::kFloat32) return Tolerance{1e-5, 1e-5};
    return Tolerance{0.0, 0.5};
  }
  static int64_t Flops(const QuantizedConv2dProblem& p) { return p.flops(); }

 private:
  static constexpr float kBiasMagnitude = 65536;
  // The standard deviation of acc + bias for the operands above: R*S*C/groups products (x - zero point) * w, each
  // of mean square E[(x - zp)^2] * E[w^2], plus the bias's variance.
  static double AccumulatorSpread(const QuantizedConv2dProblem& p) {
    const double x_mean = p.src_type == DataType::kUInt8 ? 127.5 : -0.5;
    const double x_offset = x_mean - p.epilogue.src_zero_point;
    const double x_square = (256.0 * 256.0 - 1) / 12 + x_offset * x_offset;
    const double w_square = 127.0 * 128.0 / 3;
    const double bias_variance = p.epilogue.has_bias ? double{kBiasMagnitude} * kBiasMagnitude / 3 : 0.0;
    const double reduction = double{1} * p.r * p.s * p.c_per_group();
    return std::max(1.0, std::sqrt(reduction * x_square * w_square + bias_variance));
  }
};

size_t Bytes(const OperandSpec& spec) { return static_cast<size_t>(spec.count) * DataTypeSize(spec.dtype); }

void FillUniform(std::vector<uint8_t>& host, const OperandSpec& spec, uint32_t seed) {
  std::mt19937 rng(seed);
  if (spec.integer) {  // exact in float: |values| <= 2^16
    std::uniform_int_distribution<int32_t> dist(static_cast<int32_t>(spec.lo), static_cast<int32_t>(spec.hi));
    for (int64_t i = 0; i < spec.count; ++i) {
      StoreFromFloat(host.data(), spec.dtype, static_cast<size_t>(i), static_cast<float>(dist(rng)));
    }
    return;
  }
  std::uniform_real_distribution<float> dist(spec.lo, spec.hi);
  for (int64_t i = 0; i < spec.count; ++i) StoreFromFloat(host.data(), spec.dtype, static_cast<size_t>(i), dist(rng));
}

bool IsFloatType(DataType dtype) {
  return dtype == DataType::kFloat32 || dtype == DataType::kFloat16 || dtype == DataType::kBFloat16;
}

// The output's poison before a run: NaN in floating-point types. Integers cannot hold NaN: before the trusted result
// is known they hold 0xA5 bytes, after it its bitwise complement, which differs from the trusted result in every
// element, so an element a candidate leaves unwritten is a mismatch.
void PoisonOutput(std::vector<uint8_t>& host, const OperandSpec& spec, const std::vector<uint8_t>* trusted) {
  if (IsFloatType(spec.dtype)) {
    for (int64_t i = 0; i < spec.count; ++i) StoreFromFloat(host.data(), spec.dtype, static_cast<size_t>(i), NAN);
  } else if (trusted == nullptr) {
    std::fill(host.begin(), host.end(), uint8_t{0xA5});
  } else {
    for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<uint8_t>(~(*trusted)[i]);
  }
}

// The worst |actual - expected| / (absolute + relative * |expected|) over the output, and whether an element is
// non-finite where the expected one is finite.
struct Comparison {
  double max_error = 0;
  bool non_finite = false;
  std::string first_bad;  // the worst element: index, actual, expected
};

Comparison Compare(const std::vector<uint8_t>& actual, const std::vector<uint8_t>& expected, const OperandSpec& out,
                   Tolerance tolerance) {
  Comparison c;
  int64_t worst = -1;
  for (int64_t i = 0; i < out.count; ++i) {
    const double a = LoadAsFloat(actual.data(), out.dtype, static_cast<size_t>(i));
    const double e = LoadAsFloat(expected.data(), out.dtype, static_cast<size_t>(i));
    if (!std::isfinite(e)) continue;  // the trusted result overflowed: nothing to hold the candidate to
    double error;
    if (!std::isfinite(a)) {
      c.non_finite = true;
      error = INFINITY;
    } else {
      error = std::fabs(a - e) / (tolerance.absolute + tolerance.relative * std::fabs(e));
    }
    if (worst < 0 || error > c.max_error) {
      c.max_error = error;
      worst = i;
      c.first_bad = absl::StrFormat("element %d: %g, trusted %g", i, a, e);
      // The 8-bit poison (the complement of the trusted value): most likely never written.
      if (DataTypeSize(out.dtype) == 1 && actual[i] == static_cast<uint8_t>(~expected[i])) {
        absl::StrAppend(&c.first_bad, ", the poison: unwritten");
      }
    }
  }
  return c;
}

}  // namespace

template <typename Op>
struct VerificationSession<Op>::State {
  using Problem = typename Op::Problem;
  using Traits = VerifiedOp<Op>;
  Problem problem;
  Device* device = nullptr;
  VerificationOptions options;
  std::vector<OperandSpec> specs;
  std::vector<std::vector<uint8_t>> host;  // inputs (random) and the output (poisoned)
  std::vector<DeviceAllocation> device_buffers;
  std::vector<void*> device_pointers;
  bool prepared = false;
  absl::Status prepare_status;
  std::optional<std::vector<uint8_t>> trusted_output;
  std::string trusted = "reference";
  const typename Op::AlgorithmType* trusted_algorithm = nullptr;

  // Random inputs on the host and the device, once.
  absl::Status Prepare() {
    if (prepared) return prepare_status;
    prepared = true;
    prepare_status = [&]() -> absl::Status {
      specs = Traits::Operands(problem);
      host.resize(specs.size());
      device_pointers.assign(specs.size(), nullptr);
      for (size_t i = 0; i < specs.size(); ++i) {
        if (specs[i].count == 0) {
          device_buffers.emplace_back();
          continue;
        }
        host[i].resize(Bytes(specs[i]));
        if (i + 1 == specs.size()) {
          PoisonOutput(host[i], specs[i], nullptr);
        } else {
          FillUniform(host[i], specs[i], options.seed + static_cast<uint32_t>(i));
        }
        CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device->Allocate(Bytes(specs[i])));
        CONVOY_RETURN_IF_ERROR(device->CopyToDevice(buffer.data(), host[i].data(), Bytes(specs[i])));
        device_pointers[i] = buffer.data();
        device_buffers.push_back(std::move(buffer));
      }
      return device->Synchronize();
    }();
    return prepare_status;
  }

  // Runs `algorithm` on the device inputs into a freshly poisoned output and reads the output back.
  absl::StatusOr<std::vector<uint8_t>> RunOnDevice(const typename Op::AlgorithmType& algorithm) {
    const size_t out = specs.size() - 1;
    CONVOY_RETURN_IF_ERROR(device->CopyToDevice(device_pointers[out], host[out].data(), Bytes(specs[out])));
    typename Op::Args args = Traits::MakeArgs(device_pointers);
    DeviceAllocation packed;
    if (const size_t packed_bytes = algorithm.PackedFilterBytes(problem); packed_bytes > 0) {
      CONVOY_ASSIGN_OR_RETURN(packed, device->Allocate(packed_bytes));
      CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(problem, device_pointers[Traits::kFilter], packed.data(),
                                                  device->context()));
      Traits::SetFilter(args, packed.data());
    }
    const size_t workspace_bytes = algorithm.WorkspaceBytes(problem);
    CONVOY_ASSIGN_OR_RETURN(DeviceAllocation workspace, device->Allocate(workspace_bytes));
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(problem, device->context()));
    CONVOY_RETURN_IF_ERROR(algorithm.Run(problem, args, Workspace{workspace.data(), workspace_bytes, state.get()},
                                         device->context()));
    CONVOY_RETURN_IF_ERROR(device->Synchronize());
    std::vector<uint8_t> result(Bytes(specs[out]));
    CONVOY_RETURN_IF_ERROR(device->CopyToHost(result.data(), device_pointers[out], result.size()));
    return result;
  }

  // The trusted output: the CPU reference for small problems (or when no trusted algorithm implements the problem),
  // otherwise the trusted algorithm on the device. Then the candidates' poison (PoisonOutput).
  absl::Status ComputeTrusted() {
    if (trusted_output.has_value()) return absl::OkStatus();
    CONVOY_RETURN_IF_ERROR(ComputeTrustedOutput());
    PoisonOutput(host.back(), specs.back(), &*trusted_output);
    return absl::OkStatus();
  }

  absl::Status ComputeTrustedOutput() {
    if (Traits::Flops(problem) > options.cpu_reference_max_flops) {
      for (const auto* a : OpRegistry<Op>::Global().All(device->backend())) {
        if (a->TrustedForVerification() && a->CanImplement(problem).ok()) {
          trusted_algorithm = a;
          break;
        }
      }
    }
    if (trusted_algorithm != nullptr) {
      trusted = std::string(trusted_algorithm->name());
      CONVOY_ASSIGN_OR_RETURN(std::vector<uint8_t> output, RunOnDevice(*trusted_algorithm));
      trusted_output = std::move(output);
      return absl::OkStatus();
    }
    std::vector<std::vector<uint8_t>> reference_buffers = host;
    std::vector<void*> pointers(specs.size(), nullptr);
    for (size_t i = 0; i < specs.size(); ++i) {
      if (specs[i].count > 0) pointers[i] = reference_buffers[i].data();
    }
    CONVOY_RETURN_IF_ERROR(reference::Run(problem, Traits::MakeArgs(pointers)));
    trusted_output = std::move(reference_buffers.back());
    return absl::OkStatus();
  }
};

template <typename Op>
VerificationSession<Op>::VerificationSession(const typename Op::Problem& problem, Device& device,
                                             const VerificationOptions& options)
    : state_(std::make_unique<State>()) {
  state_->problem = problem;
  state_->device = &device;
  state_->options = options;
}

template <typename Op>
VerificationSession<Op>::~VerificationSession() = default;

template <typename Op>
const std::string& VerificationSession<Op>::trusted() const {
  return state_->trusted;
}

template <typename Op>
VerificationRecord VerificationSession<Op>::Verify(const typename Op::AlgorithmType& algorithm) {
  VerificationRecord record;
  record.algorithm = std::string(algorithm.name());
  auto reject = [&](const char* reason, std::string detail) {
    record.passed = false;
    record.reason = reason;
    record.detail = std::move(detail);
    return record;
  };
  State& s = *state_;
  if (absl::Status ready = s.Prepare(); !ready.ok()) {
    return reject(kRejectedRunFailed, absl::StrCat("preparing the inputs: ", ready.message()));
  }
  if (absl::Status trusted = s.ComputeTrusted(); !trusted.ok()) {
    return reject(kRejectedRunFailed, absl::StrCat("computing the trusted result (", s.trusted, "): ",
                                                   trusted.message()));
  }
  record.trusted = s.trusted;
  if (&algorithm == s.trusted_algorithm) {
    record.passed = true;  // the trusted result is its own
    return record;
  }
  absl::StatusOr<std::vector<uint8_t>> output = s.RunOnDevice(algorithm);
  if (!output.ok()) return reject(kRejectedRunFailed, std::string(output.status().message()));
  const Comparison c = Compare(*output, *s.trusted_output, s.specs.back(), VerifiedOp<Op>::ToleranceOf(s.problem));
  record.max_error = c.max_error;
  if (c.non_finite) return reject(kRejectedNonFinite, c.first_bad);
  if (c.max_error > 1.0) return reject(kRejectedMismatch, c.first_bad);
  record.passed = true;
  return record;
}

template class VerificationSession<Conv2dOp>;
template class VerificationSession<GemmOp>;
template class VerificationSession<QuantizedConv2dOp>;

AlgorithmRejections& AlgorithmRejections::Global() {
  static AlgorithmRejections* rejections = new AlgorithmRejections();
  return *rejections;
}

void AlgorithmRejections::Record(const std::string& algorithm, const std::string& reason) {
  convoy::MutexLock lock(&mu_);
  ++counts_[{algorithm, reason}];
}

std::vector<AlgorithmRejections::Count> AlgorithmRejections::Counts() const {
  std::vector<Count> out;
  {
    convoy::MutexLock lock(&mu_);
    for (const auto& [key, count] : counts_) out.push_back({key.first, key.second, count});
  }
  std::sort(out.begin(), out.end(), [](const Count& a, const Count& b) {
    return std::tie(a.algorithm, a.reason) < std::tie(b.algorithm, b.reason);
  });
  return out;
}

int64_t AlgorithmRejections::Total() const {
  convoy::MutexLock lock(&mu_);
  int64_t total = 0;
  for (const auto& [key, count] : counts_) total += count;
  return total;
}

std::string DescribeRejection(const VerificationRecord& record, const std::string& problem) {
  return absl::StrFormat("rejected %s for %s: %s, max error %.3g x the tolerance against %s%s", record.algorithm,
                         problem, record.reason, record.max_error, record.trusted.empty() ? "nothing" : record.trusted,
                         record.detail.empty() ? "" : absl::StrCat(" (", record.detail, ")"));
}

}  // namespace convoy
