// Model loading (import, optimize, plan, warm up) and per-instance batch execution (see model_runtime.h).
#include "server/runtime/model_runtime.h"

#include "kernels/cpu/onednn_support.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "server/repository/calibration_table.h"
#include "server/repository/model_loader.h"
#include "server/runtime/image_by_image.h"
#include "server/runtime/planner.h"

namespace convoy::runtime {
namespace {

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

Precision FromConfigPrecision(repository::Precision precision) {
  switch (precision) {
    case repository::Precision::kTf32: return Precision::kTf32;
    case repository::Precision::kFp16: return Precision::kFp16;
    case repository::Precision::kBf16: return Precision::kBf16;
    case repository::Precision::kAuto: return Precision::kAuto;
    case repository::Precision::kInt8: return Precision::kInt8;
    case repository::Precision::kFp32: break;
  }
  return Precision::kFp32;
}

// The graph-side shape of a configured tensor: [N,] + dims, with a preprocessed [H,W,C] image becoming [C,H,W].
Shape GraphShape(const repository::TensorConfig& t, bool batching) {
  Shape dims = t.dims;
  if (t.preprocessing.has_value()) dims = {t.dims[2], t.dims[0], t.dims[1]};
  if (batching) dims.insert(dims.begin(), kBatch);
  return dims;
}

// A config output with class_map: the graph's [N, C, H, W] scores tensor `name` is renamed `name`/scores and an
// ArgMax over C (keepdims 0) writes `name` ([N, H, W]), which the planner writes as the served UINT8 or INT32.
absl::Status AppendClassMap(Graph& graph, const repository::TensorConfig& output) {
  const std::string& name = output.name;
  const int producer = graph.ProducerIndex(name);
  if (producer < 0) {
    return absl::InvalidArgumentError(absl::StrCat("output '", name, "': class_map needs an output computed by the "
                                                   "model, not a graph input or constant"));
  }
  CONVOY_ASSIGN_OR_RETURN(Shape scores, graph.ShapeOf(name));
  if (scores.size() != 4) {
    return absl::InvalidArgumentError(absl::StrCat("output '", name, "': class_map needs [N, C, H, W] scores, the "
                                                   "model computes ", ShapeToString(scores)));
  }
  if (output.data_type == repository::TensorDataType::kUint8 && scores[1] > 256) {
    return absl::InvalidArgumentError(absl::StrCat("output '", name, "': a UINT8 class map holds 256 classes, the "
                                                   "model scores ", scores[1], "; use datatype INT32"));
  }
  const std::string renamed = graph.UniqueName(name + "/scores");
  for (Node& node : graph.mutable_nodes()) {
    for (std::string& in : node.inputs) {
      if (in == name) in = renamed;
    }
    for (std::string& out : node.outputs) {
      if (out == name) out = renamed;
    }
  }
  CONVOY_RETURN_IF_ERROR(graph.AddNode(MakeNode(graph.UniqueName(name + "/class_map"), ArgMaxAttrs{1, false, false},
                                                {renamed}, {name})));
  return graph.Finalize();  // the graph output `name` is now the class map
}

absl::StatusOr<PreprocessProblem> MakePreprocessProblem(const repository::TensorConfig& t) {
  const auto& p = *t.preprocessing;
  PreprocessProblem problem;
  problem.h = static_cast<int>(t.dims[0]), problem.w = static_cast<int>(t.dims[1]);
  problem.c = static_cast<int>(t.dims[2]);
  if (problem.c > PreprocessProblem::kMaxChannels) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': preprocessing supports at most ",
                                                   PreprocessProblem::kMaxChannels, " channels, got ", problem.c));
  }
  if (std::abs(p.scale - 1.0f / 255.0f) < 1e-9f) {
    problem.scale_to_unit = true;
  } else if (p.scale == 1.0f) {
    problem.scale_to_unit = false;
  } else {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': preprocessing scale must be 1/255 or 1, got ",
                                                   p.scale));
  }
  for (int c = 0; c < problem.c; ++c) problem.mean[c] = p.mean[c], problem.stddev[c] = p.std[c];
  problem.dst_dtype = DataType::kFloat32;
  problem.dst_layout = Layout::kNCHW;
  return problem;
}

