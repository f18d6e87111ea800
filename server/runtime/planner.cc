// The planner's skeleton (see planner.h): graph inputs, node dispatch, dtype/layout conversions, weight upload,
// graph outputs and the per-batch-size memory plans. The op mappings live in planner_ops.cc.
#include "server/runtime/planner.h"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <initializer_list>
#include <iterator>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/registry/residual_in_output.h"
#include "kernels/registry/verification.h"
#include "server/runtime/planner_internal.h"

namespace convoy::runtime {
namespace {

constexpr size_t kArenaAlignment = 256;  // suits CUDA vector loads as well as CPU cache lines

bool LayoutAgnostic(const PlanTensor& t) {
  return t.shape.size() != 4 || (t.shape[2] == 1 && t.shape[3] == 1);
}

// Whether `t` already lies as `layout` asks: the same layout, a tensor that lies the same in every layout, or a
// blocked request for a channel count the block does not divide (such a tensor lies NCHW: StoredLayout).
bool LiesAs(const PlanTensor& t, Layout layout) {
  if (t.layout == layout || LayoutAgnostic(t)) return true;
  const int64_t channels = t.shape[1];
  return StoredLayout(t.layout, channels) == StoredLayout(layout, channels);
}

std::string ConversionName(const std::string& source, DataType dtype, Layout layout) {
  return absl::StrCat(source, ":to_", absl::AsciiStrToLower(DataTypeName(dtype)), "_",
                      absl::AsciiStrToLower(LayoutName(layout)));
}

}  // namespace

PlanBuilder::PlanBuilder(const Graph& graph, const PlannerOptions& options)
    : graph_(graph), options_(options), plan_(new ExecutionPlan()) {}

absl::Status PlanBuilder::NodeError(const Node& node, const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat("node '", node.name, "' (", OpKindName(node.op()), "): ", what));
}

bool PlanBuilder::Tuned(int batch_size) const {
  const auto& sizes = options_.tuned_batch_sizes;
  return sizes.empty() || std::find(sizes.begin(), sizes.end(), batch_size) != sizes.end();
}

int PlanBuilder::Root(int id) const {
  while (plan_->tensors_[id].alias_of >= 0) id = plan_->tensors_[id].alias_of;
  return id;
}

absl::StatusOr<int> PlanBuilder::Value(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", name, "' has no computed value (is it a constant "
                                                   "where the planner needs a runtime tensor?)"));
  }
  return it->second;
}

absl::StatusOr<const Tensor*> PlanBuilder::Constant(const Node& node, size_t index) const {
  if (index >= node.inputs.size()) return NodeError(node, absl::StrCat("input ", index, " is missing"));
  const Tensor* value = graph_.FindConstant(node.inputs[index]);
  if (value == nullptr) {
    return NodeError(node, absl::StrCat("input ", index, " '", node.inputs[index],
                                        "' must be a constant for the kernel library"));
  }
  return value;
}

ImageDims PlanBuilder::Dims(int id, int batch_size) const {
  const Shape dims = plan_->tensors_[id].Dims(batch_size);
  ImageDims d;
  if (dims.size() == 4) return {int(dims[0]), int(dims[1]), int(dims[2]), int(dims[3])};
  if (dims.size() == 2) return {int(dims[0]), int(dims[1]), 1, 1};
  d.n = static_cast<int>(NumElements(dims));
  return d;
}

absl::StatusOr<int> PlanBuilder::AddOutput(const std::string& name, DataType dtype, Layout layout) {
  CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(name));
  PlanTensor t{name, shape, dtype, layout};
  plan_->tensors_.push_back(std::move(t));
  producer_.push_back(-1);
  const int id = static_cast<int>(plan_->tensors_.size()) - 1;
  values_[name] = id;
  return id;
}

absl::StatusOr<int> PlanBuilder::AddIntermediate(const std::string& name, Shape shape, DataType dtype,
                                                 Layout layout) {
  plan_->tensors_.push_back(PlanTensor{name, std::move(shape), dtype, layout});
  producer_.push_back(-1);
  return static_cast<int>(plan_->tensors_.size()) - 1;
}

absl::StatusOr<int> PlanBuilder::AddAlias(const std::string& name, int source) {
  CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(name));
  return AddAlias(name, source, shape.size() == 4 ? plan_->tensors_[source].layout : Layout::kNCHW);
}

absl::StatusOr<int> PlanBuilder::AddAlias(const std::string& name, int source, Layout layout) {
  CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(name));
  const PlanTensor& src = plan_->tensors_[source];
  PlanTensor t{name, shape, src.dtype, layout, Root(source)};
  producer_.push_back(producer_[source]);
  plan_->tensors_.push_back(std::move(t));
  const int id = static_cast<int>(plan_->tensors_.size()) - 1;
  values_[name] = id;
  return id;
}

