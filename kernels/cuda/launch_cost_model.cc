// The launch-cost model for GEMM-shaped CUDA kernels (see launch_cost_model.h).
#include "kernels/cuda/launch_cost_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"

namespace convoy::cuda {
namespace {

// Resident warps an SM needs before its tensor cores run at full rate: two per scheduler of an sm_80/sm_90 SM for
// mma.sync, one warpgroup (one warp per scheduler) for wgmma.
constexpr double kSaturatingWarps = 8;
constexpr double kSaturatingWgmmaWarps = 4;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Time for one SM to run `blocks` concurrent blocks of `kernel` to completion, in microseconds.
double ConcurrentBlocksUs(int blocks, double block_flops, double block_shared_bytes, double block_l2_bytes,
                          int warps_per_block, bool wgmma, bool tf32, const GpuModel& gpu) {
  if (blocks <= 0) return 0;
  const double clocks_per_us = gpu.clock_ghz * 1e3;
  const double saturation =
      std::min(1.0, blocks * warps_per_block / (wgmma ? kSaturatingWgmmaWarps : kSaturatingWarps));
  const double rate = wgmma ? gpu.wgmma_flops_per_clock : gpu.mma_flops_per_clock;
  if (rate <= 0) return INFINITY;
  const double mma_per_us = rate * (tf32 ? 0.5 : 1.0) * clocks_per_us * saturation;
  const double shared_per_us = gpu.shared_bytes_per_clock * clocks_per_us;
  const double l2_per_us = gpu.l2_gb_per_s * 1e3 / gpu.sm_count;
  const double compute = blocks * block_flops / mma_per_us;
  const double shared = blocks * block_shared_bytes / shared_per_us;
  const double l2 = blocks * block_l2_bytes / l2_per_us;
  return std::max({compute, shared, l2}) + gpu.pipeline_fill_us;
}

}  // namespace

GpuModel GpuModel::H200() { return GpuModel(); }

GpuModel GpuModel::ForArchitecture(int major, int minor) {
  GpuModel gpu;
  gpu.compute_major = major;
  gpu.compute_minor = minor;
  if (major < 9) {  // Ampere/Ada: A100-like constants
    gpu.name = "sm_" + std::to_string(major * 10 + minor);
    gpu.mma_flops_per_clock = 2048;
    gpu.wgmma_flops_per_clock = 0;
    gpu.shared_bytes_per_sm = major == 8 && minor == 0 ? 167936 : 102400;
    gpu.max_shared_bytes_per_block = major == 8 && minor == 0 ? 166912 : 101376;
    gpu.max_threads_per_sm = major == 8 && minor == 0 ? 2048 : 1536;
    gpu.max_blocks_per_sm = major == 8 && minor == 0 ? 32 : 16;
    gpu.clock_ghz = 1.41;
    gpu.dram_gb_per_s = 2000;
    gpu.l2_gb_per_s = 5000;
    gpu.l2_bytes = 40 << 20;
  }
  return gpu;
}

int OccupancyBlocksPerSm(const KernelResources& kernel, const GpuModel& gpu) {
  if (kernel.threads <= 0 || kernel.shared_bytes > gpu.max_shared_bytes_per_block) return 0;
  const int warps = static_cast<int>(CeilDiv(kernel.threads, 32));
  int blocks = gpu.max_blocks_per_sm;
  blocks = std::min(blocks, gpu.max_threads_per_sm / (warps * 32));
  // Registers: each warp takes ceil(registers * 32 / 256) * 256.
  const int registers = std::max(kernel.registers_per_thread, 1);
  const int64_t per_warp = CeilDiv(int64_t{registers} * 32, 256) * 256;
  blocks = std::min<int64_t>(blocks, gpu.registers_per_sm / (per_warp * warps));
  if (kernel.shared_bytes > 0) {
    const int64_t per_block = CeilDiv(kernel.shared_bytes, 128) * 128 + gpu.reserved_shared_bytes_per_block;
    blocks = std::min<int64_t>(blocks, gpu.shared_bytes_per_sm / per_block);
  }
  return std::max(blocks, 0);
}

int LaunchBoundsRegisterCap(int threads, int min_blocks, const GpuModel& gpu) {
  const int64_t warps = CeilDiv(threads, 32) * std::max(min_blocks, 1);
  // Per warp in units of 256 registers, i.e. per thread in units of 8.
  const int64_t per_thread = gpu.registers_per_sm / (warps * 32) / 8 * 8;
  return static_cast<int>(std::min<int64_t>(per_thread, gpu.max_registers_per_thread));
}

int64_t SplitKWorkspaceBytes(int64_t m, int64_t n, int split_k) {
  return split_k > 1 ? int64_t{split_k} * m * n * static_cast<int64_t>(sizeof(float)) : 0;
}

LaunchEstimate EstimateGemmLaunch(const GemmKernelDescription& kernel, const GemmShape& shape, int blocks_per_sm,
                                  const GpuModel& gpu) {
  LaunchEstimate e;
  e.split_k = std::max(kernel.split_k, 1);
  e.tiles = CeilDiv(shape.m, kernel.tile_m) * CeilDiv(shape.n, kernel.tile_n);
  e.blocks = e.tiles * e.split_k;
  e.blocks_per_sm = std::max(blocks_per_sm, 0);
  e.slots = int64_t{gpu.sm_count} * e.blocks_per_sm;
  if (e.slots == 0) {
    e.total_us = INFINITY;
    return e;
  }
  e.waves = static_cast<double>(e.blocks) / e.slots;
  e.tail_efficiency = static_cast<double>(e.blocks) / (std::ceil(e.waves) * e.slots);
  e.k_iterations = CeilDiv(CeilDiv(shape.k, kernel.k_step), e.split_k);

  // One block's work: its whole tile (ragged edges are computed too), its ldmatrix traffic (each warp reads its
  // A and B warp tiles per k step) and its tile loads from L2.
  const double k_elements = static_cast<double>(e.k_iterations) * kernel.k_step;
  const double block_flops = 2.0 * kernel.tile_m * kernel.tile_n * k_elements;
  const double block_shared =
      static_cast<double>(kernel.warps) * (kernel.warp_tile_m + kernel.warp_tile_n) * k_elements * shape.input_bytes;
  const double block_l2 = static_cast<double>(kernel.tile_m + kernel.tile_n) * k_elements * shape.input_bytes *
                          (kernel.gathers ? 1.1 : 1.0);  // gathered rows: partial sectors at image borders
  auto sm_time = [&](int concurrent) {
    return ConcurrentBlocksUs(concurrent, block_flops, block_shared, block_l2, kernel.warps, kernel.wgmma, shape.tf32,
                              gpu);
  };
  const int64_t full_waves = e.blocks / e.slots;
  const int64_t remainder = e.blocks - full_waves * e.slots;
  double mainloop = full_waves * sm_time(e.blocks_per_sm);
  if (remainder > 0) mainloop += sm_time(static_cast<int>(CeilDiv(remainder, gpu.sm_count)));

  // Unique DRAM bytes: A and B once, the output (and residual) once, or the FP32 partials when split.
  const double a_bytes = static_cast<double>(shape.m) * shape.k * shape.input_bytes;
  const double b_bytes = static_cast<double>(shape.n) * shape.k * shape.input_bytes;
  const double outputs = static_cast<double>(shape.m) * shape.n;
  const double partial_bytes = static_cast<double>(SplitKWorkspaceBytes(shape.m, shape.n, e.split_k));
  const double output_bytes = outputs * shape.output_bytes * (shape.residual ? 2 : 1);
  const double dram_per_us = gpu.dram_gb_per_s * 1e3;
  const double written = e.split_k > 1 ? partial_bytes : output_bytes;
  e.mainloop_us = std::max(mainloop, (a_bytes + b_bytes + written) / dram_per_us) + gpu.launch_us;
  if (e.split_k > 1) {
    // The partials stay in L2 when they fit in half of it.
    const double partial_per_us = partial_bytes * 2 <= gpu.l2_bytes ? gpu.l2_gb_per_s * 1e3 : dram_per_us;
    e.reduce_us = partial_bytes / partial_per_us + output_bytes / dram_per_us + gpu.launch_us;
  }
  e.total_us = e.mainloop_us + e.reduce_us;
  return e;
}

std::string LaunchEstimate::ToString() const {
  return absl::StrFormat("%d tiles, split %d: %d blocks, %d/SM, %.2f waves, tail %.0f%%, %d k-iterations, est %.1f us",
                         tiles, split_k, blocks, blocks_per_sm, waves, 100 * tail_efficiency, k_iterations,
                         total_us);
}

}  // namespace convoy::cuda
