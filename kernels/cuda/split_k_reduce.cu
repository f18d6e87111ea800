// The split-K reduce pass (see split_k_reduce.cuh) and its instances for FP16, BF16 and FP32 outputs.
#include "kernels/cuda/split_k_reduce.cuh"

#include <algorithm>

namespace convoy::cuda {
namespace {

constexpr int kReduceThreads = 256;
constexpr int64_t kMaxReduceBlocks = 8192;

template <typename T>
struct SplitKReduceParams {
  const float* partials = nullptr;  // [split][rows][channels]
  int split = 1;
  int64_t rows = 0;
  int vectors_per_row = 0;          // ceil(channels / kOutputVector<T>)
  bool partials_vector_ok = false;  // channels % 4 == 0: partial rows are float4-aligned
  OutputTarget<T> target;
};

// Thread i handles vector (row, v) = (i / vectors_per_row, i % vectors_per_row): channels [v * V, v * V + V).
template <typename T>
__global__ void __launch_bounds__(kReduceThreads) SplitKReduceKernel(SplitKReduceParams<T> params) {
  constexpr int V = kOutputVector<T>;
  const int channels = params.target.channels;
  const int64_t plane = params.rows * channels;  // one split's partials
  const int64_t vectors = params.rows * params.vectors_per_row;
  for (int64_t i = int64_t{blockIdx.x} * kReduceThreads + threadIdx.x; i < vectors;
       i += int64_t{gridDim.x} * kReduceThreads) {
    const int64_t row = i / params.vectors_per_row;                         // [rows]
    const int n0 = static_cast<int>(i - row * params.vectors_per_row) * V;  // [channels]
    const bool whole = params.partials_vector_ok && n0 + V <= channels;
    float sum[V];
#pragma unroll
    for (int j = 0; j < V; ++j) sum[j] = 0.0f;
    const float* source = params.partials + row * channels + n0;  // split 0's vector
    for (int z = 0; z < params.split; ++z, source += plane) {
      if (whole) {
#pragma unroll
        for (int j = 0; j < V; j += 4) {
          CheckVectorAlignment(source + j);
          const float4 p = __ldg(reinterpret_cast<const float4*>(source + j));
          sum[j] += p.x, sum[j + 1] += p.y, sum[j + 2] += p.z, sum[j + 3] += p.w;
        }
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (n0 + j < channels) sum[j] += __ldg(source + j);
        }
      }
    }
    const ChannelAffine<V> affine = LoadChannelAffine<T, V>(params.target, n0);
    StoreOutputVector<T, V>(params.target, row, n0, affine, sum);
  }
}

}  // namespace

template <typename T>
cudaError_t LaunchSplitKReduce(const float* partials, int split, int64_t rows, const OutputTarget<T>& target,
                               cudaStream_t stream) {
  SplitKReduceParams<T> params;
  params.partials = partials;
  params.split = split;
  params.rows = rows;
  params.vectors_per_row = (target.channels + kOutputVector<T> - 1) / kOutputVector<T>;
  params.partials_vector_ok = target.channels % 4 == 0;
  params.target = target;
  const int64_t vectors = rows * params.vectors_per_row;
  const int64_t blocks = std::min<int64_t>(kMaxReduceBlocks, std::max<int64_t>(1, (vectors + kReduceThreads - 1) /
                                                                                      kReduceThreads));
  return CONVOY_LAUNCH_KERNEL((SplitKReduceKernel<T>), dim3(static_cast<unsigned>(blocks)), dim3(kReduceThreads), 0,
                              stream, params);
}

template cudaError_t LaunchSplitKReduce<__half>(const float*, int, int64_t, const OutputTarget<__half>&,
                                                cudaStream_t);
template cudaError_t LaunchSplitKReduce<__nv_bfloat16>(const float*, int, int64_t,
                                                       const OutputTarget<__nv_bfloat16>&, cudaStream_t);
template cudaError_t LaunchSplitKReduce<float>(const float*, int, int64_t, const OutputTarget<float>&,
                                               cudaStream_t);

}  // namespace convoy::cuda