int PlanBuilder::TensorCoreChannels(int64_t channels) const {
  if (options_.device->backend() == Backend::kCpu || layout() != Layout::kNHWC) return 0;
  if (options_.precision == Precision::kFp32) return 0;  // no tensor cores without TF32
  const int vector = 16 / static_cast<int>(DataTypeSize(compute_dtype()));
  return channels < vector ? vector : 0;
}

bool PlanBuilder::OnlyConvsRead(const std::string& name) const {
  bool read = false;
  for (const Node& node : graph_.nodes()) {
    for (size_t i = 0; i < node.inputs.size(); ++i) {
      if (node.inputs[i] != name) continue;
      if (node.op() != OpKind::kConv2d || i != 0 || node.As<Conv2dAttrs>().groups != 1) return false;
      read = true;
    }
  }
  for (const std::string& output : graph_.outputs()) {
    if (output == name) return false;
  }
  return read;
}

absl::StatusOr<int> PlanBuilder::Require(int id, DataType dtype, Layout layout, int padded_channels) {
  const PlanTensor src = plan_->tensors_[id];  // a copy: tensors_ grows below
  const bool layout_ok = LiesAs(src, layout);
  const bool image = src.shape.size() == 4;
  // Padding is written by the NCHW -> NHWC transposition only.
  const bool pad = padded_channels > 0 && image && !layout_ok && layout == Layout::kNHWC &&
                   padded_channels > src.shape[1];
  if (!pad) padded_channels = 0;
  if (src.dtype == dtype && layout_ok) return id;
  const auto key = std::make_tuple(id, dtype, layout, padded_channels);
  if (auto it = conversions_.find(key); it != conversions_.end()) return it->second;

  PlanTensor converted{ConversionName(src.name, dtype, layout), src.shape, dtype, layout};
  if (pad) {
    converted.name = absl::StrCat(converted.name, "_c", padded_channels);
    converted.shape[1] = padded_channels;
  }
  const Layout src_layout = image ? src.layout : Layout::kNCHW;
  const Layout dst_layout = image ? (layout_ok ? src_layout : layout) : Layout::kNCHW;
  converted.layout = dst_layout;
  plan_->tensors_.push_back(converted);
  producer_.push_back(-1);
  const int out = static_cast<int>(plan_->tensors_.size()) - 1;
  conversions_[key] = out;
  const DataType src_dtype = src.dtype;
  auto problem_for = [this, id, src_dtype, dtype, src_layout, dst_layout, padded_channels](int b) {
    const ImageDims d = Dims(id, b);
    ConvertProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
    p.src_dtype = src_dtype, p.dst_dtype = dtype, p.src_layout = src_layout, p.dst_layout = dst_layout;
    p.dst_c = padded_channels;
    return p;
  };
  auto bind = [id, out](TensorPointers t) { return ConvertArgs{t[id], t[out]}; };
  CONVOY_RETURN_IF_ERROR(AddKernelStep<ConvertOp>(converted.name, {id}, {out}, problem_for, bind));
  return out;
}

namespace {

// Whether `step` is a KernelStep<Op> whose algorithm adds the residual onto the output buffer at every batch size.
template <typename Op>
bool AccumulatesAtEveryBatch(PlanStep* step) {
  auto* kernel_step = dynamic_cast<KernelStep<Op>*>(step);
  if (kernel_step == nullptr) return false;
  for (const auto& variant : kernel_step->variants()) {
    if (!AccumulatesOntoOutput(*variant.algorithm, variant.problem)) return false;
  }
  return true;
}

}  // namespace

bool PlanBuilder::PlaceOutputOverResidual(const Node& node, const std::string& residual_name, int x, int residual,
                                          int y, const std::string& fused_reader) {
  PlanStep* step = plan_->steps_.back().get();
  if (residual_name.empty() ||
      !(AccumulatesAtEveryBatch<Conv2dOp>(step) || AccumulatesAtEveryBatch<QuantizedConv2dOp>(step))) {
    return false;
  }
  // The storage y would take: the residual's root (itself, or the buffer it is a view of, e.g. the output of an
  // earlier conv that took its own residual's storage).
  const int root = Root(residual);
  const PlanTensor& r = plan_->tensors_[root];
  const PlanTensor& out = plan_->tensors_[y];
  if (r.external || producer_[root] < 0 || Root(x) == root) return false;
  for (const PlanTensor* t : std::initializer_list<const PlanTensor*>{&plan_->tensors_[residual], &r}) {
    if (t->shape.size() != 4 || t->shape != out.shape || t->dtype != out.dtype ||
        StoredLayout(t->layout, t->shape[1]) != StoredLayout(out.layout, out.shape[1])) {
      return false;
    }
  }
  // Every graph tensor that lives in that storage (the residual and its views) must be read by no later node and be
  // no graph output: nodes run in the graph's order, one step after another, so a later node would read it after
  // this step overwrote it.
  std::set<std::string> names = {residual_name};
  for (const auto& [name, id] : values_) {
    if (Root(id) == root) names.insert(name);
  }
  const std::vector<Node>& nodes = graph_.nodes();
  const ptrdiff_t here = &node - nodes.data();
  if (here < 0 || here >= static_cast<ptrdiff_t>(nodes.size())) return false;
  for (size_t i = static_cast<size_t>(here) + 1; i < nodes.size(); ++i) {
    if (nodes[i].name == fused_reader) continue;  // computed by this step
    for (const std::string& input : nodes[i].inputs) {
      if (names.count(input) > 0) return false;
    }
  }
  for (const std::string& output : graph_.outputs()) {
    if (names.count(output) > 0) return false;
  }
  // A conversion that lies in that storage must not be handed out again.
  for (auto it = conversions_.begin(); it != conversions_.end();) {
    it = Root(it->second) == root ? conversions_.erase(it) : std::next(it);
  }
  plan_->tensors_[y].alias_of = root;
  return true;
}