// The precision asked for: the override, else the config's.
Precision RequestedPrecision(const ModelRuntimeOptions& options) {
  const repository::OptimizationConfig defaults;
  const repository::OptimizationConfig& optimization = options.config ? options.config->optimization : defaults;
  return options.precision.value_or(FromConfigPrecision(optimization.precision));
}

// The calibration table of precision int8: the override, else the config's (default calibration.yaml), a relative
// path taken from the model file's folder.
std::string CalibrationTablePath(const ModelRuntimeOptions& options) {
  std::string path = options.calibration_table.value_or(
      options.config ? options.config->optimization.calibration_table : std::string("calibration.yaml"));
  if (!options.calibration_table.has_value() && !path.empty() && path[0] != '/') {
    const size_t slash = options.model_path.find_last_of('/');
    if (slash != std::string::npos) path = options.model_path.substr(0, slash + 1) + path;
  }
  return path;
}

}  // namespace

Layout DefaultCpuLayout(bool avx512_kernels, bool grouped_convs) {
  return avx512_kernels && !grouped_convs ? Layout::kNHWC : Layout::kNCHW8c;
}

bool HasGroupedNonDepthwiseConv(const Graph& graph) {
  for (const Node& node : graph.nodes()) {
    if (node.op() != OpKind::kConv2d || node.As<Conv2dAttrs>().groups <= 1) continue;
    // The filter is [K, C/groups, R, S]: depthwise has one input channel per group.
    absl::StatusOr<Shape> filter = node.inputs.size() > 1 ? graph.ShapeOf(node.inputs[1]) : absl::StatusOr<Shape>();
    if (!filter.ok() || filter->size() != 4 || (*filter)[1] != 1) return true;
  }
  return false;
}

std::vector<int64_t> ModelRuntime::ConcreteDims(const TensorMetadata& t, int batch_size) const {
  std::vector<int64_t> dims = t.dims;
  if (max_batch_size_ > 0) dims[0] = batch_size;
  return dims;
}

absl::Status ModelRuntime::ImportGraph(const ModelRuntimeOptions& options) {
  repository::LoadGraphOptions load;
  const bool batching = config_.has_value() && config_->max_batch_size > 0;
  if (config_.has_value()) {
    for (const auto& input : config_->inputs) load.input_shapes[input.name] = GraphShape(input, batching);
  }
  CONVOY_ASSIGN_OR_RETURN(repository::LoadedGraph loaded, repository::LoadGraphFile(options.model_path, load));
  graph_ = std::move(loaded.graph);
  report_.optimize_stats = loaded.stats.ToString();
  if (config_.has_value()) {
    for (const auto& output : config_->outputs) {
      if (output.class_map) CONVOY_RETURN_IF_ERROR(AppendClassMap(graph_, output));
    }
  }
  if (!config_.has_value()) {
    bool has_batch = false;
    for (const GraphInput& in : graph_.inputs()) has_batch |= !in.shape.empty() && in.shape[0] == kBatch;
    max_batch_size_ = has_batch ? options.default_max_batch_size : 0;
    for (const GraphInput& in : graph_.inputs()) {
      input_plan_index_.push_back(static_cast<int>(inputs_.size()));
      inputs_.push_back({in.name, DataType::kFloat32, in.shape});
    }
    for (size_t i = 0; i < graph_.outputs().size(); ++i) {
      CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(graph_.outputs()[i]));
      outputs_.push_back({graph_.outputs()[i], DataType::kFloat32, shape});
      output_plan_index_.push_back(static_cast<int>(i));
    }
    preprocessing_.resize(inputs_.size());
    return absl::OkStatus();
  }
  CONVOY_ASSIGN_OR_RETURN(const ModelSignature declared, SignatureFromConfig(*config_));
  max_batch_size_ = declared.max_batch_size;
  if (config_->inputs.size() != graph_.inputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name_, "': the config lists ", config_->inputs.size(),
                                                   " inputs, the model file has ", graph_.inputs().size()));
  }
  for (const auto& input : config_->inputs) {
    auto it = std::find_if(graph_.inputs().begin(), graph_.inputs().end(),
                           [&](const GraphInput& g) { return g.name == input.name; });
    if (it == graph_.inputs().end()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", name_, "': config input '", input.name,
                                                     "' is not an input of ", options.model_path));
    }
    if (it->shape != GraphShape(input, batching)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': the config gives ",
                                                     ShapeToString(GraphShape(input, batching)), ", the model has ",
                                                     ShapeToString(it->shape)));
    }
    if (input.layout != repository::TensorLayout::kNchw && !input.preprocessing.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", input.name, "': only NCHW float inputs are supported "
                                                     "(NHWC images go through `preprocessing`)"));
    }
    inputs_.push_back(declared.inputs[inputs_.size()]);
    input_plan_index_.push_back(static_cast<int>(it - graph_.inputs().begin()));
    preprocessing_.emplace_back();
    if (input.preprocessing.has_value()) {
      CONVOY_ASSIGN_OR_RETURN(preprocessing_.back(), MakePreprocessProblem(input));
    }
  }
  for (const auto& output : config_->outputs) {
    const auto& outs = graph_.outputs();
    auto it = std::find(outs.begin(), outs.end(), output.name);
    if (it == outs.end()) {
      return absl::InvalidArgumentError(absl::StrCat("model '", name_, "': config output '", output.name,
                                                     "' is not an output of ", options.model_path));
    }
    CONVOY_ASSIGN_OR_RETURN(Shape shape, graph_.ShapeOf(output.name));
    if (shape != GraphShape(output, batching)) {
      return absl::InvalidArgumentError(absl::StrCat("output '", output.name, "': the config gives ",
                                                     ShapeToString(GraphShape(output, batching)),
                                                     ", the model computes ", ShapeToString(shape)));
    }
    outputs_.push_back(declared.outputs[outputs_.size()]);
    output_plan_index_.push_back(static_cast<int>(it - outs.begin()));
  }
  if (outputs_.size() != graph_.outputs().size()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", name_, "': the config lists ", outputs_.size(),
                                                   " outputs, the model file computes ", graph_.outputs().size()));
  }
  return absl::OkStatus();
}

