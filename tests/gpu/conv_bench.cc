// Ours against cuDNN's best per ResNet-50 conv layer, timed the same way on both sides (see conv_bench.h).
#include "tests/gpu/conv_bench.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/cuda/conv2d_gemm_test_problems.h"
#include "kernels/cuda_emulation/cuda_host_api.h"
#include "kernels/registry/registry.h"
#include "kernels/testing/test_tensors.h"
#include "tests/gpu/cudnn_bench.h"
#include "tests/gpu/launch_timing.h"

namespace convoy::gpu_check {
namespace {

// A device buffer of `count` elements of `dtype`, uniform in [-1, 1).
absl::StatusOr<DeviceAllocation> RandomDeviceBuffer(cuda::CudaDevice& device, DataType dtype, int64_t count,
                                                    uint32_t seed) {
  CONVOY_ASSIGN_OR_RETURN(HostBuffer host, testing::RandomBuffer(dtype, count, seed));
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(dtype);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(bytes));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), host.data(), bytes));
  return buffer;
}

struct Ours {
  std::string algorithm;
  LaunchTiming timing;
};

// Our fastest algorithm on `p` with `timing` options.
absl::StatusOr<Ours> TimeOurs(const Conv2dProblem& p, const Conv2dArgs& args, void* workspace, size_t workspace_bytes,
                              cuda::CudaDevice& device, const LaunchTimingOptions& timing) {
  std::optional<Ours> best;
  std::string errors;
  std::vector<const Conv2dAlgorithm*> candidates = OpRegistry<Conv2dOp>::Global().Candidates(p, Backend::kCuda);
  // The score-1 fallback (cuda.conv2d.direct_simt) never wins where a real kernel applies: not worth its seconds.
  const bool has_real = std::any_of(candidates.begin(), candidates.end(),
                                    [&](const Conv2dAlgorithm* a) { return a->HeuristicScore(p) > 1; });
  for (const Conv2dAlgorithm* algorithm : candidates) {
    if (has_real && algorithm->HeuristicScore(p) <= 1) continue;
    const size_t need = algorithm->WorkspaceBytes(p);
    if (need > workspace_bytes || algorithm->PackedFilterBytes(p) > 0) {
      absl::StrAppend(&errors, " ", algorithm->name(), ": needs a packed filter or ", need, " bytes of workspace;");
      continue;
    }
    auto launch = [&] { return algorithm->Run(p, args, Workspace{workspace, need}, device.context()); };
    absl::StatusOr<LaunchTiming> t = TimeLaunches(device.stream(), launch, timing);
    if (!t.ok()) {
      absl::StrAppend(&errors, " ", algorithm->name(), ": ", t.status().message(), ";");
      continue;
    }
    if (!best.has_value() || t->microseconds < best->timing.microseconds) {
      best = Ours{std::string(algorithm->name()), *t};
    }
  }
  if (!best.has_value()) return absl::InternalError(absl::StrCat("no algorithm of ours ran:", errors));
  return *best;
}

std::vector<testing::ResNetLayer> BenchLayers(const ConvBenchOptions& options) {
  std::vector<testing::ResNetLayer> layers;
  for (const DataType dtype : {DataType::kFloat16, DataType::kFloat32}) {
    for (int batch : options.batches) {
      for (testing::ResNetLayer& layer : testing::ResNet50ConvLayers(batch, dtype, Layout::kNHWC)) {
        if (options.quick) {  // tiny stand-ins of two layer kinds, for the emulated run
          if (layer.name.rfind("res5_3x3_512", 0) != 0 && layer.name.rfind("res5_1x1_2048", 0) != 0) continue;
          layer.problem.c = 16, layer.problem.k = 32, layer.problem.h = layer.problem.w = 6;
        }
        layers.push_back(std::move(layer));
      }
    }
  }
  return layers;
}

double Tflops(double flops, double microseconds) { return microseconds > 0 ? flops / (microseconds * 1e-6) / 1e12 : 0; }

