// cuDNN's best of the legacy Find and the backend graph API on one conv + bias + ReLU layer (see cudnn_bench.h).
#include "tests/gpu/cudnn_bench.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <cuda_runtime.h>
#include <cudnn.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

namespace convoy::gpu_check {
namespace {

// The cuDNN entry points the bench uses, resolved from the library opened at run time.
#define CONVOY_CUDNN_FUNCTIONS(X)                  \
  X(cudnnGetVersion)                               \
  X(cudnnGetErrorString)                           \
  X(cudnnCreate)                                   \
  X(cudnnSetStream)                                \
  X(cudnnCreateTensorDescriptor)                   \
  X(cudnnSetTensor4dDescriptor)                    \
  X(cudnnDestroyTensorDescriptor)                  \
  X(cudnnCreateFilterDescriptor)                   \
  X(cudnnSetFilter4dDescriptor)                    \
  X(cudnnDestroyFilterDescriptor)                  \
  X(cudnnCreateConvolutionDescriptor)              \
  X(cudnnSetConvolution2dDescriptor)               \
  X(cudnnSetConvolutionMathType)                   \
  X(cudnnDestroyConvolutionDescriptor)             \
  X(cudnnCreateActivationDescriptor)               \
  X(cudnnSetActivationDescriptor)                  \
  X(cudnnDestroyActivationDescriptor)              \
  X(cudnnFindConvolutionForwardAlgorithmEx)        \
  X(cudnnConvolutionForward)                       \
  X(cudnnConvolutionBiasActivationForward)         \
  X(cudnnBackendCreateDescriptor)                  \
  X(cudnnBackendDestroyDescriptor)                 \
  X(cudnnBackendSetAttribute)                      \
  X(cudnnBackendGetAttribute)                      \
  X(cudnnBackendFinalize)                          \
  X(cudnnBackendExecute)

struct CudnnApi {
#define CONVOY_CUDNN_MEMBER(name) decltype(&::name) name = nullptr;
  CONVOY_CUDNN_FUNCTIONS(CONVOY_CUDNN_MEMBER)
#undef CONVOY_CUDNN_MEMBER
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
#define CONVOY_CUDNN_LOAD(name)                                              \
  api->name = reinterpret_cast<decltype(api->name)>(dlsym(library, #name)); \
  if (api->name == nullptr) absl::StrAppend(&missing, " " #name);
    CONVOY_CUDNN_FUNCTIONS(CONVOY_CUDNN_LOAD)
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

#define CONVOY_CUDNN_RETURN_IF_ERROR(expr)                                                                  \
  do {                                                                                                      \
    const cudnnStatus_t convoy_cudnn_status_ = (expr);                                                      \
    if (convoy_cudnn_status_ != CUDNN_STATUS_SUCCESS) {                                                     \
      return absl::InternalError(absl::StrCat(#expr, ": ", api->cudnnGetErrorString(convoy_cudnn_status_))); \
    }                                                                                                       \
  } while (false)

cudnnDataType_t CudnnType(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat16: return CUDNN_DATA_HALF;
    case DataType::kBFloat16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
  }
}

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// ---- legacy API ------------------------------------------------------------------------------------------------

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
struct LegacyDescriptors {
  CudnnApi* api = nullptr;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, bias = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnActivationDescriptor_t relu = nullptr;
  ~LegacyDescriptors() {
    if (x) api->cudnnDestroyTensorDescriptor(x);
    if (y) api->cudnnDestroyTensorDescriptor(y);
    if (bias) api->cudnnDestroyTensorDescriptor(bias);
    if (w) api->cudnnDestroyFilterDescriptor(w);
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
    if (relu) api->cudnnDestroyActivationDescriptor(relu);
  }
};

absl::Status MakeLegacyDescriptors(CudnnApi* api, const Conv2dProblem& p, LegacyDescriptors& d) {
  const cudnnTensorFormat_t format = p.layout == Layout::kNHWC ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const cudnnDataType_t type = CudnnType(p.dtype);
  d.api = api;
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.x));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.x, format, type, p.n, p.c, p.h, p.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.y));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.y, format, type, p.n, p.k, p.p(), p.q()));
  // The fused call takes the bias in the data type for FP16/BF16 configs (FP32 accumulation) and FP32 for FP32.
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.bias));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW, type, 1, p.k, 1, 1));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateFilterDescriptor(&d.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetFilter4dDescriptor(d.w, type, format, p.k, p.c_per_group(), p.r, p.s));
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

