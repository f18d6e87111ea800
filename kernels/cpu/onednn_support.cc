// What the oneDNN-backed CPU algorithms share; see onednn_support.h.
#include "kernels/cpu/onednn_support.h"

#include <omp.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "dnnl_debug.h"

namespace convoy::cpu::onednn {

using dnnl::algorithm;
using dnnl::memory;

const dnnl::engine& Engine() {
  static const dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

std::string Version() {
  const dnnl_version_t* v = dnnl_version();
  return absl::StrCat(v->major, ".", v->minor, ".", v->patch);
}

bool HasBf16Compute() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
  return (isa & bf16) == bf16;
}

bool HasAvx512Kernels() {
  const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto avx512 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core);
  return (isa & avx512) == avx512;
}

absl::Status CheckExactInt8Products() {
  // oneDNN fixes its ISA at the first query, so the answer is the process's: worked out once (CanImplement asks it for
  // every INT8 problem).
  static const absl::Status* status = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    for (dnnl::cpu_isa vnni : {dnnl::cpu_isa::avx512_core_vnni, dnnl::cpu_isa::avx2_vnni}) {
      if ((isa & static_cast<unsigned>(vnni)) == static_cast<unsigned>(vnni)) return new absl::Status();
    }
    return new absl::Status(absl::UnimplementedError(absl::StrCat(
        "oneDNN's INT8 kernels need VNNI (AVX512_VNNI or AVX_VNNI) to sum u8 x s8 products exactly; on this CPU "
        "(oneDNN ", Version(), ", ISA ",
        absl::StripPrefix(dnnl_cpu_isa2str(static_cast<dnnl_cpu_isa_t>(isa)), "cpu_isa_"),
        ") they add pairs of products into saturating 16-bit sums (vpmaddubsw), which ordinary weights overflow")));
  }();
  return *status;
}

absl::StatusOr<memory::data_type> DataTypeOf(DataType dtype) {
  switch (dtype) {
    case DataType::kFloat32: return memory::data_type::f32;
    case DataType::kBFloat16: return memory::data_type::bf16;
    default:
      return absl::UnimplementedError(absl::StrCat("oneDNN algorithms take FP32 and BF16, not ", DataTypeName(dtype)));
  }
}

memory::format_tag ActivationTag(Layout layout) {
  switch (layout) {
    case Layout::kNCHW: return memory::format_tag::nchw;
    case Layout::kNHWC: return memory::format_tag::nhwc;
    case Layout::kNCHW8c: return memory::format_tag::nChw8c;
  }
  return memory::format_tag::undef;
}

std::string LayoutString(const memory::desc& desc) {
  const dnnl_memory_desc_t& d = desc.data;
  const auto dims = [&](const dnnl_dims_t values) {
    return absl::StrJoin(values, values + d.ndims, "x");
  };
  std::string out = absl::StrCat(dnnl_dt2str(d.data_type), " ", dims(d.dims));
  if (!std::equal(d.dims, d.dims + d.ndims, d.padded_dims)) absl::StrAppend(&out, " padded ", dims(d.padded_dims));
  if (d.offset0 != 0) absl::StrAppend(&out, " offset ", d.offset0);
  if (d.format_kind == dnnl_format_kind_wino) {
    // The Winograd weights' layout is in its parameters (the transformed filter's tile, blocks and size).
    const dnnl_wino_desc_t& w = d.format_desc.wino_desc;
    return absl::StrCat(out, " wino format ", static_cast<int>(w.wino_format), " r ", w.r, " alpha ", w.alpha, " ic ",
                        w.ic, " oc ", w.oc, " blocks ", w.ic_block, ",", w.oc_block, ",", w.ic2_block, ",",
                        w.oc2_block, " adj_scale ", w.adj_scale, " size ", w.size);
  }
  if (d.format_kind != dnnl_blocked) return absl::StrCat(out, " format_kind ", static_cast<int>(d.format_kind));
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  absl::StrAppend(&out, " strides ", absl::StrJoin(b.strides, b.strides + d.ndims, ","));
  if (b.inner_nblks > 0) {
    absl::StrAppend(&out, " blocks");
    for (int i = 0; i < b.inner_nblks; ++i) absl::StrAppend(&out, i ? "," : " ", b.inner_blks[i], "@", b.inner_idxs[i]);
  }
  if (d.extra.flags != 0) absl::StrAppend(&out, " extra ", d.extra.flags);
  return out;
}