absl::Status ModelRuntime::QuantizeGraph(const ModelRuntimeOptions& options) {
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  if (options.device->backend() != Backend::kCpu) {
    log(absl::StrCat(name_, ": precision int8 on ", options.device->Identity(), ": the INT8 steps run on CPUs; here "
                     "the quantization is simulated in FP32"));
  }
  if (HasQuantizeDequantize(graph_)) {
    int8_layers_ = DescribeQuantizedLayers(graph_);
    log(absl::StrCat(name_, ": precision int8: the model's own quantize-dequantize scales (a QDQ file; no "
                     "calibration table is read)"));
    return absl::OkStatus();
  }
  const std::string path = CalibrationTablePath(options);
  absl::StatusOr<CalibrationTable> table = repository::ReadCalibrationTable(path);
  if (absl::IsNotFound(table.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "model '", name_, "': precision int8 needs a calibration table, and ", path, " does not exist; make it with "
        "`convoy calibrate --model=", options.model_path, " --images=DIR` (docs/model_config.md)"));
  }
  if (!table.ok()) {
    return absl::Status(table.status().code(), absl::StrCat("model '", name_, "': ", table.status().message()));
  }
  absl::StatusOr<std::vector<LayerOutcome>> outcomes = QuantizeWithCalibrationTable(graph_, *table, path);
  if (!outcomes.ok()) {
    return absl::Status(outcomes.status().code(), absl::StrCat("model '", name_, "': ", outcomes.status().message()));
  }
  int8_layers_ = std::move(*outcomes);
  int convs = 0, convs_int8 = 0, adds = 0, adds_int8 = 0, tail = 0, tail_int8 = 0;
  for (const LayerOutcome& layer : int8_layers_) {
    const bool add = layer.kind == CalibratedLayerKind::kResidualAdd;
    const bool conv = layer.kind == CalibratedLayerKind::kConv;
    (add ? adds : conv ? convs : tail) += 1;
    (add ? adds_int8 : conv ? convs_int8 : tail_int8) += layer.int8;
  }
  log(absl::StrFormat("%s: precision int8 from %s (%s, %d samples): %d of %d convolutions, %d of %d residual adds "
                      "and %d of %d classifier pool / Gemm layers quantized; the rest stay FP32 (`convoy inspect` "
                      "says why)",
                      name_, path, CalibrationMethodName(table->method), table->samples, convs_int8, convs, adds_int8,
                      adds, tail_int8, tail));
  return absl::OkStatus();
}