absl::Status BenchLayer(const testing::ResNetLayer& layer, const ConvBenchOptions& options, cuda::CudaDevice& device,
                        DeviceAllocation& workspace) {
  const Conv2dProblem& p = layer.problem;
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation x, RandomDeviceBuffer(device, p.dtype, p.input_desc().num_elements(), 1));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation w, RandomDeviceBuffer(device, p.dtype, p.filter_elements(), 2));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation bias, RandomDeviceBuffer(device, DataType::kFloat32, p.k, 3));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation y, device.Allocate(p.output_desc().size_bytes()));
  Conv2dArgs args;
  args.x = x.data(), args.w = w.data(), args.bias = bias.as<float>(), args.y = y.data();
  LaunchTimingOptions timing;
  if (options.quick) timing.warmup = 1, timing.samples = 1, timing.min_launches = 1, timing.max_launches = 2;
  CONVOY_ASSIGN_OR_RETURN(Ours ours, TimeOurs(p, args, workspace.data(), workspace.bytes(), device, timing));

  CudnnBenchOptions cudnn_options;
  cudnn_options.timing = timing;
  absl::StatusOr<CudnnResult> cudnn = TimeCudnnBest(p, x.data(), w.data(), bias.as<float>(), y.data(),
                                                    workspace.data(), workspace.bytes(), device.stream(),
                                                    cudnn_options);
  if (cudnn.ok() && cudnn->timing.graph != ours.timing.graph) {
    // Both sides the same way: where cuDNN could not be captured into a graph, ours is timed on the stream too.
    LaunchTimingOptions same = timing;
    same.as_graph = cudnn->timing.graph;
    CONVOY_ASSIGN_OR_RETURN(ours, TimeOurs(p, args, workspace.data(), workspace.bytes(), device, same));
  }
  const double flops = static_cast<double>(p.flops());
  const double peak = PeakTensorTflops(device.info(), p.dtype);
  const double our_tflops = Tflops(flops, ours.timing.microseconds);
  const std::string dtype = p.dtype == DataType::kFloat32 ? "TF32" : std::string(DataTypeName(p.dtype));
  std::string cudnn_us = "-", ratio = "-", cudnn_tflops = "-", winner = "-", notes;
  if (cudnn.ok()) {
    const double r = ours.timing.microseconds / cudnn->timing.microseconds;
    cudnn_us = absl::StrFormat("%.2f", cudnn->timing.microseconds);
    ratio = absl::StrFormat("%.2f", r);
    cudnn_tflops = absl::StrFormat("%.1f", Tflops(flops, cudnn->timing.microseconds));
    winner = cudnn->winner + (cudnn->fused ? "" : " (conv only)");
    notes = absl::StrCat("legacy best: ", cudnn->legacy_best, "; backend best: ", cudnn->backend_best, "; ",
                         cudnn->candidates, " timed");
    Say("@@ratio ", dtype, " ", r);
  } else {
    notes = std::string(cudnn.status().message());
  }
  Say(absl::StrFormat("%-20s %-5s %-32s %9.2f %9s %6s %7.1f %5s %7s %-10s %-30s | %s", layer.name, dtype,
                      ours.algorithm, ours.timing.microseconds, cudnn_us, ratio, our_tflops,
                      peak > 0 ? absl::StrFormat("%.0f%%", 100 * our_tflops / peak) : "-", cudnn_tflops,
                      ours.timing.method(), winner, notes));
  return absl::OkStatus();
}

// ---- INT8 ------------------------------------------------------------------------------------------------------

// A device copy of `count` random values of T in [lo, hi].
template <typename T>
absl::StatusOr<DeviceAllocation> RandomIntegers(cuda::CudaDevice& device, int64_t count, int lo, int hi,
                                                uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<T> host(static_cast<size_t>(count));
  for (T& v : host) v = static_cast<T>(dist(rng));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation buffer, device.Allocate(host.size() * sizeof(T)));
  CONVOY_RETURN_IF_ERROR(device.CopyToDevice(buffer.data(), host.data(), host.size() * sizeof(T)));
  return buffer;
}