absl::StatusOr<int> PlanBuilder::ComputeInput(const Node& node, size_t index) {
  return ComputeInput(node, index, layout());
}

absl::StatusOr<int> PlanBuilder::ComputeInput(const Node& node, size_t index, Layout layout) {
  if (index >= node.inputs.size()) return NodeError(node, absl::StrCat("input ", index, " is missing"));
  auto id = Value(node.inputs[index]);
  if (!id.ok()) return NodeError(node, std::string(id.status().message()));
  return Require(*id, compute_dtype(), layout);
}

absl::StatusOr<const void*> PlanBuilder::Upload(const Tensor& value, DataType dtype, Layout layout) {
  const size_t count = value.data.size();
  std::vector<float> ordered = value.data;
  if (value.shape.size() == 4 && layout == Layout::kNHWC) {
    const int64_t n = value.shape[0], c = value.shape[1], h = value.shape[2], w = value.shape[3];
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < c; ++j)
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x)
            ordered[((i * h + y) * w + x) * c + j] = value.data[((i * c + j) * h + y) * w + x];
  }
  std::vector<uint8_t> host(count * DataTypeSize(dtype));
  for (size_t i = 0; i < count; ++i) StoreFromFloat(host.data(), dtype, i, ordered[i]);
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation allocation, options_.device->Allocate(std::max<size_t>(host.size(), 1)));
  CONVOY_RETURN_IF_ERROR(options_.device->CopyToDevice(allocation.data(), host.data(), host.size()));
  const void* data = allocation.data();
  plan_->weight_bytes_ += host.size();
  plan_->weights_.push_back(std::move(allocation));
  return data;
}

absl::StatusOr<const void*> PlanBuilder::UploadFloats(const std::vector<float>& values) {
  Tensor t{{static_cast<int64_t>(values.size())}, values};
  return Upload(t, DataType::kFloat32, Layout::kNCHW);
}

absl::StatusOr<const void*> PlanBuilder::UploadBytes(const void* data, size_t bytes) {
  CONVOY_ASSIGN_OR_RETURN(DeviceAllocation allocation, options_.device->Allocate(std::max<size_t>(bytes, 1)));
  CONVOY_RETURN_IF_ERROR(options_.device->CopyToDevice(allocation.data(), data, bytes));
  const void* out = allocation.data();
  plan_->weight_bytes_ += bytes;
  plan_->weights_.push_back(std::move(allocation));
  return out;
}

// ---- INT8 steps of QDQ models ------------------------------------------------------------------------------------

absl::StatusOr<int> PlanBuilder::QuantizedValue(const std::string& name) const {
  auto it = quantized_values_.find(name);
  if (it == quantized_values_.end()) {
    return absl::InternalError(absl::StrCat("tensor '", name, "' has no 8-bit value for an INT8 step"));
  }
  return it->second;
}

absl::StatusOr<int> PlanBuilder::AddQuantizedOutput(const std::string& name, DataType dtype) {
  CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(name));
  if (shape.size() != 4 && shape.size() != 2) {
    return absl::InternalError(absl::StrCat("8-bit tensor '", name, "' must be an image [N,C,H,W] or a matrix [N,C], "
                                            "got ", ShapeToString(shape)));
  }
  PlanTensor t{absl::StrCat(name, ":", absl::AsciiStrToLower(DataTypeName(dtype))), shape, dtype, Layout::kNHWC};
  plan_->tensors_.push_back(std::move(t));
  producer_.push_back(-1);
  const int id = static_cast<int>(plan_->tensors_.size()) - 1;
  quantized_values_[name] = id;
  return id;
}

absl::Status PlanBuilder::AliasQuantizedValue(const std::string& name, const std::string& source) {
  CONVOY_ASSIGN_OR_RETURN(int id, QuantizedValue(source));
  quantized_values_[name] = id;
  return absl::OkStatus();
}