absl::Status ModelRuntime::Plan(const ModelRuntimeOptions& options) {
  PlannerOptions planner;
  planner.device = options.device;
  const repository::OptimizationConfig defaults;
  const repository::OptimizationConfig& optimization = config_ ? config_->optimization : defaults;
  const Precision requested = RequestedPrecision(options);
  // auto: BF16 where the CPU computes it natively (oneDNN sees AVX512-BF16 or AMX), FP32 elsewhere (GPUs included).
  // int8: an FP32 plan of the quantized graph (QuantizeGraph), whose quantized layers become INT8 steps.
  const bool bf16_compute = options.device->backend() == Backend::kCpu && cpu::onednn::HasBf16Compute();
  planner.precision = requested == Precision::kInt8 ? Precision::kFp32 : ResolvePrecision(requested, bf16_compute);
  if (requested == Precision::kAuto && options.log) {
    options.log(absl::StrCat(name_, ": precision auto -> ", PrecisionName(planner.precision),
                      bf16_compute ? " (the CPU computes BF16: AMX or AVX512-BF16)"
                                   : " (no BF16 compute on this device: AMX/AVX512-BF16 absent or not a CPU)"));
  }
  // The CPU default follows oneDNN's kernels on this CPU (DefaultCpuLayout; docs/runtime.md, "Layouts"); CUDA's
  // tensor-core kernels want NHWC.
  const bool cpu = options.device->backend() == Backend::kCpu;
  planner.layout = options.layout.value_or(
      cpu ? DefaultCpuLayout(cpu::onednn::HasAvx512Kernels(), HasGroupedNonDepthwiseConv(graph_)) : Layout::kNHWC);
  planner.max_batch_size = std::max(1, max_batch_size_);
  planner.int8_convolutions = options.int8_convolutions.value_or(true);
  planner.int8_single_rounding_adds = options.int8_single_rounding_adds.value_or(
      optimization.int8_residual_add == repository::Int8ResidualAdd::kSingleRounding);
  planner.fuse_squeeze_excitation = options.fuse_squeeze_excitation.value_or(true);
  planner.selection = options.selection.value_or(optimization.algorithm_selection == repository::AlgorithmSelection::kTune
                                                     ? AlgorithmSelection::kTune
                                                     : AlgorithmSelection::kHeuristic);
  planner.tuned_batch_sizes = options.tune_batch_sizes;
  if (planner.tuned_batch_sizes.empty()) {
    for (int64_t b : optimization.tune_batch_sizes) planner.tuned_batch_sizes.push_back(static_cast<int>(b));
  }
  planner.tuning = options.tuning;
  if (!optimization.verify_algorithms) planner.tuning.verification.enabled = false;
  planner.cache = options.cache;
  planner.log = options.log;
  for (size_t i = 0; i < inputs_.size(); ++i) {
    if (preprocessing_[i].has_value()) {
      planner.preprocessing[inputs_[i].name] = *preprocessing_[i];
    } else {
      planner.io_dtypes[inputs_[i].name] = inputs_[i].datatype;
    }
  }
  for (const TensorMetadata& out : outputs_) planner.io_dtypes[out.name] = out.datatype;
  CONVOY_ASSIGN_OR_RETURN(plan_, BuildExecutionPlan(graph_, planner));
  if (options.cuda_graphs.value_or(optimization.cuda_graphs)) {
    CONVOY_ASSIGN_OR_RETURN(std::unique_ptr<DeviceQueue> probe, options.device->CreateQueue());
    records_graphs_ = probe->CanRecord();
    if (!records_graphs_ && options.log) {
      options.log(absl::StrCat(name_, ": cuda_graphs is on but ", options.device->Identity(),
                               " cannot record work; steps run one by one"));
    }
  }
  CONVOY_RETURN_IF_ERROR(ChooseImageByImage(options));
  report_.weight_bytes = plan_->weight_bytes();
  report_.arena_bytes = plan_->arena_bytes();
  for (size_t b = 0; b < image_by_image_steps_.size(); ++b) {  // a prefix adds its scratch region
    if (image_by_image_steps_[b] == 0) continue;
    CONVOY_ASSIGN_OR_RETURN(const ImageByImageLayout layout,
                            MakeImageByImageLayout(*plan_, static_cast<int>(b), image_by_image_steps_[b]));
    report_.arena_bytes = std::max(report_.arena_bytes, layout.arena_bytes);
  }
  report_.workspace_bytes = plan_->workspace_bytes();
  return absl::OkStatus();
}

