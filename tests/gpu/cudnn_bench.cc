#include "tests/gpu/cudnn_bench.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "absl/strings/str_cat.h"

namespace convoy::gpu_check {
namespace {

// The cuDNN entry points the bench uses, resolved from the library opened at run time.
struct CudnnApi {
#define CONVOY_CUDNN_FN(name) decltype(&::name) name = nullptr
  CONVOY_CUDNN_FN(cudnnGetVersion);
  CONVOY_CUDNN_FN(cudnnGetErrorString);
  CONVOY_CUDNN_FN(cudnnCreate);
  CONVOY_CUDNN_FN(cudnnSetStream);
  CONVOY_CUDNN_FN(cudnnCreateTensorDescriptor);
  CONVOY_CUDNN_FN(cudnnSetTensor4dDescriptor);
  CONVOY_CUDNN_FN(cudnnDestroyTensorDescriptor);
  CONVOY_CUDNN_FN(cudnnCreateFilterDescriptor);
  CONVOY_CUDNN_FN(cudnnSetFilter4dDescriptor);
  CONVOY_CUDNN_FN(cudnnDestroyFilterDescriptor);
  CONVOY_CUDNN_FN(cudnnCreateConvolutionDescriptor);
  CONVOY_CUDNN_FN(cudnnSetConvolution2dDescriptor);
  CONVOY_CUDNN_FN(cudnnSetConvolutionMathType);
  CONVOY_CUDNN_FN(cudnnDestroyConvolutionDescriptor);
  CONVOY_CUDNN_FN(cudnnCreateActivationDescriptor);
  CONVOY_CUDNN_FN(cudnnSetActivationDescriptor);
  CONVOY_CUDNN_FN(cudnnDestroyActivationDescriptor);
  CONVOY_CUDNN_FN(cudnnFindConvolutionForwardAlgorithmEx);
  CONVOY_CUDNN_FN(cudnnConvolutionForward);
  CONVOY_CUDNN_FN(cudnnConvolutionBiasActivationForward);
#undef CONVOY_CUDNN_FN
  cudnnHandle_t handle = nullptr;
};

absl::StatusOr<CudnnApi*> LoadCudnn() {
  static absl::StatusOr<CudnnApi*>* loaded = [] {
    std::vector<std::string> names;
    if (const char* path = std::getenv("CONVOY_CUDNN_LIBRARY"); path != nullptr && *path != '\0') names.push_back(path);
    names.push_back("libcudnn.so.9");
    names.push_back("libcudnn.so");
    void* library = nullptr;
    std::string tried;
    for (const std::string& name : names) {
      library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (library != nullptr) break;
      absl::StrAppend(&tried, " ", name, " (", dlerror(), ")");
    }
    if (library == nullptr) {
      return new absl::StatusOr<CudnnApi*>(absl::UnavailableError(absl::StrCat("cuDNN not found:", tried)));
    }
    auto* api = new CudnnApi();
    std::string missing;
#define CONVOY_CUDNN_LOAD(name)                                                  \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(library, #name));     \
  if (api->name == nullptr) absl::StrAppend(&missing, " " #name)
    CONVOY_CUDNN_LOAD(cudnnGetVersion);
    CONVOY_CUDNN_LOAD(cudnnGetErrorString);
    CONVOY_CUDNN_LOAD(cudnnCreate);
    CONVOY_CUDNN_LOAD(cudnnSetStream);
    CONVOY_CUDNN_LOAD(cudnnCreateTensorDescriptor);
    CONVOY_CUDNN_LOAD(cudnnSetTensor4dDescriptor);
    CONVOY_CUDNN_LOAD(cudnnDestroyTensorDescriptor);
    CONVOY_CUDNN_LOAD(cudnnCreateFilterDescriptor);
    CONVOY_CUDNN_LOAD(cudnnSetFilter4dDescriptor);
    CONVOY_CUDNN_LOAD(cudnnDestroyFilterDescriptor);
    CONVOY_CUDNN_LOAD(cudnnCreateConvolutionDescriptor);
    CONVOY_CUDNN_LOAD(cudnnSetConvolution2dDescriptor);
    CONVOY_CUDNN_LOAD(cudnnSetConvolutionMathType);
    CONVOY_CUDNN_LOAD(cudnnDestroyConvolutionDescriptor);
    CONVOY_CUDNN_LOAD(cudnnCreateActivationDescriptor);
    CONVOY_CUDNN_LOAD(cudnnSetActivationDescriptor);
    CONVOY_CUDNN_LOAD(cudnnDestroyActivationDescriptor);
    CONVOY_CUDNN_LOAD(cudnnFindConvolutionForwardAlgorithmEx);
    CONVOY_CUDNN_LOAD(cudnnConvolutionForward);
    CONVOY_CUDNN_LOAD(cudnnConvolutionBiasActivationForward);
#undef CONVOY_CUDNN_LOAD
    if (!missing.empty()) {
      return new absl::StatusOr<CudnnApi*>(absl::UnavailableError(absl::StrCat("cuDNN lacks:", missing)));
    }
    if (const cudnnStatus_t status = api->cudnnCreate(&api->handle); status != CUDNN_STATUS_SUCCESS) {
      return new absl::StatusOr<CudnnApi*>(
          absl::UnavailableError(absl::StrCat("cudnnCreate: ", api->cudnnGetErrorString(status))));
    }
    return new absl::StatusOr<CudnnApi*>(api);
  }();
  return *loaded;
}

const char* ForwardAlgorithmName(cudnnConvolutionFwdAlgo_t algorithm) {
  switch (algorithm) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "UNKNOWN";
  }
}

// Descriptors for one problem, destroyed together.
struct Descriptors {
  CudnnApi* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  ~Descriptors() {
    if (x) api->cudnnDestroyTensorDescriptor(x);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (bias) api->cudnnDestroyTensorDescriptor(bias);
    if (w) api->cudnnDestroyFilterDescriptor(w);
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
    if (relu) api->cudnnDestroyActivationDescriptor(relu);
  }
};

#define CONVOY_CUDNN_RETURN_IF_ERROR(expr)                                                                  \
  do {                                                                                                      \
    const cudnnStatus_t convoy_cudnn_status_ = (expr);                                                      \
    if (convoy_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                                     \
      return absl::InternalError(absl::StrCat(#expr, ": ", api->cudnnGetErrorString(convoy_cudnn_status_))); \
    }                                                                                                       \
  } while (false)

#define CONVOY_CUDA_RETURN_IF_ERROR_HERE(expr)                                                             \
  do {                                                                                                     \
    const cudaError_t convoy_cuda_status_ = (expr);                                                        \
    if (convoy_cuda_status_ != cudaSuccess) {                                                              \
      return absl::InternalError(absl::StrCat(#expr, ": ", cudaGetErrorString(convoy_cuda_status_)));      \
    }                                                                                                      \
  } while (false)

cudnnDataType_t CudnnType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

absl::Status MakeDescriptors(CudnnApi* api, const Conv2dProblem& p, cudnnDataType_t bias_type, Descriptors& d) {
  const cudnnTensorFormat_t format = p.layout == Layout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnDataType_t type = CudnnType(p.dtype);
  d.api = api;
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.x));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.x, format, type, p.n, p.c, p.h, p.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.y));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.y, format, type, p.n, p.k, p.p(), p.q()));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.bias));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW, bias_type, 1, p.k, 1, 1));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateFilterDescriptor(&d.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetFilter4dDescriptor(d.w, type, format, p.k, p.c_per_group(), p.r, p.s));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateConvolutionDescriptor(&d.conv));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetConvolution2dDescriptor(d.conv, p.pad_top, p.pad_left, p.stride_h,
                                                                    p.stride_w, p.dilation_h, p.dilation_w,
                                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT));
  // FP16/BF16: tensor cores; FP32: the default math, which lets cuDNN use TF32 tensor cores (allow_tf32).
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetConvolutionMathType(
      d.conv, p.dtype == DataType::kFloat32 ? (p.allow_tf32 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH)
                                            : CUDNN_TENSOR_OP_MATH));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateActivationDescriptor(&d.relu));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetActivationDescriptor(d.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return absl::OkStatus();
}