struct Candidate {
  std::string name;
  LaunchTiming timing;
  bool fused = true;
};

void Keep(std::optional<Candidate>& best, Candidate candidate) {
  if (!best.has_value() || candidate.timing.microseconds < best->timing.microseconds) best = std::move(candidate);
}

// cuDNN's own search over the legacy forward algorithms for descriptors `d`, then the fastest `legacy_top` that run
// within the workspace timed: the fused bias + ReLU call where cuDNN takes it for the algorithm, else the plain
// convolution. `alpha` scales the convolution (the INT8 call's output scale).
absl::Status FindAndTimeLegacy(CudnnApi* api, const LegacyDescriptors& d, const void* x, const void* w,
                               const void* bias, void* y, float alpha, void* workspace, size_t workspace_bytes,
                               cudaStream_t stream, const CudnnBenchOptions& options, absl::string_view label,
                               std::optional<Candidate>& best, int& timed) {
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnFindConvolutionForwardAlgorithmEx(
      api->handle, d.x, x, d.w, w, d.conv, d.y, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf, workspace,
      workspace_bytes));
  const float zero = 0.0f;
  int tried = 0;
  for (int i = 0; i < returned && tried < options.legacy_top; ++i) {
    const cudnnConvolutionFwdAlgoPerf_t& algo = perf[i];
    if (algo.status != CUDNN_STATUS_SUCCESS || algo.memory > workspace_bytes) continue;
    ++tried;
    auto fused = [&]() -> absl::Status {
      CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnConvolutionBiasActivationForward(
          api->handle, &alpha, d.x, x, d.w, w, d.conv, algo.algo, workspace, algo.memory, &zero, d.y, y, d.bias,
          bias, d.relu, d.y, y));
      return absl::OkStatus();
    };
    auto plain = [&]() -> absl::Status {
      CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnConvolutionForward(api->handle, &alpha, d.x, x, d.w, w, d.conv,
                                                                algo.algo, workspace, algo.memory, &zero, d.y, y));
      return absl::OkStatus();
    };
    const bool can_fuse = fused().ok();
    absl::StatusOr<LaunchTiming> timing =
        TimeLaunches(stream, can_fuse ? std::function<absl::Status()>(fused) : plain, options.timing);
    if (!timing.ok()) continue;
    ++timed;
    Keep(best, Candidate{absl::StrCat(label, ForwardAlgorithmName(algo.algo)), *timing, can_fuse});
  }
  return absl::OkStatus();
}

absl::Status TimeLegacy(CudnnApi* api, const Conv2dProblem& p, const void* x, const void* w, const void* bias,
                        void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                        const CudnnBenchOptions& options, std::optional<Candidate>& best, int& timed) {
  LegacyDescriptors d;
  if (absl::Status made = MakeLegacyDescriptors(api, p, d); !made.ok()) return made;
  return FindAndTimeLegacy(api, d, x, w, bias, y, 1.0f, workspace, workspace_bytes, stream, options, "legacy ", best,
                           timed);
}

// ---- backend (graph) API -----------------------------------------------------------------------------------------