namespace {

// Whether `batch_size`'s algorithms were timed (at load or from the algorithm cache) rather than picked by heuristic.
bool TunedAt(const ExecutionPlan& plan, int batch_size) {
  for (const auto& step : plan.steps()) {
    if (step->TunedMilliseconds(batch_size) > 0) return true;
  }
  return false;
}

// Runs a plan at one batch size on inputs of 0.5 (as the config's warm-up uses), timing each run and, with
// `observe_steps`, keeping each step's fastest time (ms). `image_by_image_steps` as Executor::Options has it.
class StepProfiler {
 public:
  static absl::StatusOr<std::unique_ptr<StepProfiler>> Create(std::shared_ptr<const ExecutionPlan> plan,
                                                              int batch_size, bool observe_steps = true,
                                                              int image_by_image_steps = 0) {
    std::unique_ptr<StepProfiler> profiler(new StepProfiler(batch_size));
    Executor::Options options;
    options.plan = plan;
    if (image_by_image_steps > 0) {
      options.image_by_image_steps.assign(batch_size + 1, 0);
      options.image_by_image_steps[batch_size] = image_by_image_steps;
    }
    CONVOY_ASSIGN_OR_RETURN(profiler->executor_, Executor::Create(options));
    for (size_t i = 0; i < plan->inputs().size(); ++i) {
      CONVOY_ASSIGN_OR_RETURN(HostTensor h, HostTensor::Create(profiler->executor_->ExpectedInputDesc(i, batch_size)));
      for (int64_t e = 0; e < h.desc().num_elements(); ++e) StoreFromFloat(h.data(), h.desc().dtype(), e, 0.5f);
      profiler->inputs_.push_back(h.view());
      profiler->buffers_.push_back(std::move(h));
    }
    for (size_t i = 0; i < plan->outputs().size(); ++i) {
      CONVOY_ASSIGN_OR_RETURN(HostTensor h, HostTensor::Create(profiler->executor_->ExpectedOutputDesc(i, batch_size)));
      profiler->outputs_.push_back(h.view());
      profiler->buffers_.push_back(std::move(h));
    }
    // The warm-up run touches the arena's pages and the kernels' first-call state; it is not counted.
    CONVOY_RETURN_IF_ERROR(profiler->executor_->Run(batch_size, profiler->inputs_, profiler->outputs_));
    profiler->fastest_.assign(plan->steps().size(), std::numeric_limits<double>::infinity());
    if (!observe_steps) return profiler;
    profiler->executor_->set_step_observer([p = profiler.get()](int index, const PlanStep&, double milliseconds) {
      p->fastest_[index] = std::min(p->fastest_[index], milliseconds);
    });
    return profiler;
  }

  // One more timed run; returns its wall time in seconds.
  absl::StatusOr<double> Run() {
    const auto start = std::chrono::steady_clock::now();
    CONVOY_RETURN_IF_ERROR(executor_->Run(batch_size_, inputs_, outputs_));
    return SecondsSince(start);
  }
  const std::vector<double>& fastest() const { return fastest_; }

 private:
  explicit StepProfiler(int batch_size) : batch_size_(batch_size) {}
  const int batch_size_;
  std::unique_ptr<Executor> executor_;
  std::vector<HostTensor> buffers_;
  std::vector<TensorView> inputs_, outputs_;
  std::vector<double> fastest_;
};

}  // namespace

