// The cross-backend suite: every registered algorithm of a backend against the reference, over the shared problem
// list. One call per op in a gtest TEST:
//
//   TEST(CpuCrossBackendTest, Pool2d) {
//     ExpectAllAlgorithmsMatchReference<Pool2dOp>(Backend::kCpu, CpuDevice::Default());
//   }
//
// For every problem of ProblemsFor<Problem>() and every algorithm of `backend` that CanImplement it, one case:
// fresh random inputs (seeded per problem; the seed is in every failure message), copied to the device; outputs
// poisoned with NaN (an unwritten element fails); the filter packed when the algorithm asks for it; the workspace
// it asks for allocated; its plan-time state prepared (Algorithm::Prepare); Run; Synchronize; copy back; compare with
// reference::Run on the host copies with the tolerance of op_case_traits.h. The reference runs once per problem,
// whatever the number of algorithms. All device memory goes through Device, so the same call checks the CPU backend,
// the CUDA backend on a GPU, and the CUDA kernels on the emulated device.
//
// It prints how many cases ran per algorithm, and fails when a registered algorithm of the backend never ran on any
// problem (a kernel the list does not reach is untested) or when no algorithm is registered at all.
#ifndef CONVOY_KERNELS_TESTING_CROSS_BACKEND_SUITE_H_
#define CONVOY_KERNELS_TESTING_CROSS_BACKEND_SUITE_H_

#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/reference/reference_ops.h"
#include "kernels/registry/device.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/op_case_traits.h"
#include "kernels/testing/problem_list.h"
#include "kernels/testing/test_tensors.h"

