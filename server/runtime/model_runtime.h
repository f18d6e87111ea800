// The model runtime: what the server and the CLI load. From a model file (ONNX or Convoy YAML) and, optionally, its
// config.yaml, it imports and optimizes the graph, plans it for a device and precision, warms it up, and hands out
// instances that run batches.
//
//   ModelRuntimeOptions options;
//   options.model_path = "model_repo/resnet_classifier/1/model.onnx";
//   options.config = config;                 // from repository::ParseModelConfig; absent: metadata from the graph
//   options.device = &CpuDevice::Default();
//   CONVOY_ASSIGN_OR_RETURN(auto model, ModelRuntime::Create(options));
//   CONVOY_ASSIGN_OR_RETURN(auto instance, model->CreateInstance());
//   CONVOY_RETURN_IF_ERROR(instance->Run(batch_size, input_views, output_views));
//
// Inputs and outputs are host TensorViews in the order of inputs() / outputs(), in the declared datatypes:
// FP16/BF16 tensors are converted to and from the compute type inside the plan; a UINT8 [H, W, C] input with
// `preprocessing` in its config is normalized by a PreprocessOp step, the plan's first, on the model's device (on a GPU
// only the bytes travel) into the model's [N, C, H, W] input in the compute type and layout.
//
// Thread safety: ModelRuntime is immutable after Create and may be shared; each ModelInstance is thread-compatible
// (one Run at a time), and instances of one model run concurrently.
#ifndef CONVOY_SERVER_RUNTIME_MODEL_RUNTIME_H_
#define CONVOY_SERVER_RUNTIME_MODEL_RUNTIME_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/common/problems.h"
#include "kernels/common/tensor.h"
#include "kernels/registry/algorithm_cache.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/device.h"
#include "server/repository/model_config.h"
#include "server/runtime/calibrated_quantization.h"
#include "server/runtime/executor.h"
#include "server/runtime/graph.h"
#include "server/runtime/model_signature.h"
#include "server/runtime/plan.h"

namespace convoy::runtime {

// The layout a CPU plan runs in unless told otherwise (planner.h), by what oneDNN runs on the CPU and what the model
// has: NHWC where oneDNN has AVX-512 kernels (`avx512_kernels`: its brgconv and jit:avx512_core convolutions,
// depthwise included, take NHWC, while its blocked kernels stay AVX2), unless the model has grouped convolutions
// other than depthwise (`grouped_convs`: ResNeXt/RegNet-like groups, not measured in NHWC); blocked NCHW8c elsewhere
// (oneDNN's AVX2 convolutions and pooling keep activations in nChw8c between steps; AVX2-only CPUs measured faster
// blocked, depthwise models included). The measurements are in docs/performance.md.
Layout DefaultCpuLayout(bool avx512_kernels, bool grouped_convs);

// Whether `graph` has a grouped convolution that is not depthwise (more than one input channel per group): the
// `grouped_convs` of DefaultCpuLayout.
bool HasGroupedNonDepthwiseConv(const Graph& graph);

struct ModelRuntimeOptions {
  // model.onnx or a Convoy model.yaml. Required.
  std::string model_path;
  // The model's config.yaml. Absent: inputs and outputs come from the graph, batching up to
  // default_max_batch_size when the graph has a symbolic batch, precision and selection from the fields below.
  std::optional<repository::ModelConfig> config;
  int default_max_batch_size = 8;
  // Where it runs. Required; must outlive the runtime.
  Device* device = nullptr;
  // Overrides of the config's optimization section (the CLI's --precision, `convoy tune`).
  std::optional<Precision> precision;
  std::optional<AlgorithmSelection> selection;
  std::vector<int> tune_batch_sizes;  // empty: the config's, or every batch size
  // Override of the config's `cuda_graphs`: record a CUDA graph per batch size in each instance (see executor.h).
  std::optional<bool> cuda_graphs;
  // QDQ models and precision int8: run the convolutions between quantize-dequantize nodes in INT8
  // (PlannerOptions::int8_convolutions; default true). False simulates every quantization in FP32.
  std::optional<bool> int8_convolutions;
  // Override of the config's `int8_residual_add` (PlannerOptions::int8_single_rounding_adds; default exact).
  std::optional<bool> int8_single_rounding_adds;
  // Run each squeeze-and-excitation branch as one step where the device can (PlannerOptions::fuse_squeeze_excitation;
  // default true). False plans its nodes one by one (for comparisons).
  std::optional<bool> fuse_squeeze_excitation;
  // CPU plans: how many leading steps a batch of 2 or more runs one image at a time (image_by_image.h). Absent: chosen
  // per batch size from the tuned step times where the config's `image_by_image` is on (the default); 0: never; N:
  // the first N steps (at most the longest prefix that keeps images apart) at every batch size from 2.
  std::optional<int> image_by_image_steps;
  // Precision int8 on an FP32 model: the calibration table to read instead of the config's `calibration_table`
  // (default `calibration.yaml` beside the model file).
  std::optional<std::string> calibration_table;
  // Default: DefaultCpuLayout on the CPU, NHWC elsewhere (tensor-core kernels want it).
  std::optional<Layout> layout;
  TuningOptions tuning;
  AlgorithmCache* cache = nullptr;  // null: AlgorithmCache::Global()
  // Run the config's warmup (batch sizes x iterations) at load.
  bool warmup = true;
  // Receives the load log: each phase and its time, tuning choices, the memory plan. May be empty.
  std::function<void(const std::string&)> log;
};

struct LoadReport {
  double import_seconds = 0;  // import + optimization passes
  double plan_seconds = 0;    // planning, algorithm selection, tuning, weight upload
  double warmup_seconds = 0;
  size_t weight_bytes = 0;
  size_t arena_bytes = 0;      // per instance, for the largest batch
  size_t workspace_bytes = 0;  // per instance
  std::string optimize_stats;
};

class ModelInstance;

class ModelRuntime {
 public:
  static absl::StatusOr<std::unique_ptr<ModelRuntime>> Create(const ModelRuntimeOptions& options);