// One backend descriptor, destroyed with its owner.
class Descriptor {
 public:
  Descriptor(CudnnApi* api, cudnnBackendDescriptorType_t type) : api_(api) {
    status_ = api->cudnnBackendCreateDescriptor(type, &descriptor_);
  }
  ~Descriptor() {
    if (descriptor_ != nullptr) api_->cudnnBackendDestroyDescriptor(descriptor_);
  }
  Descriptor(const Descriptor&) = delete;
  Descriptor& operator=(const Descriptor&) = delete;
  Descriptor(Descriptor&& other) noexcept
      : api_(other.api_), descriptor_(std::exchange(other.descriptor_, nullptr)), status_(other.status_) {}

  cudnnBackendDescriptor_t get() const { return descriptor_; }
  cudnnBackendDescriptor_t* address() { return &descriptor_; }
  cudnnStatus_t created() const { return status_; }
  cudnnStatus_t Set(cudnnBackendAttributeName_t name, cudnnBackendAttributeType_t type, int64_t count,
                    const void* values) {
    return api_->cudnnBackendSetAttribute(descriptor_, name, type, count, values);
  }
  cudnnStatus_t SetDescriptor(cudnnBackendAttributeName_t name, const Descriptor& value) {
    cudnnBackendDescriptor_t d = value.get();
    return Set(name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &d);
  }
  cudnnStatus_t Finalize() { return api_->cudnnBackendFinalize(descriptor_); }

 private:
  CudnnApi* api_;
  cudnnBackendDescriptor_t descriptor_ = nullptr;
  cudnnStatus_t status_;
};

// The handle attributes of operation graphs and plans (deprecated in favour of device properties in late 9.x, still
// accepted; by number so the code builds against any cuDNN 9 header).
constexpr auto kOperationGraphHandle = static_cast<cudnnBackendAttributeName_t>(800);
constexpr auto kExecutionPlanHandle = static_cast<cudnnBackendAttributeName_t>(400);

enum TensorId : int64_t { kX = 1, kW = 2, kBias = 3, kY = 4, kConvOut = 5, kBiasOut = 6 };

// An NHWC-strided 4-d tensor with logical dims [n, c, h, w] (cuDNN's order for the backend API).
absl::StatusOr<Descriptor> MakeTensor(CudnnApi* api, TensorId id, cudnnDataType_t type, int64_t n, int64_t c,
                                      int64_t h, int64_t w, bool nhwc, bool is_virtual) {
  Descriptor t(api, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(t.created());
  const int64_t dims[4] = {n, c, h, w};
  const int64_t strides_nhwc[4] = {h * w * c, 1, w * c, c};
  const int64_t strides_nchw[4] = {c * h * w, h * w, w, 1};
  const int64_t uid = id, alignment = 16;
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type));
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      t.Set(CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, nhwc ? strides_nhwc : strides_nchw));
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid));
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment));
  const bool virtual_flag = is_virtual;
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Set(CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virtual_flag));
  CONVOY_CUDNN_RETURN_IF_ERROR(t.Finalize());
  return t;
}

absl::StatusOr<Descriptor> MakePointwise(CudnnApi* api, cudnnPointwiseMode_t mode, const Descriptor& x,
                                         const Descriptor* b, const Descriptor& y, std::vector<Descriptor>& keep) {
  Descriptor pw(api, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(pw.created());
  const cudnnDataType_t precision = CUDNN_DATA_FLOAT;
  CONVOY_CUDNN_RETURN_IF_ERROR(pw.Set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode));
  CONVOY_CUDNN_RETURN_IF_ERROR(pw.Set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &precision));
  CONVOY_CUDNN_RETURN_IF_ERROR(pw.Finalize());
  Descriptor op(api, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(op.created());
  CONVOY_CUDNN_RETURN_IF_ERROR(op.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw));
  CONVOY_CUDNN_RETURN_IF_ERROR(op.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x));
  if (b != nullptr) CONVOY_CUDNN_RETURN_IF_ERROR(op.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b));
  CONVOY_CUDNN_RETURN_IF_ERROR(op.SetDescriptor(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y));
  CONVOY_CUDNN_RETURN_IF_ERROR(op.Finalize());
  keep.push_back(std::move(pw));
  return op;
}

