// `convoy calibrate`'s engine; see model_calibration.h.
#include "server/tools/model_calibration.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/onednn_support.h"
#include "server/imaging/image_decoder.h"
#include "server/imaging/image_resize.h"
#include "server/repository/model_loader.h"
#include "server/runtime/calibrated_quantization.h"
#include "server/runtime/executor.h"
#include "server/runtime/model_runtime.h"
#include "server/runtime/planner.h"
#include "server/tools/npy.h"

namespace convoy::tools {
namespace {

using runtime::CalibrationTable;
using runtime::Graph;
using runtime::Shape;

// The config entry of the model's one input, if there is a config.
const repository::TensorConfig* InputConfig(const ModelCalibrationOptions& options, const std::string& name) {
  if (!options.config) return nullptr;
  for (const auto& input : options.config->inputs) {
    if (input.name == name) return &input;
  }
  return nullptr;
}

// Normalizes UINT8 pixels [H, W, C] into the float [C, H, W] sample as the input's `preprocessing` says.
void Normalize(const uint8_t* pixels, int h, int w, int c, const repository::ImagePreprocessing& p, float* out) {
  for (int ch = 0; ch < c; ++ch) {
    for (int i = 0; i < h * w; ++i) {
      out[static_cast<size_t>(ch) * h * w + i] = (pixels[static_cast<size_t>(i) * c + ch] * p.scale - p.mean[ch]) /
                                                 p.std[ch];
    }
  }
}

// Every calibration sample as the graph's float input [C, H, W] (one vector of `sample_size` floats each).
class SampleSource {
 public:
  SampleSource(const ModelCalibrationOptions& options, const std::string& input, const Shape& sample_shape)
      : options_(options), input_(input), shape_(sample_shape), config_(InputConfig(options, input)) {}

  absl::Status Load(std::vector<std::vector<float>>& samples) const {
    if (!options_.images.empty() && !options_.npy_files.empty()) {
      return absl::InvalidArgumentError("give --images or --inputs, not both");
    }
    if (options_.images.empty() && options_.npy_files.empty()) {
      return absl::InvalidArgumentError("no calibration inputs: give --images=DIR or --inputs=X.npy");
    }
    for (const std::string& path : options_.images) CONVOY_RETURN_IF_ERROR(LoadPhoto(path, samples));
    for (const std::string& path : options_.npy_files) CONVOY_RETURN_IF_ERROR(LoadNpy(path, samples));
    return absl::OkStatus();
  }

 private:
  int64_t SampleSize() const { return runtime::NumElements(shape_); }

  absl::Status LoadPhoto(const std::string& path, std::vector<std::vector<float>>& samples) const {
    if (config_ == nullptr || !config_->preprocessing || config_->dims.size() != 3) {
      return absl::InvalidArgumentError(absl::StrCat(
          "photos need a model folder whose config.yaml gives input '", input_, "' as a UINT8 [H, W, 3] image with "
          "`preprocessing` (how the server turns pixels into the model's input); give --inputs=X.npy otherwise"));
    }
    std::ifstream file(path, std::ios::binary);
    if (!file) return absl::NotFoundError(absl::StrCat("cannot open ", path));
    const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
    absl::StatusOr<imaging::RgbImage> image = imaging::DecodeImage(bytes);
    if (!image.ok()) return absl::Status(image.status().code(), absl::StrCat(path, ": ", image.status().message()));
    const int h = static_cast<int>(config_->dims[0]), w = static_cast<int>(config_->dims[1]);
    const double crop = config_->encoded_image ? config_->encoded_image->crop_fraction : 0.875;
    std::vector<uint8_t> pixels(static_cast<size_t>(h) * w * 3);
    CONVOY_RETURN_IF_ERROR(imaging::CenterCropAndResize(*image, h, w, crop, pixels.data()));
    samples.emplace_back(SampleSize());
    Normalize(pixels.data(), h, w, 3, *config_->preprocessing, samples.back().data());
    return absl::OkStatus();
  }

  absl::Status LoadNpy(const std::string& path, std::vector<std::vector<float>>& samples) const {
    CONVOY_ASSIGN_OR_RETURN(NpyArray array, ReadNpyFile(path));
    const bool pixels = array.dtype == DataType::kUInt8;
    if (pixels && (config_ == nullptr || !config_->preprocessing)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": UINT8 pixels need a config.yaml whose input '", input_,
                                                     "' has `preprocessing`; give the model's float input instead"));
    }
    // Expected per sample: [C, H, W] floats, or [H, W, C] pixels.
    Shape expected = shape_;
    if (pixels) expected = {shape_[1], shape_[2], shape_[0]};
    const Shape got(array.shape.begin() + std::min<size_t>(1, array.shape.size()), array.shape.end());
    if (array.shape.size() != expected.size() + 1 || got != expected ||
        (!pixels && array.dtype != DataType::kFloat32)) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": expected ", pixels ? "UINT8 [N," : "FLOAT32 [N,",
          runtime::ShapeToString(expected).substr(1), " samples of input '", input_, "', got ",
          DataTypeName(array.dtype), " ", DimsToString(array.shape)));
    }
    const int64_t size = SampleSize();
    for (int64_t n = 0; n < array.shape[0]; ++n) {
      samples.emplace_back(size);
      if (pixels) {
        Normalize(array.data.data() + n * size, static_cast<int>(shape_[1]), static_cast<int>(shape_[2]),
                  static_cast<int>(shape_[0]), *config_->preprocessing, samples.back().data());
      } else {
        std::memcpy(samples.back().data(), array.data.data() + n * size * sizeof(float), size * sizeof(float));
      }
    }
    return absl::OkStatus();
  }

  const ModelCalibrationOptions& options_;
  const std::string input_;
  const Shape shape_;
  const repository::TensorConfig* config_;
};