absl::Status ModelRuntime::ChooseImageByImage(const ModelRuntimeOptions& options) {
  const int longest = LongestImageByImagePrefix(*plan_);
  const bool enabled = config_ ? config_->optimization.image_by_image : true;
  const int forced = options.image_by_image_steps.value_or(enabled ? -1 : 0);
  if (longest == 0 || forced == 0) return absl::OkStatus();
  image_by_image_steps_.assign(plan_->max_batch_size() + 1, 0);
  if (forced > 0) {
    for (int b = 2; b <= plan_->max_batch_size(); ++b) image_by_image_steps_[b] = std::min(forced, longest);
    if (options.log) {
      options.log(absl::StrFormat("%s: every batch size from 2 runs its first %d of %d steps image by image (asked "
                                  "for %d; the longest prefix that keeps images apart is %d)",
                                  name_, std::min(forced, longest), plan_->steps().size(), forced, longest));
    }
    return absl::OkStatus();
  }
  // Measured only where the plan was tuned: profiling costs a few runs per batch size, which heuristic loads skip.
  std::vector<int> batch_sizes;
  for (int b = 2; b <= plan_->max_batch_size(); ++b) {
    if (TunedAt(*plan_, b)) batch_sizes.push_back(b);
  }
  if (batch_sizes.empty()) return absl::OkStatus();
  // Runs at batch 1 and at the batch size alternate (the host's drift hits both alike), at least kMinRuns pairs and
  // until kMinSeconds have passed, at most kMaxRuns; each step's fastest time counts. The prefix they favour is then
  // confirmed by whole runs of the batch with and without it, alternating the same way: kept where the median of the
  // pairs' ratios is at most kKeepRatio.
  constexpr int kMinRuns = 5, kMaxRuns = 25;
  constexpr double kMinSeconds = 0.3, kKeepRatio = 0.95;
  const auto start = std::chrono::steady_clock::now();
  CONVOY_ASSIGN_OR_RETURN(auto at_one, StepProfiler::Create(plan_, 1));
  std::vector<std::string> outcomes;
  auto alternate = [&](StepProfiler& a, StepProfiler& b, std::vector<double>* ratios) -> absl::Status {
    const auto begin = std::chrono::steady_clock::now();
    for (int runs = 0; runs < kMinRuns || (runs < kMaxRuns && SecondsSince(begin) < kMinSeconds); ++runs) {
      CONVOY_ASSIGN_OR_RETURN(const double first, a.Run());
      CONVOY_ASSIGN_OR_RETURN(const double second, b.Run());
      if (ratios != nullptr) ratios->push_back(first / second);
    }
    return absl::OkStatus();
  };
  for (int b : batch_sizes) {
    CONVOY_ASSIGN_OR_RETURN(auto at_batch, StepProfiler::Create(plan_, b));
    CONVOY_RETURN_IF_ERROR(alternate(*at_one, *at_batch, nullptr));
    const ImageByImageChoice choice = ChooseImageByImageSteps(*plan_, b, at_one->fastest(), at_batch->fastest());
    if (choice.steps == 0) {
      outcomes.push_back(absl::StrFormat("batch %d as a whole (no prefix gains 5%% of %.2f ms by the step times)", b,
                                         choice.all_steps_milliseconds));
      continue;
    }
    at_batch.reset();
    CONVOY_ASSIGN_OR_RETURN(auto split, StepProfiler::Create(plan_, b, /*observe_steps=*/false, choice.steps));
    CONVOY_ASSIGN_OR_RETURN(auto whole, StepProfiler::Create(plan_, b, /*observe_steps=*/false));
    std::vector<double> ratios;
    CONVOY_RETURN_IF_ERROR(alternate(*split, *whole, &ratios));
    const double ratio = autotuner_internal::Median(ratios);
    const bool keep = ratio <= kKeepRatio;
    image_by_image_steps_[b] = keep ? choice.steps : 0;
    outcomes.push_back(absl::StrFormat("batch %d: %s the first %d steps (by the step times %.2f ms at batch %d, %.2f "
                                       "ms as %d images, of %.2f ms; whole runs %.3f of the batch's time)",
                                       b, keep ? "image by image," : "as a whole, not", choice.steps,
                                       choice.batch_milliseconds, b, choice.image_by_image_milliseconds, b,
                                       choice.all_steps_milliseconds, ratio));
  }
  if (options.log) {
    options.log(absl::StrFormat("%s: image by image, measured at each tuned batch size (%.2f s): %s", name_,
                                SecondsSince(start), absl::StrJoin(outcomes, "; ")));
  }
  return absl::OkStatus();
}