// The finalized operation graph conv -> +bias -> ReLU; `keep` owns every descriptor it refers to.
absl::StatusOr<Descriptor> MakeFusedGraph(CudnnApi* api, const Conv2dProblem& p, std::vector<Descriptor>& keep) {
  const bool nhwc = p.layout == Layout::kNHWC;
  const cudnnDataType_t type = CudnnType(p.dtype), f32 = CUDNN_DATA_FLOAT;
  absl::StatusOr<Descriptor> x = MakeTensor(api, kX, type, p.n, p.c, p.h, p.w, nhwc, false);
  absl::StatusOr<Descriptor> w = MakeTensor(api, kW, type, p.k, p.c_per_group(), p.r, p.s, nhwc, false);
  absl::StatusOr<Descriptor> bias = MakeTensor(api, kBias, f32, 1, p.k, 1, 1, nhwc, false);
  absl::StatusOr<Descriptor> y = MakeTensor(api, kY, type, p.n, p.k, p.p(), p.q(), nhwc, false);
  absl::StatusOr<Descriptor> conv_out = MakeTensor(api, kConvOut, f32, p.n, p.k, p.p(), p.q(), nhwc, true);
  absl::StatusOr<Descriptor> bias_out = MakeTensor(api, kBiasOut, f32, p.n, p.k, p.p(), p.q(), nhwc, true);
  for (auto* t : {&x, &w, &bias, &y, &conv_out, &bias_out}) {
    if (!t->ok()) return t->status();
  }
  Descriptor conv(api, CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.created());
  const int64_t dims = 2;
  const int64_t dilations[2] = {p.dilation_h, p.dilation_w}, strides[2] = {p.stride_h, p.stride_w};
  const int64_t pre[2] = {p.pad_top, p.pad_left}, post[2] = {p.pad_bottom, p.pad_right};
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &dims));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilations));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, strides));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, pre));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, post));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv.Finalize());

  Descriptor conv_op(api, CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.created());
  const float alpha = 1.0f, beta = 0.0f;
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.SetDescriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, *x));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.SetDescriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, *w));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.SetDescriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, *conv_out));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.SetDescriptor(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      conv_op.Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.Set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta));
  CONVOY_CUDNN_RETURN_IF_ERROR(conv_op.Finalize());
  absl::StatusOr<Descriptor> add = MakePointwise(api, CUDNN_POINTWISE_ADD, *conv_out, &*bias, *bias_out, keep);
  if (!add.ok()) return add.status();
  absl::StatusOr<Descriptor> relu = MakePointwise(api, CUDNN_POINTWISE_RELU_FWD, *bias_out, nullptr, *y, keep);
  if (!relu.ok()) return relu.status();

  Descriptor graph(api, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(graph.created());
  cudnnBackendDescriptor_t ops[3] = {conv_op.get(), add->get(), relu->get()};
  CONVOY_CUDNN_RETURN_IF_ERROR(graph.Set(kOperationGraphHandle, CUDNN_TYPE_HANDLE, 1, &api->handle));
  CONVOY_CUDNN_RETURN_IF_ERROR(graph.Set(CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 3, ops));
  CONVOY_CUDNN_RETURN_IF_ERROR(graph.Finalize());
  for (auto* t : {&x, &w, &bias, &y, &conv_out, &bias_out}) keep.push_back(std::move(**t));
  keep.push_back(std::move(conv));
  keep.push_back(std::move(conv_op));
  keep.push_back(std::move(*add));
  keep.push_back(std::move(*relu));
  return graph;
}

