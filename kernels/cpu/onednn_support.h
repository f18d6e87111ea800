// What the oneDNN-backed CPU algorithms (conv2d_onednn, pool2d_onednn, gemm_onednn, convert_onednn) share: the CPU
// engine, memory descriptors for Convoy's dtypes and layouts, the fused epilogue as oneDNN post-ops, the plan-time
// state that holds a primitive, and running a primitive on the backend's threads.
//
// oneDNN here is Debian's libdnnl-dev 2.6 (OpenMP runtime); docs/kernels.md says why this build and how its threads
// relate to ours. Every oneDNN call that can throw is wrapped: errors come back as absl::Status.
//
// Threads: a primitive runs on the thread that calls Run, with an OpenMP team of the execution context's pool size
// (omp_set_num_threads on that thread before the primitive is created and before each run), inside
// ThreadPool::RunReserved, so our pool's workers sleep while oneDNN's run and two model instances never run two teams
// at once on one pool.
#ifndef CONVOY_KERNELS_CPU_ONEDNN_SUPPORT_H_
#define CONVOY_KERNELS_CPU_ONEDNN_SUPPORT_H_

#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "dnnl.hpp"
#include "kernels/common/epilogue.h"
#include "kernels/common/mutex.h"
#include "kernels/common/problems.h"
#include "kernels/registry/algorithm.h"

namespace convoy::cpu::onednn {

// The process's oneDNN CPU engine.
const dnnl::engine& Engine();

// oneDNN's version as "2.6.3".
std::string Version();

// Whether oneDNN sees BF16 compute on this CPU (AVX512-BF16 or AMX): where its convolutions run BF16 with FP32
// accumulation. False on AVX2-only CPUs, where oneDNN 2.6 has no BF16 convolution at all.
bool HasBf16Compute();

// Whether oneDNN dispatches its AVX-512 kernels on this CPU (avx512_core or above): where its convolutions run
// brgconv / jit:avx512_core kernels on NHWC activations, while its blocked nChw8c kernels stay AVX2. False on
// AVX2-only CPUs.
bool HasAvx512Kernels();

// Whether oneDNN's INT8 kernels on this CPU sum u8 x s8 products exactly: with VNNI (AVX512_VNNI or AVX_VNNI, as
// oneDNN's effective ISA, which ONEDNN_MAX_CPU_ISA may lower), vpdpbusd adds each group of four products into 32 bits.
// Without it oneDNN 2.6 uses vpmaddubsw, which adds pairs of products into 16 bits with saturation: 255 * 127 * 2 does
// not fit, so the INT8 convolutions' results are wrong for ordinary weights (ONNX's arithmetic is exact). Returns OK
// or why not, naming the ISA.
absl::Status CheckExactInt8Products();

// f32 / bf16; UNIMPLEMENTED for other dtypes.
absl::StatusOr<dnnl::memory::data_type> DataTypeOf(DataType dtype);

// The format tag of a 4-D activation in `layout` (nchw, nhwc, nChw8c).
dnnl::memory::format_tag ActivationTag(Layout layout);

// A memory descriptor's layout as text: data type, dims, padded dims, strides and inner blocks, e.g.
// "f32 320x960x1x1 padded 336x960x1x1 strides 46080,48,46080,46080 blocks 48@0". Equal strings: the same layout. What
// PackedFilterLayout reports for a packed filter in the layout the primitive chose.
std::string LayoutString(const dnnl::memory::desc& desc);

// Memory descriptor of a 4-D activation [n, c, h, w] in `dtype` and `layout` (NCHW for a blocked one whose c is not
// a multiple of the block: StoredLayout).
absl::StatusOr<dnnl::memory::desc> ActivationDesc(DataType dtype, int64_t n, int64_t c, int64_t h, int64_t w,
                                                  Layout layout);

// How the residual r of an epilogue becomes a post-op:
//  - kBinaryAdd: a full-tensor binary_add whose operand is the residual buffer (the output is only written);
//  - kSum: oneDNN's sum post-op, which adds what the output buffer holds when the primitive runs, so the residual
//    must be in the output buffer first (the caller's job: Conv2dOnednn copies it there unless the plan already put
//    it there). oneDNN 2.6's brgconv kernels take sum and decline the full-tensor binary_add.
enum class ResidualPostOp { kBinaryAdd, kSum };

// The epilogue act(acc * scale + bias [+ r]) [+ r] as post-ops. `dst` describes the output (the residual has its
// shape, dtype and layout); `channel_dims` the shape of a per-channel operand broadcast over it ({1, K, 1, 1} for
// convolution, {1, N} for GEMM). Bias goes into the primitive's own bias when there is no scale (conv_bias is then
// true); otherwise scale and bias are binary post-ops. The residual as `residual_as` says. UNIMPLEMENTED for an
// activation oneDNN 2.6 lacks.
struct PostOps {
  dnnl::post_ops ops;
  bool conv_bias = false;  // the primitive takes the bias itself
  // The run-time operands of the binary post-ops, in post-op order.
  enum class Operand { kScale, kBias, kResidual };
  std::vector<std::pair<int, Operand>> binary_args;  // (post-op index, operand)
};
absl::StatusOr<PostOps> MakePostOps(const Epilogue& epilogue, const dnnl::memory::desc& dst,
                                    const dnnl::memory::dims& channel_dims,
                                    ResidualPostOp residual_as = ResidualPostOp::kBinaryAdd);

// Pointers of the epilogue operands for PostOps::binary_args.
struct EpilogueOperands {
  const float* scale = nullptr;
  const float* bias = nullptr;
  const void* residual = nullptr;
};

// Adds the binary post-op arguments of `post_ops` to `args`.
void AddPostOpArgs(const PostOps& post_ops, const EpilogueOperands& operands, const dnnl::memory::desc& dst,
                   const dnnl::memory::dims& channel_dims, std::unordered_map<int, dnnl::memory>& args);

// Primitive attributes with `post_ops` and the scratchpad in user mode (it comes from the Run workspace).
dnnl::primitive_attr MakeAttr(const dnnl::post_ops& post_ops);

// "oneDNN <implementation>" ("oneDNN brgconv_1x1:avx512_core", "oneDNN jit_dw:avx2") of a described problem, the
// algorithms' LaunchSummary for `convoy inspect`; empty when the problem could not be described.
template <typename DescriptorPtr>
std::string ImplementationSummary(const absl::StatusOr<DescriptorPtr>& descriptor) {
  return descriptor.ok() ? "oneDNN " + (*descriptor)->impl : std::string();
}

// UNIMPLEMENTED when oneDNN chose its reference (unoptimized C++) implementation: on this CPU the problem has no
// fast kernel, and Convoy's own algorithms are the better candidates.
absl::Status RejectReferenceImplementation(const std::string& impl, absl::string_view algorithm);

// Whether oneDNN's implementation name says it lowers the problem to its GEMM (im2col + sgemm): one of the
// colon-separated parts is "gemm", as in "x64:gemm:jit" (oneDNN 2.x on x86-64) or "gemm:jit".
bool IsGemmImplementation(absl::string_view impl);

// Converts a oneDNN exception into a status naming `what`.
absl::Status FromError(const dnnl::error& error, absl::string_view what);

// The state Prepare makes: a primitive (its JIT code generated) and the thread count it was made for.
class PrimitiveState final : public AlgorithmState {
 public:
  PrimitiveState(dnnl::primitive primitive, int threads, std::string impl)
      : primitive_(std::move(primitive)), threads_(threads), impl_(std::move(impl)) {}
  const dnnl::primitive& primitive() const { return primitive_; }
  int threads() const { return threads_; }
  const std::string& impl() const { return impl_; }