// Median milliseconds of `reps` runs of `run` on `stream`, each between its own pair of events.
template <typename Fn>
absl::StatusOr<double> MedianMilliseconds(cudaStream_t stream, int reps, Fn run) {
  cudaEvent_t start, stop;
  CONVOY_CUDA_RETURN_IF_ERROR_HERE(cudaEventCreate(&start));
  CONVOY_CUDA_RETURN_IF_ERROR_HERE(cudaEventCreate(&stop));
  std::vector<double> times;
  absl::Status status = run();  // warm-up
  for (int i = 0; i < reps && status.ok(); ++i) {
    cudaEventRecord(start, stream);
    status = run();
    cudaEventRecord(stop, stream);
    if (cudaEventSynchronize(stop) != cudaSuccess) status = absl::InternalError("cudaEventSynchronize failed");
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    times.push_back(ms);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!status.ok()) return status;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

absl::Status CudnnBenchAvailable() { return LoadCudnn().status(); }

std::string CudnnVersionString() {
  absl::StatusOr<CudnnApi*> api = LoadCudnn();
  if (!api.ok()) return std::string(api.status().message());
  return absl::StrCat((*api)->cudnnGetVersion(), " (headers ", CUDNN_VERSION, ")");
}

absl::StatusOr<CudnnTiming> TimeCudnnConv(const Conv2dProblem& p, const void* x, const void* w, void* y,
                                          void* workspace, size_t workspace_bytes, void* stream_pointer, int reps) {
  absl::StatusOr<CudnnApi*> loaded = LoadCudnn();
  if (!loaded.ok()) return loaded.status();
  CudnnApi* api = *loaded;
  const auto stream = static_cast<cudaStream_t>(stream_pointer);
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetStream(api->handle, stream));

  // Bias in FP32 (cuDNN's rule for FP32 configs) or in the data type (FP16/BF16 configs); try both.
  const void* bias = y;  // any device buffer of >= K elements: the values do not matter for timing
  for (cudnnDataType_t bias_type : {CudnnType(p.dtype), CUDNN_DATA_FLOAT}) {
    Descriptors d;
    if (absl::Status made = MakeDescriptors(api, p, bias_type, d); !made.ok()) return made;
    cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
    int returned = 0;
    CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnFindConvolutionForwardAlgorithmEx(
        api->handle, d.x, x, d.w, w, d.conv, d.y, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, workspace,
        workspace_bytes));
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < returned && best == nullptr; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].memory <= workspace_bytes) best = &perf[i];
    }
    if (best == nullptr) return absl::NotFoundError("cuDNN's Find returned no usable algorithm");
    const float one = 1.0f, zero = 0.0f;
    auto fused = [&]() -> absl::Status {
      CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnConvolutionBiasActivationForward(
          api->handle, &one, d.x, x, d.w, w, d.conv, best->algo, workspace, best->memory, &zero, d.y, y, d.bias,
          bias, d.relu, d.y, y));
      return absl::OkStatus();
    };
    if (fused().ok()) {
      absl::StatusOr<double> ms = MedianMilliseconds(stream, reps, fused);
      if (!ms.ok()) return ms.status();
      return CudnnTiming{ForwardAlgorithmName(best->algo), *ms, true};
    }
    if (bias_type != CUDNN_DATA_FLOAT) continue;  // retry with an FP32 bias
    auto plain = [&]() -> absl::Status {
      CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnConvolutionForward(api->handle, &one, d.x, x, d.w, w, d.conv,
                                                                best->algo, workspace, best->memory, &zero, d.y, y));
      return absl::OkStatus();
    };
    absl::StatusOr<double> ms = MedianMilliseconds(stream, reps, plain);
    if (!ms.ok()) return ms.status();
    return CudnnTiming{ForwardAlgorithmName(best->algo), *ms, false};
  }
  return absl::InternalError("unreachable");
}

}  // namespace convoy::gpu_check