// The top `top` engine configs of heuristic `mode` for `graph`.
absl::StatusOr<std::vector<Descriptor>> EngineConfigs(CudnnApi* api, const Descriptor& graph, cudnnBackendHeurMode_t mode,
                                                      int top) {
  Descriptor heuristics(api, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
  CONVOY_CUDNN_RETURN_IF_ERROR(heuristics.created());
  CONVOY_CUDNN_RETURN_IF_ERROR(heuristics.SetDescriptor(CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph));
  CONVOY_CUDNN_RETURN_IF_ERROR(heuristics.Set(CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode));
  CONVOY_CUDNN_RETURN_IF_ERROR(heuristics.Finalize());
  int64_t available = 0;
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                             CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &available, nullptr));
  std::vector<Descriptor> configs;
  std::vector<cudnnBackendDescriptor_t> raw;
  for (int64_t i = 0; i < std::min<int64_t>(available, top); ++i) {
    configs.emplace_back(api, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    CONVOY_CUDNN_RETURN_IF_ERROR(configs.back().created());
    raw.push_back(configs.back().get());
  }
  int64_t returned = 0;
  if (!raw.empty()) {
    CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnBackendGetAttribute(heuristics.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                                               CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                                               static_cast<int64_t>(raw.size()), &returned, raw.data()));
  }
  while (static_cast<int64_t>(configs.size()) > std::max<int64_t>(returned, 0)) configs.pop_back();
  return configs;
}

// "eng<global index>" plus " rtc" for a runtime-compiled (runtime fusion) engine.
std::string EngineName(CudnnApi* api, const Descriptor& config) {
  Descriptor engine(api, CUDNN_BACKEND_ENGINE_DESCRIPTOR);
  int64_t n = 0;
  cudnnBackendDescriptor_t raw = engine.get();
  if (api->cudnnBackendGetAttribute(config.get(), CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n,
                                    &raw) != CUDNN_STATUS_SUCCESS) {
    return "eng?";
  }
  int64_t index = -1;
  api->cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, &index);
  cudnnBackendBehaviorNote_t notes[8];
  int64_t note_count = 0;
  bool runtime_compiled = false;
  if (api->cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_BEHAVIOR_NOTE, CUDNN_TYPE_BEHAVIOR_NOTE, 8,
                                    &note_count, notes) == CUDNN_STATUS_SUCCESS) {
    for (int64_t i = 0; i < note_count; ++i) runtime_compiled |= notes[i] == CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION;
  }
  return absl::StrCat("eng", index, runtime_compiled ? " rtc" : "");
}

// A plan's identity for removing duplicates across the two heuristic modes: its JSON (engine and knobs).
std::string PlanKey(CudnnApi* api, const Descriptor& plan, const std::string& fallback) {
  std::vector<char> json(8192, '\0');
  int64_t n = 0;
  if (api->cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
                                    static_cast<int64_t>(json.size()), &n, json.data()) != CUDNN_STATUS_SUCCESS) {
    return fallback;
  }
  return std::string(json.data(), static_cast<size_t>(std::clamp<int64_t>(n, 0, json.size())));
}