absl::Status ModelRuntime::Warmup(const ModelRuntimeOptions& options) {
  if (!options.warmup || !config_.has_value() || !config_->warmup.has_value()) return absl::OkStatus();
  CONVOY_ASSIGN_OR_RETURN(auto instance, CreateInstance());
  CONVOY_RETURN_IF_ERROR(WarmUp(*instance));
  // The warm-up instance recorded a graph per batch size it ran: a failure here would repeat in every instance.
  const Executor& executor = instance->executor();
  if (records_graphs_ && options.log) {
    options.log(executor.recording_error().ok()
                    ? absl::StrCat(name_, ": recorded a CUDA graph for ", executor.recorded_batch_sizes(),
                                   " warm-up batch size(s)")
                    : absl::StrCat(name_, ": warning: CUDA graph recording failed, steps run one by one: ",
                                   executor.recording_error().message()));
  }
  return absl::OkStatus();
}

absl::Status ModelRuntime::WarmUp(ModelInstance& instance) const {
  if (!config_.has_value() || !config_->warmup.has_value()) return absl::OkStatus();
  for (int64_t b : config_->warmup->batch_sizes) {
    const int batch = static_cast<int>(std::min<int64_t>(std::max<int64_t>(b, 1), std::max(1, max_batch_size_)));
    std::vector<HostTensor> buffers;
    std::vector<TensorView> ins, outs;
    for (const TensorMetadata& t : inputs_) {
      CONVOY_ASSIGN_OR_RETURN(HostTensor h, HostTensor::Create(TensorDesc(t.datatype, ConcreteDims(t, batch))));
      for (int64_t i = 0; i < h.desc().num_elements(); ++i) StoreFromFloat(h.data(), t.datatype, i, 0.5f);
      ins.push_back(h.view());
      buffers.push_back(std::move(h));
    }
    for (const TensorMetadata& t : outputs_) {
      CONVOY_ASSIGN_OR_RETURN(HostTensor h, HostTensor::Create(TensorDesc(t.datatype, ConcreteDims(t, batch))));
      outs.push_back(h.view());
      buffers.push_back(std::move(h));
    }
    for (int64_t i = 0; i < config_->warmup->iterations; ++i) CONVOY_RETURN_IF_ERROR(instance.Run(batch, ins, outs));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ModelRuntime>> ModelRuntime::Create(const ModelRuntimeOptions& options) {
  if (options.device == nullptr) return absl::InvalidArgumentError("ModelRuntimeOptions.device is required");
  std::unique_ptr<ModelRuntime> model(new ModelRuntime());
  model->config_ = options.config;
  model->name_ = options.config ? options.config->name : options.model_path;
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  auto start = std::chrono::steady_clock::now();
  CONVOY_RETURN_IF_ERROR(model->ImportGraph(options));
  if (RequestedPrecision(options) == Precision::kInt8) CONVOY_RETURN_IF_ERROR(model->QuantizeGraph(options));
  model->report_.import_seconds = SecondsSince(start);
  log(absl::StrFormat("%s: imported and optimized %s in %.3f s: %d nodes (%s)", model->name_, options.model_path,
                      model->report_.import_seconds, model->graph_.nodes().size(), model->report_.optimize_stats));
  start = std::chrono::steady_clock::now();
  CONVOY_RETURN_IF_ERROR(model->Plan(options));
  model->report_.plan_seconds = SecondsSince(start);
  const ExecutionPlan& plan = *model->plan_;
  log(absl::StrFormat("%s: planned %d steps for %s (%s, %s%s) in %.3f s: weights %s, arena %s and workspace %s "
                      "per instance",
                      model->name_, plan.steps().size(), plan.device().Identity(), PrecisionName(plan.precision()),
                      LayoutName(plan.layout()), model->records_graphs_ ? ", a CUDA graph per batch size" : "",
                      model->report_.plan_seconds, FormatBytes(plan.weight_bytes()),
                      FormatBytes(model->report_.arena_bytes), FormatBytes(plan.workspace_bytes())));
  if (const std::string quantization = plan.QuantizationSummary(); !quantization.empty()) {
    log(absl::StrCat(model->name_, ": ", quantization, " (`convoy inspect` lists each)"));
  }
  for (int b : {1, plan.max_batch_size()}) {
    log(absl::StrCat(model->name_, ": memory at batch ", b, ": ", DescribeMemoryPlan(plan.memory_plan(b))));
    if (plan.max_batch_size() == 1) break;
  }
  start = std::chrono::steady_clock::now();
  CONVOY_RETURN_IF_ERROR(model->Warmup(options));
  model->report_.warmup_seconds = SecondsSince(start);
  if (options.warmup && model->config_ && model->config_->warmup) {
    log(absl::StrFormat("%s: warmed up in %.3f s", model->name_, model->report_.warmup_seconds));
  }
  return model;
}

absl::StatusOr<std::unique_ptr<ModelInstance>> ModelRuntime::CreateInstance(bool image_by_image) const {
  Executor::Options executor_options;
  executor_options.plan = plan_;
  executor_options.record_per_batch_size = records_graphs_;
  if (image_by_image) executor_options.image_by_image_steps = image_by_image_steps_;
  CONVOY_ASSIGN_OR_RETURN(auto executor, Executor::Create(executor_options));
  std::unique_ptr<ModelInstance> instance(new ModelInstance(this, std::move(executor)));
  instance->plan_inputs_.resize(plan_->inputs().size());
  instance->plan_outputs_.resize(plan_->outputs().size());
  return instance;
}

absl::Status ModelRuntime::ValidateInput(size_t index, int batch_size, const TensorDesc& desc,
                                         size_t byte_size) const {
  const TensorMetadata& t = inputs_[index];
  const std::vector<int64_t> dims = ConcreteDims(t, batch_size);
  const size_t expected_bytes = static_cast<size_t>(NumElements(dims)) * DataTypeSize(t.datatype);
  if (desc.dtype() != t.datatype) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected datatype ",
                                                   DataTypeName(t.datatype), ", got ", DataTypeName(desc.dtype())));
  }
  if (desc.dims() != dims) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected shape ", DimsToString(dims),
                                                   ", got ", DimsToString(desc.dims())));
  }
  if (byte_size != expected_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", expected_bytes,
                                                   " bytes for shape ", DimsToString(dims), " ",
                                                   DataTypeName(t.datatype), ", got ", byte_size));
  }
  return absl::OkStatus();
}