// The imported, optimized graph with residual adds separated; input shapes from the config as the server sets them.
absl::StatusOr<Graph> LoadCalibrationGraph(const ModelCalibrationOptions& options) {
  repository::LoadGraphOptions load;
  if (options.config) {
    const bool batching = options.config->max_batch_size > 0;
    for (const auto& input : options.config->inputs) {
      Shape dims = input.dims;
      if (input.preprocessing) dims = {input.dims[2], input.dims[0], input.dims[1]};
      if (batching) dims.insert(dims.begin(), runtime::kBatch);
      load.input_shapes[input.name] = dims;
    }
  }
  CONVOY_ASSIGN_OR_RETURN(repository::LoadedGraph loaded, repository::LoadGraphFile(options.model_path, load));
  Graph graph = std::move(loaded.graph);
  if (runtime::HasQuantizeDequantize(graph)) {
    return absl::FailedPreconditionError(absl::StrCat(
        options.model_path, " is already quantized (it has QuantizeLinear / DequantizeLinear nodes): `precision: "
        "int8` uses its own scales and needs no calibration table"));
  }
  if (graph.inputs().size() != 1) {
    return absl::UnimplementedError(absl::StrCat("calibration takes models with one input; ", options.model_path,
                                                 " has ", graph.inputs().size()));
  }
  CONVOY_RETURN_IF_ERROR(runtime::SeparateResidualAdds(graph).status());
  return graph;
}

}  // namespace