 private:
  dnnl::primitive primitive_;
  int threads_;
  std::string impl_;
};

// The prepared primitive of a Run, or FAILED_PRECONDITION naming the algorithm when Prepare's state is missing.
absl::StatusOr<const PrimitiveState*> PreparedState(const Workspace& workspace, absl::string_view algorithm);

// Sets the OpenMP thread count of the calling thread to the context's pool size (before creating a primitive).
int UseContextThreads(const ExecutionContext& context);

// Makes the primitive of `pd` (generating its JIT code) for the context's thread count.
template <typename PrimitiveT, typename PrimitiveDesc>
absl::StatusOr<std::unique_ptr<AlgorithmState>> MakePrimitiveState(const PrimitiveDesc& pd, const std::string& impl,
                                                                   const ExecutionContext& context) {
  const int threads = UseContextThreads(context);
  try {
    return std::unique_ptr<AlgorithmState>(new PrimitiveState(PrimitiveT(pd), threads, impl));
  } catch (const dnnl::error& error) {
    return FromError(error, impl);
  }
}

// Whether the primitive of `pd` can be created at all (its JIT code generated): oneDNN offers some implementations
// whose creation then fails. OK, or the error as FromError words it. For CanImplement; the primitive is dropped.
template <typename PrimitiveT, typename PrimitiveDesc>
absl::Status CheckPrimitiveCreates(const PrimitiveDesc& pd) {
  try {
    const PrimitiveT primitive(pd);
  } catch (const dnnl::error& error) {
    return FromError(error, pd.impl_info_str());
  }
  return absl::OkStatus();
}

// Copies `src` (described by src_desc) into `dst` (dst_desc) with a oneDNN reorder made for this one call (plan
// time: filter packing; never per request).
absl::Status Reorder(const dnnl::memory::desc& src_desc, const void* src, const dnnl::memory::desc& dst_desc,
                     void* dst, const ExecutionContext& context);

// Runs `primitive` with `args` on the calling thread's stream, the scratchpad in `workspace`, on the context's
// threads (ThreadPool::RunReserved), and waits for it.
absl::Status Execute(const PrimitiveState& state, std::unordered_map<int, dnnl::memory>& args, Workspace workspace,
                     size_t scratchpad_bytes, const ExecutionContext& context);

// Wraps a user pointer (const is cast away: oneDNN takes inputs through non-const handles and does not write them).
dnnl::memory Wrap(const dnnl::memory::desc& desc, const void* data);


// Primitive descriptors made once per problem and remembered (CanImplement, WorkspaceBytes, PackFilter and Prepare
// all need one; making it costs tens of microseconds to milliseconds). Thread-safe.
template <typename Problem, typename Descriptor>
class DescriptorCache {
 public:
  using Result = absl::StatusOr<std::shared_ptr<const Descriptor>>;
  template <typename Make>
  Result Get(const Problem& problem, Make&& make) const {
    {
      convoy::MutexLock lock(&mu_);
      if (auto it = map_.find(problem); it != map_.end()) return it->second;
    }
    Result made = make(problem);
    convoy::MutexLock lock(&mu_);
    return map_.emplace(problem, std::move(made)).first->second;
  }

 private:
  mutable convoy::Mutex mu_;
  mutable std::unordered_map<Problem, Result, absl::Hash<Problem>> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace convoy::cpu::onednn

#endif  // CONVOY_KERNELS_CPU_ONEDNN_SUPPORT_H_