// The INT8 problem of a ResNet-50 layer's geometry: INT8 in and out without zero points (what cuDNN's INT8_CONFIG
// computes), bias + ReLU, per-channel scales.
QuantizedConv2dProblem Int8ProblemOf(const Conv2dProblem& c) {
  QuantizedConv2dProblem p;
  p.n = c.n, p.h = c.h, p.w = c.w, p.c = c.c, p.k = c.k, p.r = c.r, p.s = c.s;
  p.pad_top = c.pad_top, p.pad_bottom = c.pad_bottom, p.pad_left = c.pad_left, p.pad_right = c.pad_right;
  p.stride_h = c.stride_h, p.stride_w = c.stride_w, p.dilation_h = c.dilation_h, p.dilation_w = c.dilation_w;
  p.groups = c.groups;
  p.src_type = p.dst_type = DataType::kInt8;
  p.layout = Layout::kNHWC;
  p.epilogue.has_bias = true, p.epilogue.relu = true;
  return p;
}

// Our fastest INT8 algorithm on `p`: each candidate's filter packed once (plan-time work, not timed), then its Run.
// `families` (optional) gets the best time of the wgmma kernels (cuda.quantized_conv2d.hopper_*) and of the mma.sync
// ones, where both ran.
absl::StatusOr<Ours> TimeOursInt8(const QuantizedConv2dProblem& p, const QuantizedConv2dArgs& args,
                                  const void* raw_filter, cuda::CudaDevice& device, const LaunchTimingOptions& timing,
                                  std::string* families = nullptr) {
  std::optional<Ours> best;
  std::optional<double> best_wgmma_us, best_mma_us;
  std::string errors;
  for (const QuantizedConv2dAlgorithm* algorithm :
       OpRegistry<QuantizedConv2dOp>::Global().Candidates(p, Backend::kCuda)) {
    // The direct kernel (cuda.quantized_conv2d.simt, verification's trusted one) never wins: not worth its seconds.
    if (algorithm->TrustedForVerification()) continue;
    absl::StatusOr<Ours> ours = [&]() -> absl::StatusOr<Ours> {
      if (algorithm->WorkspaceBytes(p) > 0) return absl::UnimplementedError("needs a workspace");
      QuantizedConv2dArgs run_args = args;
      DeviceAllocation packed;
      if (const size_t bytes = algorithm->PackedFilterBytes(p); bytes > 0) {
        CONVOY_ASSIGN_OR_RETURN(packed, device.Allocate(bytes));
        CONVOY_RETURN_IF_ERROR(algorithm->PackFilter(p, raw_filter, packed.data(), device.context()));
        run_args.w = packed.as<int8_t>();
      }
      auto launch = [&] { return algorithm->Run(p, run_args, Workspace{}, device.context()); };
      CONVOY_ASSIGN_OR_RETURN(LaunchTiming t, TimeLaunches(device.stream(), launch, timing));
      return Ours{std::string(algorithm->name()), t};
    }();
    if (!ours.ok()) {
      absl::StrAppend(&errors, " ", algorithm->name(), ": ", ours.status().message(), ";");
      continue;
    }
    if (!best.has_value() || ours->timing.microseconds < best->timing.microseconds) best = *ours;
    std::optional<double>& family = absl::StrContains(ours->algorithm, ".hopper_") ? best_wgmma_us : best_mma_us;
    if (!family.has_value() || ours->timing.microseconds < *family) family = ours->timing.microseconds;
  }
  if (!best.has_value()) return absl::InternalError(absl::StrCat("no INT8 algorithm of ours ran:", errors));
  if (families != nullptr && best_wgmma_us.has_value() && best_mma_us.has_value()) {
    *families = absl::StrFormat("wgmma %.2f us, mma.sync %.2f us (%.2fx); ", *best_wgmma_us, *best_mma_us,
                                *best_mma_us / *best_wgmma_us);
  }
  return *best;
}

