// Every CUDA conv2d and GEMM algorithm against the CPU reference through the shared cross-backend suite, over the
// shared problem list plus CudaConvExtraProblems() (shapes that reach the tensor-core kernels' corners: several
// k-slices with a partial last one, several block tiles in M and N with ragged edges, NHWC TF32, 1x1 with a
// residual, strided/dilated/padded gathers).
//
// Two builds of this one source:
//   :conv2d_gemm_emulated_test   the kernels compiled against the CUDA emulation, on the emulated CudaDevice; also
//                                runs the barrier-using kernels under the reverse and seeded-random schedules.
//   :conv2d_gemm_cuda_test       the nvcc-built kernels on a real GPU (skips, saying so, where there is none).
// Tolerances are the suite's (op_case_traits.h): FP16 rel 1e-2 / abs 2e-3*sqrt(reduction), BF16 3e-2 / 1.6e-2,
// TF32 2e-3 / 1e-3, FP32 1e-4 / 1e-5 (all tensor-core paths accumulate in FP32).
#include <algorithm>
#include <cmath>
#include <memory>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/common/status_matchers.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/test_device_or_skip.h"
#include "kernels/testing/cross_backend_suite.h"
#include "kernels/testing/problem_list.h"
#include "kernels/testing/test_tensors.h"

#if defined(CONVOY_CUDA_EMULATION)
#include "kernels/cuda_emulation/schedule.h"
#endif

namespace convoy::testing {
namespace {

TEST(CudaConv2dGemmTest, Conv2dMatchesReference) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvTestProblems());
}

TEST(CudaConv2dGemmTest, GemmMatchesReference) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmTestProblems());
}

TEST(CudaConv2dGemmTest, EveryProblemHasACudaConvAlgorithm) {
  for (const Conv2dProblem& problem : CudaConvTestProblems()) {
    EXPECT_TRUE(OpRegistry<Conv2dOp>::Global().Heuristic(problem, Backend::kCuda).ok()) << problem.ToString();
  }
  for (const GemmProblem& problem : CudaGemmTestProblems()) {
    EXPECT_TRUE(OpRegistry<GemmOp>::Global().Heuristic(problem, Backend::kCuda).ok()) << problem.ToString();
  }
}

// The way a plan with CUDA graphs runs them: each case recorded on a stream of its own, then replayed (the extra
// problems reach every algorithm). A kernel that launches on another stream, allocates or waits fails here.
TEST(CudaConv2dGemmTest, EveryAlgorithmRecordsIntoAGraphAndReplays) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  CrossBackendOptions options;
  options.record_and_replay = true;
  ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvExtraProblems(), options);
  ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmExtraProblems(), options);
}