absl::Status TimeBackend(CudnnApi* api, const Conv2dProblem& p, const void* x, const void* w, const float* bias,
                         void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                         const CudnnBenchOptions& options, std::optional<Candidate>& best, int& timed) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<Descriptor> keep;
  absl::StatusOr<Descriptor> graph = MakeFusedGraph(api, p, keep);
  if (!graph.ok()) return graph.status();
  std::set<std::string> seen;
  absl::Status last_error = absl::OkStatus();
  for (const auto& [mode, mode_name] : {std::pair{CUDNN_HEUR_MODE_A, "A"}, std::pair{CUDNN_HEUR_MODE_B, "B"}}) {
    absl::StatusOr<std::vector<Descriptor>> configs = EngineConfigs(api, *graph, mode, options.heuristic_top);
    if (!configs.ok()) {
      last_error = configs.status();
      continue;
    }
    for (size_t i = 0; i < configs->size(); ++i) {
      if (SecondsSince(start) > options.backend_budget_s) return absl::OkStatus();
      const Descriptor& config = (*configs)[i];
      Descriptor plan(api, CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR);
      if (plan.created() != CUDNN_STATUS_SUCCESS ||
          plan.Set(kExecutionPlanHandle, CUDNN_TYPE_HANDLE, 1, &api->handle) != CUDNN_STATUS_SUCCESS ||
          plan.SetDescriptor(CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, config) != CUDNN_STATUS_SUCCESS ||
          plan.Finalize() != CUDNN_STATUS_SUCCESS) {
        continue;  // an engine config that does not support this problem
      }
      const std::string name = EngineName(api, config);
      if (!seen.insert(PlanKey(api, plan, name)).second) continue;
      int64_t plan_workspace = 0, n = 0;
      api->cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                    &plan_workspace);
      if (plan_workspace < 0 || static_cast<size_t>(plan_workspace) > workspace_bytes) continue;
      Descriptor pack(api, CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR);
      const int64_t ids[4] = {kX, kW, kBias, kY};
      void* pointers[4] = {const_cast<void*>(x), const_cast<void*>(w), const_cast<float*>(bias), y};
      if (pack.created() != CUDNN_STATUS_SUCCESS ||
          pack.Set(CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, 4, ids) != CUDNN_STATUS_SUCCESS ||
          pack.Set(CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, 4, pointers) != CUDNN_STATUS_SUCCESS ||
          pack.Set(CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &workspace) != CUDNN_STATUS_SUCCESS ||
          pack.Finalize() != CUDNN_STATUS_SUCCESS) {
        continue;
      }
      auto execute = [&]() -> absl::Status {
        CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnBackendExecute(api->handle, plan.get(), pack.get()));
        return absl::OkStatus();
      };
      if (absl::Status first = execute(); !first.ok()) {
        last_error = first;
        continue;
      }
      absl::StatusOr<LaunchTiming> timing = TimeLaunches(stream, execute, options.timing);
      if (!timing.ok()) {
        last_error = timing.status();
        continue;
      }
      ++timed;
      Keep(best, Candidate{absl::StrCat("backend ", mode_name, " ", name), *timing, true});
    }
  }
  return last_error;
}

std::string Describe(const std::optional<Candidate>& c) {
  return c.has_value() ? absl::StrFormat("%s %.2fus", c->name, c->timing.microseconds) : "-";
}

// ---- INT8 (legacy API) ---------------------------------------------------------------------------------------------

// cuDNN's INT8 convolution: NHWC INT8 x and w, INT32 compute, INT8 y ("INT8_CONFIG"); the fused call adds an FP32
// bias and ReLU. alpha is the one output scale (cuDNN has no per-channel multipliers in this API).
absl::Status TimeLegacyInt8(CudnnApi* api, const QuantizedConv2dProblem& p, const void* x, const void* w,
                            const float* bias, void* y, void* workspace, size_t workspace_bytes, cudaStream_t stream,
                            const CudnnBenchOptions& options, std::optional<Candidate>& best, int& timed) {
  LegacyDescriptors d;
  d.api = api;
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.x));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetTensor4dDescriptor(d.x, CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8, p.n, p.c, p.h, p.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.y));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetTensor4dDescriptor(d.y, CUDNN_TENSOR_NHWC, CUDNN_DATA_INT8, p.n, p.k, p.p(), p.q()));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateTensorDescriptor(&d.bias));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetTensor4dDescriptor(d.bias, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, p.k, 1, 1));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateFilterDescriptor(&d.w));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetFilter4dDescriptor(d.w, CUDNN_DATA_INT8, CUDNN_TENSOR_NHWC, p.k, p.c_per_group(), p.r, p.s));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateConvolutionDescriptor(&d.conv));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetConvolution2dDescriptor(d.conv, p.pad_top, p.pad_left, p.stride_h,
                                                                    p.stride_w, p.dilation_h, p.dilation_w,
                                                                    CUDNN_CROSS_CORRELATION, CUDNN_DATA_INT32));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetConvolutionMathType(d.conv, CUDNN_DEFAULT_MATH));
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnCreateActivationDescriptor(&d.relu));
  CONVOY_CUDNN_RETURN_IF_ERROR(
      api->cudnnSetActivationDescriptor(d.relu, CUDNN_ACTIVATION_RELU, CUDNN_NOT_PROPAGATE_NAN, 0.0));
  return FindAndTimeLegacy(api, d, x, w, bias, y, /*alpha=*/0.01f, workspace, workspace_bytes, stream, options,
                           "legacy INT8 ", best, timed);
}

}  // namespace