absl::Status BenchInt8Layer(const testing::ResNetLayer& layer, const ConvBenchOptions& options,
                            cuda::CudaDevice& device, DeviceAllocation& workspace) {
  const QuantizedConv2dProblem p = Int8ProblemOf(layer.problem);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation x, RandomIntegers<int8_t>(device, p.input_desc().num_elements(), -128,
                                                                     127, 1));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation w, RandomIntegers<int8_t>(device, p.filter_elements(), -127, 127, 2));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation bias, RandomIntegers<int32_t>(device, p.k, -2000, 2000, 3));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation bias_float, RandomDeviceBuffer(device, DataType::kFloat32, p.k, 3));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation scale, RandomDeviceBuffer(device, DataType::kFloat32, p.k, 4));
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation y, device.Allocate(p.output_desc().size_bytes()));
  QuantizedConv2dArgs args{x.data(), w.as<int8_t>(), bias.as<int32_t>(), scale.as<float>(), nullptr, y.data()};
  LaunchTimingOptions timing;
  if (options.quick) timing.warmup = 1, timing.samples = 1, timing.min_launches = 1, timing.max_launches = 2;
  std::string families;
  CONVOY_ASSIGN_OR_RETURN(Ours ours, TimeOursInt8(p, args, w.data(), device, timing, &families));

  CudnnBenchOptions cudnn_options;
  cudnn_options.timing = timing;
  absl::StatusOr<CudnnResult> cudnn = TimeCudnnInt8(p, x.data(), w.data(), bias_float.as<float>(), y.data(),
                                                    workspace.data(), workspace.bytes(), device.stream(),
                                                    cudnn_options);
  if (cudnn.ok() && cudnn->timing.graph != ours.timing.graph) {
    LaunchTimingOptions same = timing;
    same.as_graph = cudnn->timing.graph;
    CONVOY_ASSIGN_OR_RETURN(ours, TimeOursInt8(p, args, w.data(), device, same, &families));
  }
  const double ops = static_cast<double>(p.flops());
  const double peak = 2 * PeakTensorTflops(device.info(), DataType::kFloat16);  // dense INT8: twice FP16's rate
  const double our_tops = Tflops(ops, ours.timing.microseconds);
  std::string cudnn_us = "-", ratio = "-", cudnn_tops = "-", winner = "-", notes;
  if (cudnn.ok()) {
    const double r = ours.timing.microseconds / cudnn->timing.microseconds;
    cudnn_us = absl::StrFormat("%.2f", cudnn->timing.microseconds);
    ratio = absl::StrFormat("%.2f", r);
    cudnn_tops = absl::StrFormat("%.1f", Tflops(ops, cudnn->timing.microseconds));
    winner = cudnn->winner + (cudnn->fused ? "" : " (conv only)");
    notes = absl::StrCat(families, cudnn->candidates, " timed; cuDNN: one alpha, ours: per-channel scales");
    Say("@@ratio INT8 ", r);
  } else {
    notes = absl::StrCat(families, cudnn.status().message());
  }
  Say(absl::StrFormat("%-20s %-5s %-50s %9.2f %9s %6s %7.1f %5s %7s %-10s %-30s | %s", layer.name, "INT8",
                      ours.algorithm, ours.timing.microseconds, cudnn_us, ratio, our_tops,
                      peak > 0 ? absl::StrFormat("%.0f%%", 100 * our_tops / peak) : "-", cudnn_tops,
                      ours.timing.method(), winner, notes));
  return absl::OkStatus();
}

}  // namespace