namespace convoy::testing {

struct CrossBackendOptions {
  // Seeds of case i are base_seed + 64 * i + buffer index.
  uint32_t base_seed = 20240601;
  // Multiplies both tolerances (e.g. for a backend that legitimately computes in lower precision).
  double tolerance_scale = 1.0;
  // Fail when no algorithm of the backend is registered for the op.
  bool require_registered_algorithms = true;
  // Only the algorithms this accepts run (all when empty); the others are neither run nor counted.
  std::function<bool(absl::string_view name)> algorithm_filter;
  // Fail when an algorithm that runs here implements none of the problems (off for lists that cover only part of
  // what the algorithms implement, e.g. the model layers, whose shared-list test checks every algorithm runs).
  bool require_every_algorithm = true;
  // Run each case the way a CUDA-graph plan does: recorded on a queue of its own (Device::CreateQueue), then replayed.
  // Catches kernels that launch on the wrong stream, allocate or wait (forbidden inside a capture). Only for devices
  // whose queues can record (CUDA, real or emulated).
  bool record_and_replay = false;
};

namespace cross_backend_internal {

// Host copies of one case's buffers; null pointers for empty (absent optional) buffers.
struct HostBuffers {
  std::vector<HostBuffer> buffers;
  std::vector<void*> pointers;
};

absl::StatusOr<HostBuffers> MakeHostBuffers(const std::vector<BufferSpec>& specs, uint32_t seed, bool poison);
absl::StatusOr<std::vector<DeviceAllocation>> CopyToDevice(Device& device, const std::vector<BufferSpec>& specs,
                                                           const HostBuffers& host, std::vector<void*>& pointers);
// Compares each output buffer; the status names the output.
absl::Status CompareOutputs(const std::vector<BufferSpec>& specs, const HostBuffers& actual,
                            const HostBuffers& expected, Tolerance tolerance);

// One problem's inputs (seeded) and the reference's outputs, computed once and shared by every algorithm run on it.
struct ReferenceCase {
  std::vector<BufferSpec> in_specs, out_specs;
  HostBuffers inputs, expected;
};

template <typename Op>
absl::StatusOr<ReferenceCase> MakeReferenceCase(const typename Op::Problem& problem, uint32_t seed) {
  using Traits = OpCaseTraits<typename Op::Problem>;
  ReferenceCase c;
  c.in_specs = Traits::Inputs(problem);
  c.out_specs = Traits::Outputs(problem);
  CONVOY_ASSIGN_OR_RETURN(c.inputs, MakeHostBuffers(c.in_specs, seed, /*poison=*/false));
  CONVOY_ASSIGN_OR_RETURN(c.expected, MakeHostBuffers(c.out_specs, seed, /*poison=*/true));
  CONVOY_RETURN_IF_ERROR(reference::Run(problem, Traits::MakeArgs(problem, c.inputs.pointers, c.expected.pointers)));
  return c;
}

// Runs `algorithm` on the case's inputs (copied to the device afresh, outputs poisoned with NaN) and compares with the
// case's reference outputs.
template <typename Op>
absl::Status RunAgainstReference(const typename Op::AlgorithmType& algorithm, const typename Op::Problem& problem,
                                 const ReferenceCase& reference_case, Device& device, Tolerance tolerance,
                                 bool record_and_replay = false) {
  using Traits = OpCaseTraits<typename Op::Problem>;
  const std::vector<BufferSpec>& in_specs = reference_case.in_specs;
  const std::vector<BufferSpec>& out_specs = reference_case.out_specs;
  CONVOY_ASSIGN_OR_RETURN(HostBuffers actual, MakeHostBuffers(out_specs, 0, /*poison=*/true));
  std::vector<void*> device_in, device_out;
  CONVOY_ASSIGN_OR_RETURN(auto in_allocations, CopyToDevice(device, in_specs, reference_case.inputs, device_in));
  CONVOY_ASSIGN_OR_RETURN(auto out_allocations, CopyToDevice(device, out_specs, actual, device_out));
  const ExecutionContext context = device.context();
  DeviceAllocation packed;
  if (const size_t packed_bytes = algorithm.PackedFilterBytes(problem); packed_bytes > 0) {
    const int filter = Traits::FilterInput(problem);
    if (filter < 0) return absl::InternalError("asks for a packed filter but the op has none");
    CONVOY_ASSIGN_OR_RETURN(packed, device.Allocate(packed_bytes));
    CONVOY_RETURN_IF_ERROR(algorithm.PackFilter(problem, device_in[filter], packed.data(), context));
    device_in[filter] = packed.data();
  }
  const size_t workspace_bytes = algorithm.WorkspaceBytes(problem);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation workspace, device.Allocate(workspace_bytes));
  CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<AlgorithmState> state, algorithm.Prepare(problem, context));
  const typename Op::Args args = Traits::MakeArgs(problem, device_in, device_out);
  if (record_and_replay) {
    CONVOY_RETURN_IF_ERROR(device.Synchronize());  // the uploads above ran on the device's own stream
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DeviceQueue> queue, device.CreateQueue());
    if (!queue->CanRecord()) return absl::FailedPreconditionError("record_and_replay: this device cannot record");
    const ExecutionContext queue_context = queue->context();
    absl::StatusOr<std::unique_ptr<RecordedWork>> recorded = queue->Record(
        [&] { return algorithm.Run(problem, args, Workspace{workspace.data(), workspace_bytes, state.get()},
                                   queue_context); });
    if (!recorded.ok()) {
      return absl::Status(recorded.status().code(), absl::StrCat("recording: ", recorded.status().message()));
    }
    CONVOY_RETURN_IF_ERROR((*recorded)->Replay());
    CONVOY_RETURN_IF_ERROR(queue->Synchronize());
  } else {
    CONVOY_RETURN_IF_ERROR(
        algorithm.Run(problem, args, Workspace{workspace.data(), workspace_bytes, state.get()}, context));
    CONVOY_RETURN_IF_ERROR(device.Synchronize());
  }
  for (size_t i = 0; i < out_specs.size(); ++i) {
    const size_t bytes = static_cast<size_t>(out_specs[i].count) * DataTypeSize(out_specs[i].dtype);
    CONVOY_RETURN_IF_ERROR(device.CopyToHost(actual.pointers[i], device_out[i], bytes));
  }
  return CompareOutputs(out_specs, actual, reference_case.expected, tolerance);
}