absl::StatusOr<CalibrationTable> CalibrateModel(const ModelCalibrationOptions& options) {
  if (options.device == nullptr) return absl::InvalidArgumentError("ModelCalibrationOptions.device is required");
  if (options.batch_size < 1) return absl::InvalidArgumentError("the calibration batch size must be >= 1");
  auto log = [&options](const std::string& line) {
    if (options.log) options.log(line);
  };
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  CONVOY_ASSIGN_OR_RETURN(Graph graph, LoadCalibrationGraph(options));
  const runtime::GraphInput input = graph.inputs()[0];
  const bool batched = !input.shape.empty() && input.shape[0] == runtime::kBatch;
  if (input.shape.size() != 4) {
    return absl::UnimplementedError(absl::StrCat("calibration takes an image input [N, C, H, W]; input '", input.name,
                                                 "' is ", runtime::ShapeToString(input.shape)));
  }
  const Shape sample_shape(input.shape.begin() + 1, input.shape.end());
  std::vector<std::vector<float>> samples;
  CONVOY_RETURN_IF_ERROR(SampleSource(options, input.name, sample_shape).Load(samples));
  if (samples.empty()) return absl::InvalidArgumentError("the calibration inputs hold no sample");

  // Every tensor to measure becomes a graph output (the graph input is measured on the host).
  runtime::CalibrationTargets targets = runtime::FindCalibrationTargets(graph);
  std::set<std::string> keep(options.keep_fp32.begin(), options.keep_fp32.end());
  for (const std::string& name : keep) {
    if (std::none_of(targets.layers.begin(), targets.layers.end(),
                     [&](const runtime::LayerCalibration& l) { return l.name == name; })) {
      return absl::InvalidArgumentError(absl::StrCat("--keep_fp32: '", name, "' is not a convolution, residual add, "
                                                     "classifier pool or Gemm of the model (names as the table's `layers` "
                                                     "lists them)"));
    }
  }
  std::vector<int> output_of(targets.tensors.size(), -1);  // plan output index, -1 for the graph input
  for (size_t i = 0; i < targets.tensors.size(); ++i) {
    const std::string& t = targets.tensors[i];
    if (t == input.name) continue;
    if (!graph.IsGraphOutput(t)) CONVOY_RETURN_IF_ERROR(graph.AddOutput(t));
    output_of[i] = static_cast<int>(std::find(graph.outputs().begin(), graph.outputs().end(), t) -
                                    graph.outputs().begin());
  }
  CONVOY_RETURN_IF_ERROR(graph.Finalize());
  const int batch = batched ? std::min<int>(options.batch_size, static_cast<int>(samples.size())) : 1;
  runtime::PlannerOptions planner;
  planner.device = options.device;
  planner.max_batch_size = batch;
  bool grouped = false;
  for (const runtime::Node& n : graph.nodes()) {
    grouped |= n.op() == runtime::OpKind::kConv2d && n.As<runtime::Conv2dAttrs>().groups > 1;
  }
  planner.layout = options.device->backend() == Backend::kCpu
                       ? runtime::DefaultCpuLayout(cpu::onednn::HasAvx512Kernels(), grouped)
                       : Layout::kNHWC;
  CONVOY_ASSIGN_OR_RETURN(std::shared_ptr<const runtime::ExecutionPlan> plan,
                          runtime::BuildExecutionPlan(graph, planner));
  CONVOY_ASSIGN_OR_RETURN(auto executor, runtime::Executor::Create({plan}));
  log(absl::StrFormat("calibrate: %s planned in %.1f s; %d samples, %d tensors of %d layers to measure, method %s",
                      options.model_path, seconds(), samples.size(), targets.tensors.size(), targets.layers.size(),
                      runtime::CalibrationMethodName(options.method)));

  std::vector<runtime::TensorStatistics> stats(targets.tensors.size());
  std::vector<std::vector<float>> outputs(graph.outputs().size());
  std::vector<float> x;
  double last_report = seconds();
  for (size_t done = 0; done < samples.size();) {
    const int b = static_cast<int>(std::min<size_t>(batch, samples.size() - done));
    const int64_t per_sample = runtime::NumElements(sample_shape);
    x.resize(b * per_sample);
    for (int i = 0; i < b; ++i) std::copy(samples[done + i].begin(), samples[done + i].end(), x.begin() + i * per_sample);
    std::vector<TensorView> ins = {{executor->ExpectedInputDesc(0, b), x.data()}};
    std::vector<TensorView> outs;
    for (size_t o = 0; o < outputs.size(); ++o) {
      const TensorDesc desc = executor->ExpectedOutputDesc(o, b);
      outputs[o].resize(desc.num_elements());
      outs.push_back({desc, outputs[o].data()});
    }
    CONVOY_RETURN_IF_ERROR(executor->Run(b, ins, outs));
    for (size_t i = 0; i < stats.size(); ++i) {
      const std::vector<float>& values = output_of[i] < 0 ? x : outputs[output_of[i]];
      stats[i].Add(values.data(), static_cast<int64_t>(values.size()));
    }
    done += b;
    if (seconds() - last_report >= 5 || done == samples.size()) {
      last_report = seconds();
      log(absl::StrFormat("calibrate: %d of %d samples in %.1f s", done, samples.size(), last_report));
    }
  }

  CalibrationTable table;
  table.model = options.model_path.substr(options.model_path.find_last_of('/') + 1);
  table.method = options.method;
  table.percentile = options.percentile;
  table.signed_activations = options.signed_activations;
  table.samples = static_cast<int64_t>(samples.size());
  for (size_t i = 0; i < stats.size(); ++i) {
    const std::string& name = targets.tensors[i];
    if (stats[i].non_finite() > 0) {
      log(absl::StrCat("calibrate: warning: tensor '", name, "' had ", stats[i].non_finite(),
                       " non-finite values (ignored)"));
    }
    auto range = runtime::ChooseRange(stats[i], options.method, options.percentile, options.signed_activations);
    if (!range.ok()) return absl::Status(range.status().code(), absl::StrCat("tensor '", name, "': ", range.status().message()));
    runtime::TensorQuantization q = runtime::QuantizeRange(*range, options.signed_activations);
    q.name = name;
    q.min = stats[i].min(), q.max = stats[i].max();
    table.tensors.push_back(q);
  }
  int raised_scales = 0, raised_layers = 0;
  for (runtime::LayerCalibration layer : targets.layers) {
    if (keep.count(layer.name)) layer.int8 = false, layer.reason = "kept FP32 by --keep_fp32";
    if (layer.has_weights() && layer.int8) {
      const runtime::Node* node = nullptr;
      for (const runtime::Node& n : graph.nodes()) {
        if (n.name == layer.name) node = &n;
      }
      layer.weight_scales = runtime::LayerWeightScales(graph, *node);
      const int raised = runtime::FitBiasInInt32(graph, *node, table.FindTensor(node->inputs[0])->scale,
                                                 layer.weight_scales);
      raised_scales += raised;
      raised_layers += raised > 0;
    }
    table.layers.push_back(std::move(layer));
  }
  if (raised_scales > 0) {
    log(absl::StrFormat("calibrate: %d weight scales of %d layers raised so their bias fits INT32 (output "
                        "channels whose weights are all near zero)", raised_scales, raised_layers));
  }
  log(absl::StrFormat("calibrate: %d samples, %d tensors, %d layers in %.1f s", samples.size(), table.tensors.size(),
                      table.layers.size(), seconds()));
  return table;
}

}  // namespace convoy::tools