void RunConvBenchInt8(const ConvBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases) {
  const absl::Status cudnn = CudnnBenchAvailable();
  Say("== Benchmark: ResNet-50 conv layers in INT8 (s8 x s8, INT8 out, bias+ReLU; batch 1 and 8), per-launch device "
      "time, timed as the rows above ==");
  if (device.emulated()) Say("(emulated device: the times below are CPU emulation times, not GPU times)");
  Say(cudnn.ok() ? absl::StrCat("cuDNN ", CudnnVersionString(), ": INT8 through the legacy API (Find, top 3 timed, "
                                "fused bias+ReLU where it takes it)")
                 : absl::StrCat("cuDNN: SKIPPED (", cudnn.message(), ")"));
  const size_t workspace_bytes = options.quick ? (1 << 20) : (size_t{512} << 20);
  absl::StatusOr<DeviceAllocation> workspace = device.Allocate(workspace_bytes);
  if (!workspace.ok()) {
    cases.Fail("bench_int8 workspace", workspace.status().message());
    return;
  }
  Say(absl::StrFormat("%-20s %-5s %-50s %9s %9s %6s %7s %5s %7s %-10s %-30s | %s", "layer", "dtype", "our best",
                      "ours us", "cuDNN us", "ratio", "TOP/s", "peak", "cuDNN", "method", "cuDNN winner", "notes"));
  ConvBenchOptions int8 = options;
  int8.batches.clear();
  for (int batch : options.batches) {
    if (batch <= 8) int8.batches.push_back(batch);
  }
  for (const testing::ResNetLayer& layer : BenchLayers(int8)) {
    if (layer.problem.dtype != DataType::kFloat16) continue;  // one INT8 row per layer geometry
    cases.Run(absl::StrCat("bench_int8 ", layer.name),
              [&] { return BenchInt8Layer(layer, options, device, *workspace); });
  }
}

double PeakTensorTflops(const cuda::GpuInfo& info, DataType dtype) {
  int clock_khz = 0;
  if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, info.index) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  // Dense FP16/BF16 tensor-core FLOP per clock per SM: 4096 on Hopper (sm_90, with wgmma; mma.sync reaches about
  // two thirds of it), 2048 on sm_80, 1024 on other Ampere/Ada parts. TF32 is half of that.
  const int cc = info.compute_major * 10 + info.compute_minor;
  const double per_sm = cc >= 90 ? 4096 : cc == 80 ? 2048 : cc >= 86 ? 1024 : 0;
  const double fp16 = per_sm * info.sm_count * clock_khz * 1e3 / 1e12;
  return dtype == DataType::kFloat32 ? fp16 / 2 : fp16;
}

void RunConvBench(const ConvBenchOptions& options, cuda::CudaDevice& device, CaseRunner& cases) {
  const absl::Status cudnn = CudnnBenchAvailable();
  Say("== Benchmark: ResNet-50 conv layers, bias+ReLU epilogue, per-launch device time (both sides timed the same "
      "way: warm-up, then samples of N back-to-back launches, as one CUDA graph where both capture) ==");
  if (device.emulated()) Say("(emulated device: the times below are CPU emulation times, not GPU times)");
  Say(cudnn.ok() ? absl::StrCat("cuDNN ", CudnnVersionString(),
                                ": best of legacy Find (every algorithm, top 3 timed, fused bias+ReLU) and the backend "
                                "API (conv->add->relu graph, heuristic modes A and B, top 3 engine configs each)")
                 : absl::StrCat("cuDNN: SKIPPED (", cudnn.message(), ")"));
  Say(absl::StrFormat("peak dense tensor TFLOP/s: FP16 %.0f, TF32 %.0f (%s)",
                      PeakTensorTflops(device.info(), DataType::kFloat16),
                      PeakTensorTflops(device.info(), DataType::kFloat32), device.info().ToString()));
  const size_t workspace_bytes = options.quick ? (1 << 20) : (size_t{512} << 20);
  absl::StatusOr<DeviceAllocation> workspace = device.Allocate(workspace_bytes);
  if (!workspace.ok()) {
    cases.Fail("bench workspace", workspace.status().message());
    return;
  }
  Say(absl::StrFormat("%-20s %-5s %-32s %9s %9s %6s %7s %5s %7s %-10s %-30s | %s", "layer", "dtype", "our best",
                      "ours us", "cuDNN us", "ratio", "TFLOP/s", "peak", "cuDNN", "method", "cuDNN winner",
                      "notes"));
  for (const testing::ResNetLayer& layer : BenchLayers(options)) {
    cases.Run(absl::StrCat("bench ", layer.name, " ", DataTypeName(layer.problem.dtype)),
              [&] { return BenchLayer(layer, options, device, *workspace); });
  }
}

}  // namespace convoy::gpu_check