// The tensor-core kernels write 16-byte vectors of output channels when y (and the residual) are 16-byte aligned and
// K fills whole vectors, and element by element otherwise (the GPU faults on a misaligned vector store; the
// emulation traps where it would). Every y aligned to one element must run and give the same output as at the
// allocation's start: 16-byte aligned, two elements off, one element off, for K = 8 and K = 12 (not a whole number of
// FP16 vectors), 1x1 and 3x3 filters (the 1x1 GEMM and the general kernel).
TEST(CudaConv2dGemmTest, TensorCorePathsTakeAnyElementAlignedOutput) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  for (const DataType dtype : {DataType::kFloat32, DataType::kFloat16}) {
    for (const auto& [k, rs] : {std::pair{8, 1}, std::pair{12, 1}, std::pair{8, 3}, std::pair{12, 3}}) {
      Conv2dProblem p;
      p.n = 1, p.h = 4, p.w = 4, p.c = 8, p.k = k, p.dtype = dtype, p.layout = Layout::kNHWC, p.allow_tf32 = true;
      p.r = p.s = rs;
      p.pad_top = p.pad_bottom = p.pad_left = p.pad_right = rs / 2;
      const size_t element = DataTypeSize(dtype), y_bytes = p.output_desc().size_bytes();
      CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer x_host, RandomBuffer(dtype, p.input_desc().num_elements(), 11));
      CONVOY_ASSERT_OK_AND_ASSIGN(HostBuffer w_host, RandomBuffer(dtype, p.filter_elements(), 12));
      CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation x, device->Allocate(x_host.size()));
      CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation w, device->Allocate(w_host.size()));
      CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation y, device->Allocate(y_bytes + 64));
      CONVOY_ASSERT_OK(device->CopyToDevice(x.data(), x_host.data(), x_host.size()));
      CONVOY_ASSERT_OK(device->CopyToDevice(w.data(), w_host.data(), w_host.size()));
      for (const Conv2dAlgorithm* algorithm : OpRegistry<Conv2dOp>::Global().All(Backend::kCuda)) {
        const std::string name(algorithm->name());
        if (name.find("implicit_gemm") == std::string::npos && name.find("gemm_1x1") == std::string::npos) continue;
        if (!algorithm->CanImplement(p).ok()) continue;  // the general kernel leaves 1x1 problems to gemm_1x1
        SCOPED_TRACE(absl::StrCat(name, " ", DataTypeName(dtype), " K = ", k, " R = S = ", rs));
        const size_t workspace_bytes = algorithm->WorkspaceBytes(p);  // the split-K partials
        CONVOY_ASSERT_OK_AND_ASSIGN(DeviceAllocation workspace,
                                    device->Allocate(std::max<size_t>(workspace_bytes, 16)));
        std::vector<std::vector<uint8_t>> outputs;
        for (const size_t shift : {size_t{0}, 2 * element, element}) {
          Conv2dArgs args;
          args.x = x.data(), args.w = w.data(), args.y = y.as<char>() + shift;
          const std::vector<uint8_t> poison(y_bytes + 64, 0xFF);  // NaN in FP32 and FP16
          CONVOY_ASSERT_OK(device->CopyToDevice(y.data(), poison.data(), poison.size()));
          CONVOY_ASSERT_OK(algorithm->Run(p, args, Workspace{workspace.data(), workspace_bytes}, device->context()));
          CONVOY_ASSERT_OK(device->Synchronize());
          outputs.emplace_back(y_bytes);
          CONVOY_ASSERT_OK(device->CopyToHost(outputs.back().data(), args.y, y_bytes));
        }
        EXPECT_EQ(outputs[0], outputs[1]) << "the output depends on where y starts";
        EXPECT_EQ(outputs[0], outputs[2]) << "the output depends on where y starts";
        const std::vector<float> values = ToFloats(outputs[0].data(), dtype, p.output_desc().num_elements());
        for (float v : values) ASSERT_FALSE(std::isnan(v)) << "an output element was not written";
      }
    }
  }
}

#if defined(CONVOY_CUDA_EMULATION)
// The emulation runs a block's threads between barriers in forward order by default; reverse and random orders
// expose a missing __syncthreads (a read of shared memory another thread writes). The extra problems reach every
// algorithm, so every kernel with barriers runs under each order.
TEST(CudaConv2dGemmTest, BarriersHoldUnderReverseAndRandomSchedules) {
  CONVOY_CREATE_DEVICE_OR_SKIP(device);
  using cuda_emulation::Schedule;
  for (const Schedule& schedule : {Schedule::Reverse(), Schedule::SeededRandom(17)}) {
    SCOPED_TRACE(schedule.ToString());
    std::cout << "schedule " << schedule.ToString() << "\n";
    cuda_emulation::ScopedSchedule scoped(schedule);
    ExpectAllAlgorithmsMatchReference<Conv2dOp>(Backend::kCuda, *device, CudaConvExtraProblems());
    ExpectAllAlgorithmsMatchReference<GemmOp>(Backend::kCuda, *device, CudaGemmExtraProblems());
  }
}
#endif

}  // namespace
}  // namespace convoy::testing