absl::Status PlanBuilder::Quantize(const std::string& source, const std::string& name, DataType dtype, float scale,
                                   int zero_point) {
  CONVOY_ASSIGN_OR_RETURN(int x, Value(source));
  CONVOY_ASSIGN_OR_RETURN(x, Require(x, DataType::kFloat32, tensor(x).layout));
  const Layout src_layout = StoredLayout(tensor(x).layout, tensor(x).shape.size() == 4 ? tensor(x).shape[1] : 1);
  CONVOY_ASSIGN_OR_RETURN(int y, AddQuantizedOutput(name, dtype));
  auto problem_for = [this, x, dtype, src_layout, scale, zero_point](int b) {
    const ImageDims d = Dims(x, b);
    ConvertProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
    p.src_dtype = DataType::kFloat32, p.dst_dtype = dtype, p.src_layout = src_layout, p.dst_layout = Layout::kNHWC;
    p.scale = scale, p.zero_point = zero_point;
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ConvertArgs{t[x], t[y]}; };
  return AddKernelStep<ConvertOp>(absl::StrCat(name, ":quantize"), {x}, {y}, problem_for, bind);
}

absl::Status PlanBuilder::Dequantize(const std::string& name, float scale, int zero_point) {
  CONVOY_ASSIGN_OR_RETURN(int x, QuantizedValue(name));
  const int64_t channels = tensor(x).shape[1];
  // Into the layout the plan's FP32 ops take: blocked where the block divides the channels.
  const bool image = graph_.ShapeOf(name).ok() && graph_.ShapeOf(name)->size() == 4;
  const Layout layout = image && options_.layout == Layout::kNCHW8c && channels % kLayoutChannelBlock == 0
                            ? Layout::kNCHW8c
                            : this->layout();
  const DataType src_dtype = tensor(x).dtype;
  CONVOY_ASSIGN_OR_RETURN(int y, AddOutput(name, DataType::kFloat32, layout));
  auto problem_for = [this, x, src_dtype, layout, scale, zero_point](int b) {
    const ImageDims d = Dims(x, b);
    ConvertProblem p;
    p.n = d.n, p.c = d.c, p.h = d.h, p.w = d.w;
    p.src_dtype = src_dtype, p.dst_dtype = DataType::kFloat32, p.src_layout = Layout::kNHWC, p.dst_layout = layout;
    p.scale = scale, p.zero_point = zero_point;
    return p;
  };
  auto bind = [x, y](TensorPointers t) { return ConvertArgs{t[x], t[y]}; };
  return AddKernelStep<ConvertOp>(absl::StrCat(name, ":dequantize"), {x}, {y}, problem_for, bind);
}

namespace {
// Extent `i` of `dims`, 1 past its rank (an [N, C] Gemm input is the image [N, C, 1, 1]).
int Dim(const Shape& dims, size_t i) { return i < dims.size() ? static_cast<int>(dims[i]) : 1; }
}  // namespace

