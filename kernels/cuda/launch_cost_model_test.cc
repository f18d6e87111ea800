// The launch-cost model: occupancy by CUDA's rules, exact wave and tail counting, and the estimate's ordering of tile
// and split-K choices on the shapes the heuristic must get right.
#include "kernels/cuda/launch_cost_model.h"

#include <cmath>

#include "gtest/gtest.h"

namespace convoy::cuda {
namespace {

GemmKernelDescription Kernel(int tile_m, int tile_n, int warps, int k_step, int split, int registers, int shared) {
  GemmKernelDescription d;
  d.tile_m = tile_m;
  d.tile_n = tile_n;
  d.warps = warps;
  d.warp_tile_m = warps == 4 ? tile_m / 2 : (tile_m > tile_n ? tile_m / 4 : tile_m / 2);
  d.warp_tile_n = warps == 4 ? tile_n / 2 : (tile_m > tile_n ? tile_n / 2 : tile_n / 4);
  d.k_step = k_step;
  d.split_k = split;
  d.resources = {32 * warps, registers, shared};
  return d;
}

TEST(OccupancyTest, FollowsCudaRules) {
  const GpuModel h200 = GpuModel::H200();
  // 128x128 FP16 tile: 217 registers (allocated as 224), 61,440 B shared: registers allow 2, shared memory 3.
  EXPECT_EQ(OccupancyBlocksPerSm({128, 217, 61440}, h200), 2);
  // 64x64: 80 registers allow 6 blocks, 30,720 B (+1 KiB reserved) allow 7.
  EXPECT_EQ(OccupancyBlocksPerSm({128, 80, 30720}, h200), 6);
  EXPECT_EQ(OccupancyBlocksPerSm({128, 64, 30720}, h200), 7);
  // 8 warps, 255 registers, 165,888 B: one block.
  EXPECT_EQ(OccupancyBlocksPerSm({256, 255, 165888}, h200), 1);
  // Thread limit: 1024-thread blocks with few registers, 2 per SM; block limit: tiny blocks, 32 per SM.
  EXPECT_EQ(OccupancyBlocksPerSm({1024, 16, 0}, h200), 2);
  EXPECT_EQ(OccupancyBlocksPerSm({32, 16, 0}, h200), 32);
  // More shared memory than a block may have.
  EXPECT_EQ(OccupancyBlocksPerSm({128, 32, 240 * 1024}, h200), 0);
}

TEST(OccupancyTest, LaunchBoundsRegisterCaps) {
  const GpuModel h200 = GpuModel::H200();
  EXPECT_EQ(LaunchBoundsRegisterCap(128, 1, h200), 255);
  EXPECT_EQ(LaunchBoundsRegisterCap(128, 2, h200), 255);
  EXPECT_EQ(LaunchBoundsRegisterCap(128, 4, h200), 128);
  EXPECT_EQ(LaunchBoundsRegisterCap(128, 6, h200), 80);
  EXPECT_EQ(LaunchBoundsRegisterCap(256, 1, h200), 255);
  // The cap reproduces the occupancy it asks for.
  EXPECT_EQ(OccupancyBlocksPerSm({128, LaunchBoundsRegisterCap(128, 6, h200), 0}, h200), 6);
}

TEST(LaunchEstimateTest, CountsWavesExactly) {
  const GpuModel h200 = GpuModel::H200();
  const GemmKernelDescription k = Kernel(128, 128, 4, 32, 1, 217, 61440);
  // 264 tiles at 2 blocks per SM on 132 SMs are one full wave, not two.
  GemmShape shape{128 * 132, 256, 512, 2, 2};
  LaunchEstimate e = EstimateGemmLaunch(k, shape, 2, h200);
  EXPECT_EQ(e.tiles, 264);
  EXPECT_EQ(e.blocks, 264);
  EXPECT_EQ(e.slots, 264);
  EXPECT_DOUBLE_EQ(e.waves, 1.0);
  EXPECT_DOUBLE_EQ(e.tail_efficiency, 1.0);
  // One more tile row: 266 blocks, a second wave with 2 of its 264 slots used.
  shape.m = 128 * 133;
  e = EstimateGemmLaunch(k, shape, 2, h200);
  EXPECT_EQ(e.blocks, 266);
  EXPECT_NEAR(e.waves, 266.0 / 264, 1e-12);
  EXPECT_NEAR(e.tail_efficiency, 266.0 / 528, 1e-12);
  // Ragged edges count as whole tiles.
  shape = GemmShape{49, 512, 4608, 2, 2};
  e = EstimateGemmLaunch(Kernel(64, 64, 4, 32, 1, 80, 30720), shape, 6, h200);
  EXPECT_EQ(e.tiles, 8);
  EXPECT_EQ(e.k_iterations, 144);
  EXPECT_NEAR(e.waves, 8.0 / 792, 1e-12);
}

TEST(LaunchEstimateTest, SplitKHelpsDeepLayersWithFewTiles) {
  const GpuModel h200 = GpuModel::H200();
  // ResNet-50 res5 3x3 512 at batch 1: 49 x 512 outputs, 4608-long reduction, 8 tiles of 64x64.
  const GemmShape shape{49, 512, 4608, 2, 2};
  const LaunchEstimate whole = EstimateGemmLaunch(Kernel(64, 64, 4, 32, 1, 80, 30720), shape, 6, h200);
  const LaunchEstimate split16 = EstimateGemmLaunch(Kernel(64, 64, 4, 32, 16, 80, 30720), shape, 6, h200);
  EXPECT_EQ(split16.blocks, 128);
  EXPECT_EQ(split16.k_iterations, 9);
  EXPECT_GT(split16.reduce_us, 0);
  EXPECT_LT(split16.total_us, 0.5 * whole.total_us) << whole.ToString() << " vs " << split16.ToString();
  // A wide layer with plenty of tiles gains nothing from a split: the partials' traffic and the second launch cost.
  const GemmShape wide{25088, 512, 128, 2, 2};
  EXPECT_GT(EstimateGemmLaunch(Kernel(64, 64, 4, 32, 4, 80, 30720), wide, 6, h200).total_us,
            EstimateGemmLaunch(Kernel(64, 64, 4, 32, 1, 80, 30720), wide, 6, h200).total_us);
}

TEST(LaunchEstimateTest, BigTilesWinBigProblems) {
  const GpuModel h200 = GpuModel::H200();
  // res4 1x1 1024 at batch 32: 6272 x 1024 outputs, 256-long reduction.
  const GemmShape shape{6272, 1024, 256, 2, 2};
  const LaunchEstimate eight_warps = EstimateGemmLaunch(Kernel(128, 256, 8, 64, 1, 255, 165888), shape, 1, h200);
  const LaunchEstimate small = EstimateGemmLaunch(Kernel(64, 64, 4, 32, 1, 80, 30720), shape, 6, h200);
  EXPECT_LT(eight_warps.total_us, small.total_us) << eight_warps.ToString() << " vs " << small.ToString();
  // TF32 runs at half the FP16 rate.
  GemmShape tf32 = shape;
  tf32.input_bytes = tf32.output_bytes = 4;
  tf32.tf32 = true;
  EXPECT_GT(EstimateGemmLaunch(Kernel(128, 256, 8, 32, 1, 255, 165888), tf32, 1, h200).total_us,
            eight_warps.total_us);
}

// The Hopper kernels' description: wgmma at its own rate, one warpgroup saturating; no wgmma before sm_90.
TEST(LaunchEstimateTest, WgmmaRunsAtItsRateAndOnlyOnHopper) {
  const GpuModel h200 = GpuModel::H200();
  // res4 1x1 1024 at batch 32 in 128x256 tiles: the mma.sync rate bounds it, wgmma's only the L2 tile loads.
  const GemmShape shape{6272, 1024, 256, 2, 2};
  GemmKernelDescription mma = Kernel(128, 256, 8, 64, 1, 168, 196608);
  GemmKernelDescription wgmma = mma;
  wgmma.wgmma = true;
  wgmma.warp_tile_m = 16;  // a warpgroup's 64 x 256 slice, per warp
  wgmma.warp_tile_n = 64;
  const LaunchEstimate fast = EstimateGemmLaunch(wgmma, shape, 1, h200);
  const LaunchEstimate slow = EstimateGemmLaunch(mma, shape, 1, h200);
  EXPECT_LT(fast.mainloop_us, slow.mainloop_us) << fast.ToString() << " vs " << slow.ToString();
  EXPECT_EQ(fast.blocks, slow.blocks);  // the same tiles and waves
  EXPECT_TRUE(std::isinf(EstimateGemmLaunch(wgmma, shape, 1, GpuModel::ForArchitecture(8, 0)).total_us));
}

TEST(LaunchEstimateTest, NoSlotsMeansNoEstimate) {
  const LaunchEstimate e =
      EstimateGemmLaunch(Kernel(64, 64, 4, 32, 1, 80, 30720), GemmShape{64, 64, 64, 2, 2}, 0, GpuModel::H200());
  EXPECT_TRUE(std::isinf(e.total_us));
}

TEST(SplitKWorkspaceTest, Bytes) {
  EXPECT_EQ(SplitKWorkspaceBytes(49, 512, 1), 0);
  EXPECT_EQ(SplitKWorkspaceBytes(49, 512, 16), 16 * 49 * 512 * 4);
}

}  // namespace
}  // namespace convoy::cuda
