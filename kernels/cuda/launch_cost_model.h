// The launch-cost model behind the CUDA heuristic for GEMM-shaped kernels (tensor-core implicit-GEMM conv, 1x1 conv
// GEMM, GEMM; any later tiled kernel that describes itself the same way, e.g. a Hopper wgmma/TMA kernel). Host-only
// C++, no CUDA: the heuristic, `convoy inspect`, the launch-table tool and the unit test all call the same code.
//
//   GpuModel gpu = GpuModel::H200();                               // or QueryGpuModel() (gpu_model.cuh)
//   const int per_sm = OccupancyBlocksPerSm(kernel.resources, gpu);   // on a GPU: cudaOccupancy... instead
//   LaunchEstimate e = EstimateGemmLaunch(kernel, GemmShape{m, n, k, 2, 2}, per_sm, gpu);
//   e.waves, e.tail_efficiency, e.total_us, e.ToString()
//
// What it counts (exactly): output tiles, blocks (tiles x split factor), resident blocks per SM, block slots per
// wave (SMs x blocks per SM), waves = blocks / slots, and the tail efficiency = blocks / (ceil(waves) x slots), the
// share of the block slots of the launched waves that hold a block. 264 blocks at 2 blocks per SM on 132 SMs are ONE
// full wave (tail efficiency 1.0), not two; 265 blocks are 2 waves with a tail efficiency of 0.50.
//
// What it estimates (a model, not a measurement; no GPU has checked it yet): the busiest SM's time. An SM runs its
// resident blocks concurrently; their time is the largest of the tensor-core time (block FLOPs over the SM's mma
// rate, scaled down when fewer than kSaturatingWarps warps are resident), the shared-memory time (ldmatrix bytes over
// 128 B/clock) and the L2 time (tile loads over the SM's share of L2 bandwidth), plus the pipeline's fill latency.
// Full waves run at the occupancy's concurrency; a partial last wave at ceil(remaining blocks / SMs) blocks per SM.
// The whole launch is at least the DRAM time of its unique bytes. Split-K adds the FP32 partial traffic and a
// second launch (the reduce pass) that reads the partials and writes the output once. Every launch costs
// GpuModel::launch_us. The model ranks candidates; its absolute numbers are rough.
#ifndef CONVOY_KERNELS_CUDA_LAUNCH_COST_MODEL_H_
#define CONVOY_KERNELS_CUDA_LAUNCH_COST_MODEL_H_

#include <cstdint>
#include <string>

namespace convoy::cuda {

// What the cost model needs to know about a GPU. QueryGpuModel (gpu_model.cuh) fills it from the device's
// attributes; H200() is what the CUDA emulation reports (and the fallback when a query fails).
struct GpuModel {
  std::string name = "H200";
  int sm_count = 132;
  int compute_major = 9, compute_minor = 0;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int registers_per_sm = 65536;
  int max_registers_per_thread = 255;
  int shared_bytes_per_sm = 233472;                // 228 KiB
  int max_shared_bytes_per_block = 232448;         // 227 KiB (opt-in)
  int reserved_shared_bytes_per_block = 1024;      // the driver's per-block reservation (sm_80+)
  double clock_ghz = 1.98;
  double dram_gb_per_s = 4800;
  double l2_gb_per_s = 9600;                        // whole chip
  int64_t l2_bytes = 50 << 20;
  // Dense FP16/BF16 mma.sync throughput per SM (TF32: half). Assumed: 2048 FLOP/clock on sm_80 (A100's 312 TFLOP/s
  // at 1.41 GHz); about two thirds of wgmma's 4096 on sm_90, since mma.sync cannot keep Hopper's tensor cores full.
  double mma_flops_per_clock = 2730;
  // Dense FP16/BF16 wgmma throughput per SM (TF32: half): H100/H200's 989 TFLOP/s at 1.83 GHz over 132 SMs. 0 where
  // there is no wgmma (before sm_90).
  double wgmma_flops_per_clock = 4096;
  double shared_bytes_per_clock = 128;             // per SM
  double launch_us = 2.5;                          // one kernel launch (less inside a CUDA graph)
  double pipeline_fill_us = 1.0;                   // first tiles from DRAM before the main loop runs at speed