// Keeps the analysis's folds that this plan can run: an FP32 plan on a device with a QuantizedConv2dOp algorithm
// implementing the fold at every batch size. The others join the analysis's FP32 layers with the reason.
absl::Status PlanBuilder::ChooseQuantizedConvs() {
  QuantizedConvAnalysis analysis = AnalyzeQuantizedConvs(graph_);
  quantized_.fp32_reasons = analysis.fp32_reasons;
  const Backend backend = options_.device->backend();
  for (auto& [name, fold] : analysis.folds) {
    std::string reason;
    if (!options_.int8_convolutions) {
      reason = "INT8 steps are turned off for this plan";
    } else if (compute_dtype() != DataType::kFloat32) {
      reason = absl::StrCat("the plan computes in ", DataTypeName(compute_dtype()), "; INT8 steps join FP32 plans only");
    }
    CONVOY_ASSIGN_OR_RETURN(const Shape input_shape, graph_.ShapeOf(fold.input));
    const size_t rank = fold.source == QuantizedFoldSource::kGemm ? 2 : 4;
    if (reason.empty() && input_shape.size() != rank) {
      reason = absl::StrCat("its input is ", ShapeToString(input_shape), ", not ",
                            rank == 2 ? "a matrix [N,C]" : "an image [N,C,H,W]");
    }
    for (int b = 1; reason.empty() && b <= max_batch_size(); ++b) {
      const Shape d = ConcreteShape(input_shape, b);
      const QuantizedConv2dProblem problem = MakeQuantizedConvProblem(fold, int(d[0]), int(d[1]), Dim(d, 2), Dim(d, 3));
      auto algorithm = OpRegistry<QuantizedConv2dOp>::Global().Heuristic(problem, backend);
      if (!algorithm.ok()) {
        reason = absl::StrCat("no INT8 algorithm of this device implements ", problem.ToString(), ": ",
                              algorithm.status().message());
      }
    }
    if (reason.empty()) {
      quantized_.folds.emplace(name, std::move(fold));
    } else {
      quantized_.fp32_reasons[name] = reason;
    }
  }
  for (auto& [name, fold] : analysis.adds) {
    std::string reason;
    if (!options_.int8_convolutions) {
      reason = "INT8 steps are turned off for this plan";
    } else if (compute_dtype() != DataType::kFloat32) {
      reason = absl::StrCat("the plan computes in ", DataTypeName(compute_dtype()), "; INT8 steps join FP32 plans only");
    } else {
      QuantizedAddProblem probe = fold.quantization;
      auto algorithm = OpRegistry<QuantizedAddOp>::Global().Heuristic(probe, backend);
      if (!algorithm.ok()) {
        reason = absl::StrCat("no INT8 algorithm of this device implements ", probe.ToString(), ": ",
                              algorithm.status().message());
      }
    }
    if (reason.empty()) {
      quantized_.adds.emplace(name, std::move(fold));
    } else {
      quantized_.fp32_reasons[name] = reason;
    }
  }
  // The proposed conv + add fusions where both folds run INT8 and an algorithm implements the fused problem at every
  // batch size (oneDNN declines an order of FMAs it cannot reproduce); the others keep the add's own step.
  // With int8_single_rounding_adds, the one-rounding form first where it applies, else (or where no algorithm
  // implements it) the exact one.
  for (auto& [name, fold] : quantized_.folds) {
    if (fold.fused_add == QuantizedFusedAdd::kNone) continue;
    const QuantizedAddFold* add = quantized_.FindAdd(fold.add);
    CONVOY_ASSIGN_OR_RETURN(const Shape input_shape, graph_.ShapeOf(fold.input));
    auto implemented = [&]() {
      for (int b = 1; b <= max_batch_size(); ++b) {
        const Shape d = ConcreteShape(input_shape, b);
        const QuantizedConv2dProblem problem =
            MakeQuantizedConvProblem(fold, int(d[0]), int(d[1]), Dim(d, 2), Dim(d, 3), add);
        if (!OpRegistry<QuantizedConv2dOp>::Global().Heuristic(problem, backend).ok()) return false;
      }
      return true;
    };
    fold.add_single_rounding =
        add != nullptr && options_.int8_single_rounding_adds && SingleRoundingAddApplies(fold, *add);
    bool fused = add != nullptr && implemented();
    if (!fused && fold.add_single_rounding) {
      fold.add_single_rounding = false;
      fused = implemented();
    }
    if (!fused) quantized_.Unfuse(name);
  }
  // The 8-bit views (a Flatten between the pool and the classifier) that a kept fold reads; the others keep their
  // FP32 steps.
  for (auto& [name, view] : analysis.views) {
    for (int reader : graph_.ConsumerIndices(view.output)) {
      const QuantizedConvFold* fold = quantized_.Find(graph_.nodes()[reader].name);
      if (fold != nullptr && fold->input == view.output) {
        quantized_.views.emplace(name, view);
        break;
      }
    }
  }
  // The 8-bit max pools an algorithm of this device implements at every batch size (oneDNN's NHWC pooling; a
  // dilated window has none): the others keep their FP32 step between the simulated QDQ nodes.
  for (auto& [name, pool] : analysis.max_pools) {
    bool kept = options_.int8_convolutions && compute_dtype() == DataType::kFloat32;
    CONVOY_ASSIGN_OR_RETURN(const Shape input_shape, graph_.ShapeOf(pool.input));
    kept = kept && input_shape.size() == 4;
    for (int b = 1; kept && b <= max_batch_size(); ++b) {
      const Shape d = ConcreteShape(input_shape, b);
      const Pool2dProblem problem = Pool2dProblemFor(pool.attrs, ImageDims{int(d[0]), int(d[1]), int(d[2]), int(d[3])},
                                                     pool.type, Layout::kNHWC);
      kept = OpRegistry<Pool2dOp>::Global().Heuristic(problem, backend).ok();
    }
    if (kept) quantized_.max_pools.emplace(name, pool);
  }
  for (auto& [name, add] : quantized_.adds) {  // an add whose conv stayed FP32
    const QuantizedConvFold* conv = quantized_.Find(add.fused_into);
    if (conv == nullptr || conv->add != name) add.fused_into.clear();
  }
  for (const Node& node : graph_.nodes()) {
    const bool add = node.op() == OpKind::kBinary;
    const bool pool_or_gemm = node.op() == OpKind::kPool2d || node.op() == OpKind::kGemm;
    if (quantized_.Find(node.name) != nullptr || quantized_.FindAdd(node.name) != nullptr) {
      const QuantizedAddFold* add_fold = quantized_.FindAdd(node.name);
      const QuantizedConvFold* fused_into = add_fold != nullptr ? quantized_.Find(add_fold->fused_into) : nullptr;
      const bool rounded_once = fused_into != nullptr && fused_into->add_single_rounding;
      plan_->quantized_layers_.push_back({node.name, add, true, "", pool_or_gemm, rounded_once});
    } else if (auto it = quantized_.fp32_reasons.find(node.name); it != quantized_.fp32_reasons.end()) {
      plan_->quantized_layers_.push_back({node.name, add, false, it->second, pool_or_gemm});
    }
  }
  return absl::OkStatus();
}