absl::Status CudnnBenchAvailable() { return LoadCudnn().status(); }

std::string CudnnVersionString() {
  absl::StatusOr<CudnnApi*> api = LoadCudnn();
  if (!api.ok()) return std::string(api.status().message());
  return absl::StrCat((*api)->cudnnGetVersion(), " (headers ", CUDNN_VERSION, ")");
}

absl::StatusOr<CudnnResult> TimeCudnnBest(const Conv2dProblem& p, const void* x, const void* w, const float* bias,
                                          void* y, void* workspace, size_t workspace_bytes, void* stream_pointer,
                                          const CudnnBenchOptions& options) {
  absl::StatusOr<CudnnApi*> loaded = LoadCudnn();
  if (!loaded.ok()) return loaded.status();
  CudnnApi* api = *loaded;
  const auto stream = static_cast<cudaStream_t>(stream_pointer);
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetStream(api->handle, stream));
  std::optional<Candidate> legacy, backend;
  CudnnResult result;
  const absl::Status legacy_status =
      TimeLegacy(api, p, x, w, bias, y, workspace, workspace_bytes, stream, options, legacy, result.candidates);
  const absl::Status backend_status =
      TimeBackend(api, p, x, w, bias, y, workspace, workspace_bytes, stream, options, backend, result.candidates);
  (void)cudaGetLastError();  // cuDNN's refused candidates may leave a runtime error behind; ours must not see it
  result.legacy_best = legacy.has_value() ? Describe(legacy) : absl::StrCat("- (", legacy_status.message(), ")");
  result.backend_best = backend.has_value() ? Describe(backend) : absl::StrCat("- (", backend_status.message(), ")");
  std::optional<Candidate> best = legacy;
  if (backend.has_value()) Keep(best, *backend);
  if (!best.has_value()) {
    return absl::NotFoundError(absl::StrCat("no cuDNN candidate ran: legacy: ", legacy_status.message(),
                                            "; backend: ", backend_status.message()));
  }
  result.winner = best->name;
  result.timing = best->timing;
  result.fused = best->fused;
  return result;
}

absl::StatusOr<CudnnResult> TimeCudnnInt8(const QuantizedConv2dProblem& p, const void* x, const void* w,
                                          const float* bias, void* y, void* workspace, size_t workspace_bytes,
                                          void* stream_pointer, const CudnnBenchOptions& options) {
  absl::StatusOr<CudnnApi*> loaded = LoadCudnn();
  if (!loaded.ok()) return loaded.status();
  CudnnApi* api = *loaded;
  const auto stream = static_cast<cudaStream_t>(stream_pointer);
  CONVOY_CUDNN_RETURN_IF_ERROR(api->cudnnSetStream(api->handle, stream));
  std::optional<Candidate> legacy;
  CudnnResult result;
  const absl::Status status =
      TimeLegacyInt8(api, p, x, w, bias, y, workspace, workspace_bytes, stream, options, legacy, result.candidates);
  (void)cudaGetLastError();  // as in TimeCudnnBest: leave no runtime error behind for ours
  if (!legacy.has_value()) {
    return absl::NotFoundError(
        absl::StrCat("no cuDNN INT8 candidate ran: ", status.ok() ? "none found" : status.message()));
  }
  result.legacy_best = Describe(legacy);
  result.backend_best = "- (INT8 timed through the legacy API only)";
  result.winner = legacy->name;
  result.timing = legacy->timing;
  result.fused = legacy->fused;
  return result;
}

}  // namespace convoy::gpu_check