  static GpuModel H200();
  // The per-architecture constants (mma rate, bandwidth guesses) for compute capability major.minor.
  static GpuModel ForArchitecture(int major, int minor);
};

// What one kernel instance occupies per block.
struct KernelResources {
  int threads = 128;
  int registers_per_thread = 128;
  int shared_bytes = 0;  // static + dynamic
};

// Resident blocks per SM by CUDA's occupancy rules (as cudaOccupancyMaxActiveBlocksPerMultiprocessor computes them):
// the smallest of the block limit, the thread limit, the register limit (registers allocated per warp in units of
// 256) and the shared-memory limit (per block: its bytes rounded up to 128 plus the driver's reservation). 0 when one
// block does not fit at all.
int OccupancyBlocksPerSm(const KernelResources& kernel, const GpuModel& gpu);

// The register budget __launch_bounds__(threads, min_blocks) gives each thread: what ptxas must fit under, and what
// the emulation assumes the kernel uses (it cannot see the real count).
int LaunchBoundsRegisterCap(int threads, int min_blocks, const GpuModel& gpu);

// A tiled GEMM-shaped kernel: C[m, n] = A[m, k] * B[n, k]^T in tiles, split over the reduction when split_k > 1.
struct GemmKernelDescription {
  int tile_m = 64, tile_n = 64;      // outputs per block
  int k_step = 32;                   // reduction elements per main-loop iteration
  int warps = 4;
  int warp_tile_m = 32, warp_tile_n = 32;
  int stages = 3;
  int split_k = 1;                   // > 1: blockIdx.z walks 1/split_k of the reduction into an FP32 workspace
  bool gathers = false;              // implicit GEMM: A is gathered from the image (address arithmetic per copy)
  // Hopper warpgroup MMA (the sm_90a kernels): runs at GpuModel::wgmma_flops_per_clock, reads its operands from
  // shared memory without ldmatrix, and one warpgroup (4 warps) keeps the tensor cores busy. `warps` are then the
  // consumer warps and warp_tile_m x warp_tile_n the per-warp share of a warpgroup's 64 x tile_n slice.
  bool wgmma = false;
  KernelResources resources;
};

// The GEMM a problem maps to: m = N*P*Q output pixels (GEMM rows), n = K output channels, k = R*S*C.
struct GemmShape {
  int64_t m = 1, n = 1, k = 1;
  int input_bytes = 2;   // bytes per A/B element
  int output_bytes = 2;  // bytes per C element
  bool tf32 = false;     // FP32 inputs on TF32 tensor cores (half the FP16 rate)
  bool residual = false; // the epilogue reads an output-shaped residual
};

struct LaunchEstimate {
  int64_t tiles = 0;            // output tiles
  int64_t blocks = 0;           // tiles x split_k
  int split_k = 1;
  int blocks_per_sm = 0;
  int64_t slots = 0;            // blocks resident at once: SMs x blocks_per_sm
  double waves = 0;             // blocks / slots
  double tail_efficiency = 0;   // blocks / (ceil(waves) x slots)
  int64_t k_iterations = 0;     // main-loop iterations per block
  double mainloop_us = 0;       // the tiled kernel
  double reduce_us = 0;         // split-K reduce pass (0 without split-K)
  double total_us = 0;          // both, with their launch costs
  // "8 tiles, split 16: 128 blocks, 4/SM, 0.24 waves, tail 24%, 5 k-iterations, est 9.8 us"
  std::string ToString() const;
};

LaunchEstimate EstimateGemmLaunch(const GemmKernelDescription& kernel, const GemmShape& shape, int blocks_per_sm,
                                  const GpuModel& gpu);

// Bytes of the FP32 split-K workspace for a split_k-way split of an m x n output (0 for split_k <= 1).
int64_t SplitKWorkspaceBytes(int64_t m, int64_t n, int split_k);

}  // namespace convoy::cuda

#endif  // CONVOY_KERNELS_CUDA_LAUNCH_COST_MODEL_H_