// A UINT8 image input: plan input `input.name` is [N,] H, W, C bytes; a PreprocessOp step writes the graph's
// [N,] C, H, W tensor in the compute type (FP32 when the kernels cannot write it directly) and the plan layout.
absl::Status PlanBuilder::AddPreprocessedInput(const GraphInput& input, const PreprocessProblem& configured) {
  const bool batched = !input.shape.empty() && input.shape[0] == kBatch;
  const size_t image_rank = batched ? 4 : 3;
  if (input.shape.size() != image_rank) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': preprocessing needs a [N,]C,H,W input, ",
                                                   "the graph has ", DimsToString(input.shape)));
  }
  const int64_t c = input.shape[image_rank - 3], h = input.shape[image_rank - 2], w = input.shape[image_rank - 1];
  if (c != configured.c || h != configured.h || w != configured.w) {
    return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': preprocessing is configured for ",
                                                   configured.h, "x", configured.w, "x", configured.c,
                                                   " (HxWxC) images, the graph input is ", DimsToString(input.shape)));
  }
  Shape pixels_shape = {h, w, c};
  if (batched) pixels_shape.insert(pixels_shape.begin(), kBatch);
  PlanTensor pixels{input.name, pixels_shape, DataType::kUInt8, Layout::kNCHW};
  pixels.external = options_.device->backend() == Backend::kCpu;
  plan_->tensors_.push_back(std::move(pixels));
  producer_.push_back(-1);
  const int pixels_id = static_cast<int>(plan_->tensors_.size()) - 1;
  plan_->inputs_.push_back({input.name, pixels_id});

  PreprocessProblem probe = configured;
  probe.dst_dtype = compute_dtype();
  probe.dst_layout = layout();
  // A stem conv that is the image's only reader gets it padded to the tensor cores' channel count (zeros).
  const int padded = OnlyConvsRead(input.name) ? TensorCoreChannels(c) : 0;
  probe.dst_c = padded;
  const bool direct = OpRegistry<PreprocessOp>::Global().Heuristic(probe, options_.device->backend()).ok();
  if (!direct) probe.dst_c = 0;
  const DataType dtype = direct ? compute_dtype() : DataType::kFloat32;
  PlanTensor normalized{absl::StrCat(input.name, ":normalized"), input.shape, dtype, layout()};
  if (probe.dst_c > 0) normalized.shape[image_rank - 3] = probe.dst_c;
  plan_->tensors_.push_back(std::move(normalized));
  producer_.push_back(-1);
  const int out = static_cast<int>(plan_->tensors_.size()) - 1;
  values_[input.name] = out;
  auto problem_for = [configured, batched, dtype, this, dst_c = probe.dst_c](int b) {
    PreprocessProblem p = configured;
    p.n = batched ? b : 1;
    p.dst_dtype = dtype;
    p.dst_layout = layout();
    p.dst_c = dst_c;
    return p;
  };
  auto bind = [pixels_id, out](TensorPointers t) {
    return PreprocessArgs{static_cast<const uint8_t*>(t[pixels_id]), t[out]};
  };
  return AddKernelStep<PreprocessOp>(absl::StrCat(input.name, ":preprocess"), {pixels_id}, {out}, problem_for, bind);
}

absl::Status PlanBuilder::AddGraphInputs() {
  for (const GraphInput& input : graph_.inputs()) {
    if (auto p = options_.preprocessing.find(input.name); p != options_.preprocessing.end()) {
      CONVOY_RETURN_IF_ERROR(AddPreprocessedInput(input, p->second));
      continue;
    }
    auto it = options_.io_dtypes.find(input.name);
    const DataType dtype = it == options_.io_dtypes.end() ? DataType::kFloat32 : it->second;
    PlanTensor t{input.name, input.shape, dtype, Layout::kNCHW};
    // On the CPU the executor reads the caller's buffer in place.
    t.external = options_.device->backend() == Backend::kCpu;
    plan_->tensors_.push_back(std::move(t));
    producer_.push_back(-1);
    const int id = static_cast<int>(plan_->tensors_.size()) - 1;
    values_[input.name] = id;
    plan_->inputs_.push_back({input.name, id});
  }
  return absl::OkStatus();
}