  const std::string& name() const { return name_; }
  const std::vector<TensorMetadata>& inputs() const { return inputs_; }
  const std::vector<TensorMetadata>& outputs() const { return outputs_; }
  // 0 when the model does not batch (its inputs carry no batch dimension); Run then takes batch_size 1.
  int max_batch_size() const { return max_batch_size_; }
  // name, max_batch_size, inputs and outputs together (what the request decoder checks requests against).
  ModelSignature signature() const { return {name_, max_batch_size_, inputs_, outputs_}; }
  const Graph& graph() const { return graph_; }
  const ExecutionPlan& plan() const { return *plan_; }
  const LoadReport& load_report() const { return report_; }
  // Precision int8: each convolution and residual add, INT8 with its scales or FP32 with the reason (empty for
  // other precisions).
  const std::vector<LayerOutcome>& int8_layers() const { return int8_layers_; }

  // How many leading steps a batch of `batch_size` runs one image at a time (0: the batch as a whole).
  int image_by_image_steps(int batch_size) const {
    return batch_size >= 0 && batch_size < static_cast<int>(image_by_image_steps_.size())
               ? image_by_image_steps_[batch_size]
               : 0;
  }

  // Whether instances record a CUDA graph per batch size (asked for, and the device can record).
  bool records_graphs() const { return records_graphs_; }
  // A new instance with its own arena, workspace and device queue (its own CUDA stream). Without `image_by_image`
  // it runs every batch as a whole (for comparisons).
  absl::StatusOr<std::unique_ptr<ModelInstance>> CreateInstance(bool image_by_image = true) const;
  // Runs the config's warm-up (batch sizes x iterations, constant inputs) on `instance`: with CUDA graphs this
  // records the instance's graphs for those batch sizes before it serves. No-op without a warmup section.
  absl::Status WarmUp(ModelInstance& instance) const;

  // OK, or INVALID_ARGUMENT naming the tensor and the expected vs actual shape, datatype or byte size. `byte_size`
  // is the size of the buffer the caller holds (for raw payloads), checked against the shape.
  absl::Status ValidateInput(size_t index, int batch_size, const TensorDesc& desc, size_t byte_size) const;

 private:
  friend class ModelInstance;
  ModelRuntime() = default;
  absl::Status ImportGraph(const ModelRuntimeOptions& options);
  absl::Status QuantizeGraph(const ModelRuntimeOptions& options);
  absl::Status Plan(const ModelRuntimeOptions& options);
  absl::Status ChooseImageByImage(const ModelRuntimeOptions& options);
  absl::Status Warmup(const ModelRuntimeOptions& options);
  std::vector<int64_t> ConcreteDims(const TensorMetadata& t, int batch_size) const;

  std::string name_;
  std::optional<repository::ModelConfig> config_;
  std::vector<TensorMetadata> inputs_;
  std::vector<TensorMetadata> outputs_;
  std::vector<std::optional<PreprocessProblem>> preprocessing_;  // per input, batch size left at 1
  std::vector<int> input_plan_index_;                             // inputs_[i] is plan input input_plan_index_[i]
  std::vector<int> output_plan_index_;                            // outputs_[i] is plan output output_plan_index_[i]
  int max_batch_size_ = 0;
  bool records_graphs_ = false;
  Graph graph_;
  std::vector<LayerOutcome> int8_layers_;
  std::shared_ptr<const ExecutionPlan> plan_;
  std::vector<int> image_by_image_steps_;  // per batch size; empty: none
  LoadReport report_;
};

class ModelInstance {
 public:
  // Runs one batch. Views follow inputs() / outputs() order with dims [batch_size, dims...] (or dims when the model
  // does not batch) in the declared datatypes.
  absl::Status Run(int batch_size, absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs);
  Executor& executor() { return *executor_; }

 private:
  friend class ModelRuntime;
  ModelInstance(const ModelRuntime* model, std::unique_ptr<Executor> executor)
      : model_(model), executor_(std::move(executor)) {}

  const ModelRuntime* model_;
  std::unique_ptr<Executor> executor_;
  std::vector<TensorView> plan_inputs_;
  std::vector<TensorView> plan_outputs_;
};

}  // namespace convoy::runtime

#endif  // CONVOY_SERVER_RUNTIME_MODEL_RUNTIME_H_
