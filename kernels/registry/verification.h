// On-device verification of algorithm choices: before an algorithm is used for a problem on a device, its output is
// compared once, on that device, with a trusted result for the same inputs, within the precision's stated tolerance
// (kernels/common/tolerance.h). SelectAlgorithm (autotuner.h) calls it for the heuristic's choice and for every
// candidate the autotuner times; a candidate that disagrees is never used (the next one is taken), its record is kept
// in the algorithm cache (so a restart with the saved cache file does not repeat the work), and it is counted in
// AlgorithmRejections (the server exports convoy_algorithm_rejected_total{algorithm,reason}).
//
//   VerificationSession<Conv2dOp> session(problem, device, options);   // inputs made and uploaded once
//   VerificationRecord record = session.Verify(*candidate);            // passed, max_error, reason
//
// The trusted result: the CPU reference (kernels/cpu/reference, double precision) for problems of at most
// options.cpu_reference_max_flops FLOPs, otherwise the backend's trusted algorithm on the same device (the one whose
// TrustedForVerification() is true: the SIMT kernels, every product exact in FP32), itself never verified against
// anything else at that size. Inputs are uniform in [-1, 1) (scale in [0.5, 1.5)), seeded by options.seed, so every
// process verifies a problem on the same data; outputs are poisoned with NaN first, so an unwritten element fails.
//
// INT8 convolutions (QuantizedConv2dOp): integer operands over their types' ranges (activations UINT8 0..255 or INT8
// -128..127, weights -127..127, INT32 biases within +-2^16, the residual over its type), multipliers (when the
// problem does not fix them) that spread the outputs over the 8-bit range. 8-bit outputs must equal the trusted
// result exactly (the CUDA INT8 kernels are bit-exact to the reference; the trusted kernel is
// cuda.quantized_conv2d.simt) and are poisoned with the bitwise complement of the trusted result, so an unwritten
// element is a mismatch; FP32 outputs (NaN-poisoned) within a relative 1e-5.
//
// Verified ops: conv2d, GEMM and the INT8 convolution (the ops with competing algorithms and shape-dependent
// kernels). The other ops have one kernel per shape class and are covered by the cross-backend suites only.
//
// Cost at load (per distinct problem, i.e. per layer and batch size, once per device identity): one run of the
// candidate plus, the first time, one run of the trusted algorithm (or the reference on the host), the uploads of
// the inputs and one output read-back. docs/cuda_kernels.md has the numbers.
#ifndef CONVOY_KERNELS_REGISTRY_VERIFICATION_H_
#define CONVOY_KERNELS_REGISTRY_VERIFICATION_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "kernels/common/mutex.h"
#include "kernels/registry/algorithm.h"
#include "kernels/registry/algorithm_cache.h"
#include "kernels/registry/device.h"

namespace convoy {

struct VerificationOptions {
  // Verify choices at all. The runtime turns it off only where asked (config `optimization.verify_algorithms`).
  bool enabled = true;
  // Also on the CPU backend (off: the CPU algorithms run the cross-backend suite on the CPU the tests run on, and
  // a verification per layer and batch size would slow CPU loads for little).
  bool on_cpu = false;
  // Problems up to this many FLOPs are checked against the CPU reference (about a tenth of a second on one core),
  // larger ones against the trusted algorithm on the device.
  int64_t cpu_reference_max_flops = int64_t{1} << 24;
  uint32_t seed = 20260611;
};

// Why a candidate was rejected (the `reason` label of convoy_algorithm_rejected_total).
inline constexpr char kRejectedMismatch[] = "mismatch";      // outside the tolerance (8-bit: also unwritten)
inline constexpr char kRejectedNonFinite[] = "non_finite";   // NaN/Inf (or unwritten) where the trusted result is finite
inline constexpr char kRejectedRunFailed[] = "run_failed";   // Run or the device returned an error

// Whether `Op` is verified at all (conv2d, GEMM, INT8 conv2d).
template <typename Op>
struct VerificationSupported {
  static constexpr bool value = false;
};
template <>
struct VerificationSupported<Conv2dOp> {
  static constexpr bool value = true;
};
template <>
struct VerificationSupported<GemmOp> {
  static constexpr bool value = true;
};
template <>
struct VerificationSupported<QuantizedConv2dOp> {
  static constexpr bool value = true;
};

// Whether choices for `Op` on `device` are verified under `options`.
template <typename Op>
bool VerificationApplies(const Device& device, const VerificationOptions& options) {
  return VerificationSupported<Op>::value && options.enabled && (device.backend() != Backend::kCpu || options.on_cpu);
}

// One problem on one device: the random inputs (host copies and device buffers) and the trusted output, made on
// first use and shared by every candidate verified in the session. Thread-compatible.
template <typename Op>
class VerificationSession {
 public:
  VerificationSession(const typename Op::Problem& problem, Device& device, const VerificationOptions& options);
  ~VerificationSession();
  VerificationSession(const VerificationSession&) = delete;
  VerificationSession& operator=(const VerificationSession&) = delete;

  // Runs `algorithm` once on the session's inputs and compares with the trusted output. Never fails: a run that
  // fails is a rejected record (reason run_failed) with the error in `detail`. The trusted algorithm itself passes
  // without a comparison when the trusted result comes from it.
  VerificationRecord Verify(const typename Op::AlgorithmType& algorithm);

  // "reference" or the trusted algorithm's name (after the first Verify).
  const std::string& trusted() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

extern template class VerificationSession<Conv2dOp>;
extern template class VerificationSession<GemmOp>;
extern template class VerificationSession<QuantizedConv2dOp>;

// Process-wide counts of rejected (algorithm, reason) pairs, for the metric. Thread-safe.
class AlgorithmRejections {
 public:
  struct Count {
    std::string algorithm;
    std::string reason;
    int64_t count = 0;
  };
  static AlgorithmRejections& Global();
  void Record(const std::string& algorithm, const std::string& reason);
  // Sorted by algorithm, then reason.
  std::vector<Count> Counts() const;
  int64_t Total() const;

 private:
  mutable convoy::Mutex mu_;
  absl::flat_hash_map<std::pair<std::string, std::string>, int64_t> counts_ ABSL_GUARDED_BY(mu_);
};

// "rejected cuda.conv2d.x for <problem>: mismatch, max error 3.2x the tolerance (...)": the log line of a rejection.
std::string DescribeRejection(const VerificationRecord& record, const std::string& problem);

}  // namespace convoy

#endif  // CONVOY_KERNELS_REGISTRY_VERIFICATION_H_