// Keeps the squeeze-and-excitation branches (squeeze_excitation_fusion.h) that an algorithm of the device implements
// at every batch size in the plan's compute type and in every layout x can have here, and whose nodes are no INT8
// step of this plan.
absl::Status PlanBuilder::ChooseSqueezeExcitations() {
  if (!options_.fuse_squeeze_excitation) return absl::OkStatus();
  const auto& registry = OpRegistry<SqueezeExcitationOp>::Global();
  for (auto& [pool, branch] : FindSqueezeExcitationBranches(graph_)) {
    if (quantized_.Find(pool) != nullptr || quantized_.Find(branch.reduce->name) != nullptr ||
        quantized_.Find(branch.expand->name) != nullptr ||
        quantized_.FindAdd(branch.multiply->name) != nullptr) {
      continue;
    }
    CONVOY_ASSIGN_OR_RETURN(const Shape shape, graph_.ShapeOf(branch.x));
    bool implemented = true;
    for (int b = 1; implemented && b <= max_batch_size(); ++b) {
      const Shape dims = ConcreteShape(shape, b);
      for (Layout probe_layout : {layout(), StoredLayout(options_.layout, dims[1])}) {
        const SqueezeExcitationProblem probe =
            SqueezeExcitationProblemFor(branch, dims, compute_dtype(), probe_layout);
        implemented = implemented && registry.Heuristic(probe, options_.device->backend()).ok();
      }
    }
    if (!implemented) continue;
    fused_nodes_.insert({branch.reduce->name, branch.expand->name, branch.multiply->name});
    squeeze_excitations_.emplace(pool, branch);
  }
  return absl::OkStatus();
}

absl::Status PlanBuilder::PlanNode(const Node& node) {
  if (fused_nodes_.count(node.name) > 0) return absl::OkStatus();
  if (auto it = squeeze_excitations_.find(node.name); it != squeeze_excitations_.end()) {
    return PlanSqueezeExcitation(*this, it->second);
  }
  switch (node.op()) {
    case OpKind::kConv2d:
      if (const QuantizedConvFold* fold = quantized_.Find(node.name)) return PlanQuantizedConv2d(*this, node, *fold);
      return PlanConv2d(*this, node);
    case OpKind::kPool2d:
      if (const QuantizedConvFold* fold = quantized_.Find(node.name)) return PlanQuantizedConv2d(*this, node, *fold);
      if (const QuantizedMaxPoolFold* fold = quantized_.FindMaxPool(node.name)) {
        return PlanQuantizedMaxPool(*this, node, *fold);
      }
      return PlanPool2d(*this, node);
    case OpKind::kBatchNorm: return PlanBatchNorm(*this, node);
    case OpKind::kActivation:
      if (!quantized_.folds.empty() || !quantized_.adds.empty() || !quantized_.max_pools.empty()) {
        return PlanQuantizeDequantize(*this, node);
      }
      return PlanActivation(*this, node);
    case OpKind::kBinary:
      if (const QuantizedAddFold* fold = quantized_.FindAdd(node.name)) {
        if (!fold->fused_into.empty()) return absl::OkStatus();  // the conv's step computes it
        return PlanQuantizedAdd(*this, node, *fold);
      }
      return PlanBinary(*this, node);
    case OpKind::kConcat: return PlanConcat(*this, node);
    case OpKind::kSplit: return PlanSplit(*this, node);
    case OpKind::kChannelShuffle: return PlanChannelShuffle(*this, node);
    case OpKind::kSoftmax: return PlanSoftmax(*this, node);
    case OpKind::kGemm:
      if (const QuantizedConvFold* fold = quantized_.Find(node.name)) return PlanQuantizedConv2d(*this, node, *fold);
      return PlanGemm(*this, node);
    case OpKind::kPad: return PlanPad(*this, node);
    case OpKind::kFlatten:
    case OpKind::kReshape:
    case OpKind::kIdentity:
      if (const QuantizedViewFold* view = quantized_.FindView(node.name)) return PlanQuantizedView(*this, *view);
      return PlanAlias(*this, node);
    case OpKind::kTranspose: return PlanTranspose(*this, node);
    case OpKind::kResize: return PlanResize(*this, node);
    case OpKind::kArgMax: return PlanArgMax(*this, node);
    case OpKind::kLayerNorm: return PlanLayerNorm(*this, node);
    case OpKind::kConvTranspose2d: return PlanConvTranspose2d(*this, node);
    case OpKind::kUnary: return PlanUnary(*this, node);
  }
  return absl::UnimplementedError(absl::StrCat("node '", node.name, "' (", OpKindName(node.op()),
                                               "): no kernel implements this op; the passes must remove or fuse it"));
}

absl::Status PlanBuilder::BindGraphOutputs() {
  std::map<int, int> outputs_per_root;
  for (const std::string& name : graph_.outputs()) {
    auto it = options_.io_dtypes.find(name);
    const DataType dtype = it == options_.io_dtypes.end() ? DataType::kFloat32 : it->second;
    CONVOY_ASSIGN_OR_RETURN(int id, Value(name));
    if (!IsFloatingPoint(dtype) && tensor(id).dtype != dtype) {
      return absl::InvalidArgumentError(absl::StrCat(
          "output '", name, "': served as ", DataTypeName(dtype), ", which only an ArgMax output or a class_map "
          "writes; the model computes it as ", DataTypeName(tensor(id).dtype)));
    }
    CONVOY_ASSIGN_OR_RETURN(id, Require(id, dtype, Layout::kNCHW));
    plan_->outputs_.push_back({name, id});
    ++outputs_per_root[Root(id)];
  }
  // On the CPU a step writes a graph output straight into the caller's buffer when that buffer is the output's own
  // (not a graph input's, not shared with another output).
  if (options_.device->backend() != Backend::kCpu) return absl::OkStatus();
  for (const PlanBinding& binding : plan_->outputs_) {
    const int root = Root(binding.tensor);
    if (producer_[root] >= 0 && outputs_per_root[root] == 1) plan_->tensors_[root].external = true;
  }
  return absl::OkStatus();
}