// Runs `algorithm` on `problem` on the device and compares with the reference. `seed` makes the inputs.
template <typename Op>
absl::Status RunOneCase(const typename Op::AlgorithmType& algorithm, const typename Op::Problem& problem,
                        Device& device, uint32_t seed, Tolerance tolerance, bool record_and_replay = false) {
  CONVOY_ASSIGN_OR_RETURN(ReferenceCase reference_case, MakeReferenceCase<Op>(problem, seed));
  return RunAgainstReference<Op>(algorithm, problem, reference_case, device, tolerance, record_and_replay);
}

}  // namespace cross_backend_internal

// Runs every (problem, algorithm) case of `problems` (default: the shared list) and reports failures through gtest.
template <typename Op>
void ExpectAllAlgorithmsMatchReference(Backend backend, Device& device,
                                       const std::vector<typename Op::Problem>& problems =
                                           ProblemsFor<typename Op::Problem>(),
                                       const CrossBackendOptions& options = CrossBackendOptions()) {
  using Problem = typename Op::Problem;
  std::vector<const typename Op::AlgorithmType*> algorithms;
  for (const auto* algorithm : OpRegistry<Op>::Global().All(backend)) {
    if (!options.algorithm_filter || options.algorithm_filter(algorithm->name())) algorithms.push_back(algorithm);
  }
  const std::string op_name(OpKindName(Problem::kKind));
  if (algorithms.empty()) {
    if (options.require_registered_algorithms) {
      ADD_FAILURE() << "no " << BackendName(backend) << " algorithm is registered for " << op_name
                    << " (is its library linked with alwayslink?)";
    }
    return;
  }
  std::map<std::string, int> cases_run;
  for (const auto* algorithm : algorithms) cases_run[std::string(algorithm->name())] = 0;
  int total = 0;
  for (size_t i = 0; i < problems.size(); ++i) {
    const Problem& problem = problems[i];
    Tolerance tolerance = OpCaseTraits<Problem>::TolerancePerOutput(problem);
    tolerance.relative *= options.tolerance_scale;
    tolerance.absolute *= options.tolerance_scale;
    const uint32_t seed = options.base_seed + 64 * static_cast<uint32_t>(i);
    std::optional<absl::StatusOr<cross_backend_internal::ReferenceCase>> reference_case;  // made on first use
    for (const auto* algorithm : algorithms) {
      if (!algorithm->CanImplement(problem).ok()) continue;
      if (!reference_case.has_value()) reference_case = cross_backend_internal::MakeReferenceCase<Op>(problem, seed);
      const absl::Status status =
          reference_case->ok() ? cross_backend_internal::RunAgainstReference<Op>(
                                     *algorithm, problem, **reference_case, device, tolerance, options.record_and_replay)
                               : reference_case->status();
      ++cases_run[std::string(algorithm->name())];
      ++total;
      EXPECT_TRUE(status.ok()) << algorithm->name() << " on " << problem.ToString() << " (case " << i
                               << ", seed " << seed << "): " << status.message();
    }
  }
  std::cout << "[cross-backend] " << op_name << " on " << BackendName(backend)
            << (options.record_and_replay ? " (recorded, replayed)" : "") << ": " << total << " cases over "
            << problems.size() << " problems\n";
  for (const auto& [name, count] : cases_run) {
    std::cout << "[cross-backend]   " << name << ": " << count << " cases\n";
    if (!options.require_every_algorithm) continue;
    EXPECT_GT(count, 0) << name << " is registered for " << BackendName(backend) << " but implements none of the "
                        << problems.size() << " " << op_name << " problems: add a problem it covers";
  }
}

}  // namespace convoy::testing

#endif  // CONVOY_KERNELS_TESTING_CROSS_BACKEND_SUITE_H_