absl::StatusOr<memory::desc> ActivationDesc(DataType dtype, int64_t n, int64_t c, int64_t h, int64_t w,
                                            Layout layout) {
  auto type = DataTypeOf(dtype);
  if (!type.ok()) return type.status();
  return memory::desc({n, c, h, w}, *type, ActivationTag(StoredLayout(layout, c)));
}

namespace {

// Appends the activation as eltwise post-ops (HardSigmoid is linear then clip: oneDNN 2.6 has no hardsigmoid).
absl::Status AppendActivation(const Activation& a, dnnl::post_ops& ops) {
  switch (a.kind) {
    case ActivationKind::kIdentity: return absl::OkStatus();
    case ActivationKind::kRelu: ops.append_eltwise(1.f, algorithm::eltwise_relu, 0.f, 0.f); break;
    case ActivationKind::kClip: ops.append_eltwise(1.f, algorithm::eltwise_clip, a.alpha, a.beta); break;
    case ActivationKind::kLeakyRelu: ops.append_eltwise(1.f, algorithm::eltwise_relu, a.alpha, 0.f); break;
    case ActivationKind::kSigmoid: ops.append_eltwise(1.f, algorithm::eltwise_logistic, 0.f, 0.f); break;
    case ActivationKind::kTanh: ops.append_eltwise(1.f, algorithm::eltwise_tanh, 0.f, 0.f); break;
    case ActivationKind::kSilu: ops.append_eltwise(1.f, algorithm::eltwise_swish, 1.f, 0.f); break;
    case ActivationKind::kHardSigmoid:
      ops.append_eltwise(1.f, algorithm::eltwise_linear, a.alpha, a.beta);
      ops.append_eltwise(1.f, algorithm::eltwise_clip, 0.f, 1.f);
      break;
    case ActivationKind::kHardSwish: ops.append_eltwise(1.f, algorithm::eltwise_hardswish, 0.f, 0.f); break;
    case ActivationKind::kGelu: ops.append_eltwise(1.f, algorithm::eltwise_gelu_erf, 0.f, 0.f); break;
    // oneDNN 2.6 would multiply by 1 / scale where ONNX divides by scale (results differ at rounding ties).
    case ActivationKind::kQuantizeDequantizeU8:
    case ActivationKind::kQuantizeDequantizeS8:
      return absl::UnimplementedError(absl::StrCat("oneDNN post-ops do not implement ", ToString(a)));
  }
  return absl::OkStatus();
}

// A dense FP32 operand of `channel_dims` ({1, K, 1, 1} or {1, N}): row-major strides.
memory::desc ChannelDesc(const memory::dims& channel_dims) {
  memory::dims strides(channel_dims.size(), 1);
  for (int i = static_cast<int>(channel_dims.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * channel_dims[i + 1];
  return memory::desc(channel_dims, memory::data_type::f32, strides);
}

}  // namespace

absl::StatusOr<PostOps> MakePostOps(const Epilogue& e, const memory::desc& dst, const memory::dims& channel_dims,
                                    ResidualPostOp residual_as) {
  PostOps out;
  auto append_binary = [&](algorithm alg, const memory::desc& src1, PostOps::Operand operand) {
    out.binary_args.emplace_back(out.ops.len(), operand);
    out.ops.append_binary(alg, src1);
  };
  // dst += r: the sum post-op (scale 1, the output's own data type) reads r from the output buffer itself.
  auto append_residual = [&] {
    if (residual_as == ResidualPostOp::kSum) {
      out.ops.append_sum(1.f);
    } else {
      append_binary(algorithm::binary_add, dst, PostOps::Operand::kResidual);
    }
  };
  try {
    if (e.has_scale) append_binary(algorithm::binary_mul, ChannelDesc(channel_dims), PostOps::Operand::kScale);
    if (e.has_bias && e.has_scale) {
      append_binary(algorithm::binary_add, ChannelDesc(channel_dims), PostOps::Operand::kBias);
    }
    out.conv_bias = e.has_bias && !e.has_scale;
    if (e.residual == ResidualMode::kBeforeActivation) append_residual();
    if (absl::Status st = AppendActivation(e.activation, out.ops); !st.ok()) return st;
    if (e.residual == ResidualMode::kAfterActivation) append_residual();
  } catch (const dnnl::error& error) {
    return FromError(error, "building the epilogue's post-ops");
  }
  return out;
}

void AddPostOpArgs(const PostOps& post_ops, const EpilogueOperands& operands, const memory::desc& dst,
                   const memory::dims& channel_dims, std::unordered_map<int, memory>& args) {
  for (const auto& [index, operand] : post_ops.binary_args) {
    const int arg = DNNL_ARG_ATTR_MULTIPLE_POST_OP(index) | DNNL_ARG_SRC_1;
    switch (operand) {
      case PostOps::Operand::kScale: args.emplace(arg, Wrap(ChannelDesc(channel_dims), operands.scale)); break;
      case PostOps::Operand::kBias: args.emplace(arg, Wrap(ChannelDesc(channel_dims), operands.bias)); break;
      case PostOps::Operand::kResidual: args.emplace(arg, Wrap(dst, operands.residual)); break;
    }
  }
}

dnnl::primitive_attr MakeAttr(const dnnl::post_ops& post_ops) {
  dnnl::primitive_attr attr;
  attr.set_post_ops(post_ops);
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

absl::Status RejectReferenceImplementation(const std::string& impl, absl::string_view algorithm) {
  if (absl::StartsWith(impl, "ref")) {
    return absl::UnimplementedError(absl::StrCat(algorithm, ": oneDNN ", Version(), " has only its reference (",
                                                 impl, ") implementation for this problem on this CPU"));
  }
  return absl::OkStatus();
}

bool IsGemmImplementation(absl::string_view impl) {
  for (absl::string_view part : absl::StrSplit(impl, ':')) {
    if (part == "gemm") return true;
  }
  return false;
}

absl::StatusOr<const PrimitiveState*> PreparedState(const Workspace& workspace, absl::string_view algorithm) {
  const auto* state = dynamic_cast<const PrimitiveState*>(workspace.state);
  if (state == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(algorithm, ": Run without the state of Prepare (the primitive is made once, at plan time)"));
  }
  return state;
}

int UseContextThreads(const ExecutionContext& context) {
  const int threads = context.thread_pool != nullptr ? context.thread_pool->num_threads() : 1;
  omp_set_num_threads(threads);
  return threads;
}

absl::Status Execute(const PrimitiveState& state, std::unordered_map<int, memory>& args, Workspace workspace,
                     size_t scratchpad_bytes, const ExecutionContext& context) {
  if (workspace.bytes < scratchpad_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("oneDNN ", state.impl(), " needs ", scratchpad_bytes,
                                                   " workspace bytes, got ", workspace.bytes));
  }
  if (scratchpad_bytes > 0) {
    args.emplace(DNNL_ARG_SCRATCHPAD,
                 memory(memory::desc({static_cast<memory::dim>(scratchpad_bytes)}, memory::data_type::u8,
                                     memory::format_tag::a),
                        Engine(), workspace.data));
  }
  absl::Status status;
  auto run = [&](int threads) {
    // A primitive sizes its team from its creation; the calling thread's count matters for the rest of its run.
    omp_set_num_threads(threads < state.threads() ? threads : state.threads());
    try {
      static thread_local dnnl::stream stream(Engine());
      state.primitive().execute(stream, args);
      stream.wait();
    } catch (const dnnl::error& error) {
      status = FromError(error, state.impl());
    }
  };
  if (context.thread_pool != nullptr) {
    context.thread_pool->RunReserved(run);
  } else {
    run(1);
  }
  return status;
}

absl::Status Reorder(const memory::desc& src_desc, const void* src, const memory::desc& dst_desc, void* dst,
                     const ExecutionContext& context) {
  UseContextThreads(context);
  try {
    memory from = Wrap(src_desc, src), to = Wrap(dst_desc, dst);
    dnnl::reorder reorder(from, to);
    dnnl::stream stream(Engine());
    reorder.execute(stream, from, to);
    stream.wait();
  } catch (const dnnl::error& error) {
    return FromError(error, "reorder");
  }
  return absl::OkStatus();
}

memory Wrap(const memory::desc& desc, const void* data) {
  return memory(desc, Engine(), const_cast<void*>(data));
}

absl::Status FromError(const dnnl::error& error, absl::string_view what) {
  return absl::InternalError(absl::StrCat("oneDNN ", Version(), " (", what, "): ", error.what(), " (status ",
                                          static_cast<int>(error.status), ")"));
}

}  // namespace convoy::cpu::onednn