absl::Status PlanBuilder::PlanMemory() {
  const int num_steps = static_cast<int>(plan_->steps_.size());
  std::vector<int> last_read(plan_->tensors_.size(), -1);
  for (int s = 0; s < num_steps; ++s) {
    for (int in : plan_->steps_[s]->inputs()) last_read[in] = s;
  }
  std::set<int> graph_outputs;
  for (const PlanBinding& b : plan_->outputs_) graph_outputs.insert(b.tensor);
  for (int b = 1; b <= plan_->max_batch_size_; ++b) {
    std::vector<BufferUse> uses(plan_->tensors_.size());
    for (size_t i = 0; i < uses.size(); ++i) {
      const PlanTensor& t = plan_->tensors_[i];
      BufferUse& u = uses[i];
      u.bytes = t.Bytes(b);
      u.alias_of = t.alias_of;
      u.external = t.external;
      u.first_step = producer_[i];
      u.last_step = graph_outputs.count(static_cast<int>(i)) ? num_steps : std::max(last_read[i], u.first_step);
    }
    CONVOY_ASSIGN_OR_RETURN(MemoryPlan memory, PlanActivationMemory(uses, kArenaAlignment));
    plan_->arena_bytes_ = std::max(plan_->arena_bytes_, memory.arena_bytes);
    plan_->memory_plans_.push_back(std::move(memory));
    for (const auto& step : plan_->steps_) {
      plan_->workspace_bytes_ = std::max(plan_->workspace_bytes_, step->WorkspaceBytes(b));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> PlanBuilder::Build() {
  if (options_.device == nullptr) return absl::InvalidArgumentError("PlannerOptions.device is required");
  if (options_.precision == Precision::kAuto) {
    return absl::InvalidArgumentError("PlannerOptions.precision 'auto' must be resolved first (ResolvePrecision)");
  }
  if (options_.precision == Precision::kInt8) {
    return absl::InvalidArgumentError("PlannerOptions.precision 'int8' is planned as fp32 on a quantized graph "
                                      "(ModelRuntime, calibrated_quantization.h)");
  }
  plan_->device_ = options_.device;
  plan_->precision_ = options_.precision;
  plan_->layout_ = options_.layout;
  for (const GraphInput& input : graph_.inputs()) {
    if (!input.shape.empty() && input.shape[0] == kBatch) plan_->has_batch_dimension_ = true;
  }
  if (plan_->has_batch_dimension_ && options_.max_batch_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("max_batch_size must be >= 1 for a graph with a batch dimension, "
                                                   "got ", options_.max_batch_size));
  }
  plan_->max_batch_size_ = plan_->has_batch_dimension_ ? options_.max_batch_size : 1;
  CONVOY_RETURN_IF_ERROR(AddGraphInputs());
  CONVOY_RETURN_IF_ERROR(ChooseQuantizedConvs());
  CONVOY_RETURN_IF_ERROR(ChooseSqueezeExcitations());
  const std::vector<Node>& nodes = graph_.nodes();
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  const bool verified = VerificationApplies<Conv2dOp>(*options_.device, options_.tuning.verification);
  for (size_t i = 0; i < nodes.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(PlanNode(nodes[i]));
    const auto now = std::chrono::steady_clock::now();
    if (!options_.log || i + 1 == nodes.size() ||
        std::chrono::duration<double>(now - last_progress).count() < options_.progress_interval_seconds) {
      continue;
    }
    last_progress = now;
    options_.log(absl::StrFormat("planning: %d of %d nodes after %.1f s (last '%s'; every conv/GEMM is chosen%s for "
                                 "batch sizes 1..%d)",
                                 i + 1, nodes.size(), std::chrono::duration<double>(now - start).count(),
                                 nodes[i].name, verified ? " and verified" : "",
                                 plan_->max_batch_size_));
  }
  CONVOY_RETURN_IF_ERROR(BindGraphOutputs());
  CONVOY_RETURN_IF_ERROR(PlanMemory());
  // Filter packing ran on the device's own stream; executors run on streams of their own, so the plan is handed out
  // only once that work is done.
  CONVOY_RETURN_IF_ERROR(options_.device->Synchronize());
  return std::shared_ptr<const ExecutionPlan>(std::move(plan_));
}

absl::StatusOr<std::shared_ptr<const ExecutionPlan>> BuildExecutionPlan(const Graph& graph,
                                                                        const PlannerOptions& options) {
  PlanBuilder builder(graph, options);
  return builder.Build();
}

}  // namespace convoy::runtime