absl::Status ModelInstance::Run(int batch_size, absl::Span<const TensorView> inputs,
                                absl::Span<const TensorView> outputs) {
  const ModelRuntime& m = *model_;
  const int max_batch = std::max(1, m.max_batch_size_);
  if (batch_size < 1 || batch_size > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name_, "': batch size ", batch_size,
                                                   " is outside [1, ", max_batch, "]"));
  }
  if (inputs.size() != m.inputs_.size() || outputs.size() != m.outputs_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("model '", m.name_, "': expected ", m.inputs_.size(),
                                                   " inputs and ", m.outputs_.size(), " outputs, got ",
                                                   inputs.size(), " and ", outputs.size()));
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(m.ValidateInput(i, batch_size, inputs[i].desc, inputs[i].desc.size_bytes()));
    plan_inputs_[m.input_plan_index_[i]] = inputs[i];  // UINT8 images too: the plan's first step normalizes them
  }
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorMetadata& t = m.outputs_[i];
    const std::vector<int64_t> dims = m.ConcreteDims(t, batch_size);
    if (outputs[i].desc.dims() != dims || outputs[i].desc.dtype() != t.datatype) {
      return absl::InvalidArgumentError(absl::StrCat("output '", t.name, "': expected ", DimsToString(dims), " ",
                                                     DataTypeName(t.datatype), ", got ",
                                                     DimsToString(outputs[i].desc.dims()), " ",
                                                     DataTypeName(outputs[i].desc.dtype())));
    }
    plan_outputs_[m.output_plan_index_[i]] = outputs[i];
  }
  return executor_->Run(batch_size, plan_inputs_, plan_outputs_);
}

}  // namespace convoy::runtime
