// The `convoy` command-line tool: run a model on .npy files, inspect its optimized graph and plan, and tune and
// export the algorithm cache.
//
//   convoy run --model=model.onnx --input=x.npy --output=y.npy [--precision=fp16] [--device=cpu] [--repeat=20]
//   convoy run --engine=reference --model=model.onnx --input=x.npy --output_dir=out/ [--optimize=false]
//   convoy inspect --model=model_repo/resnet_classifier [--tune] [--profile_batch=1] [--profile_runs=1]
//   convoy inspect --engine=reference --model=model.onnx [--optimize=false]
//   convoy tune --model=model.onnx --batch_sizes=1,8 --cache=out.cache
//   convoy calibrate --model=model_repo/efficientnet_lite0 --images=photos/ --method=entropy   # calibration.yaml
//   convoy algorithms
//   convoy jobs < lines        # one command per stdin line (tab-separated arguments), answered "job ok" or
//                              # "job error: MESSAGE" each: test suites pay the process start-up once
//
// --model takes a model.onnx, a Convoy model.yaml, or a repository entry folder (config.yaml plus numbered version
// folders; the newest version is used). Diagnostics go to stderr; results and reports to stdout.
//
// --engine=reference evaluates the imported (and, unless --optimize=false, optimized) graph with the FP32 reference
// interpreter instead of planning it on a device: the path the Python tests compare with onnxruntime op by op.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "kernels/common/status_macros.h"
#include "kernels/cpu/cpu_device.h"
#include "kernels/registry/autotuner.h"
#include "kernels/registry/registry.h"
#include "server/imaging/image_decoder.h"
#include "server/imaging/image_resize.h"
#include "server/repository/calibration_table.h"
#include "server/repository/model_loader.h"
#include "server/repository/model_repository.h"
#include "server/runtime/model_runtime.h"
#include "server/runtime/reference_interpreter.h"
#include "server/tools/model_calibration.h"
#include "server/tools/npy.h"
#ifdef CONVOY_CLI_WITH_CUDA
#include "kernels/cuda/cuda_device.h"
#endif

namespace convoy::tools {
namespace {

using runtime::ModelInstance;
using runtime::ModelRuntime;
using runtime::ModelRuntimeOptions;

constexpr char kUsage[] = R"(usage:
  convoy run --model=PATH --input=[NAME=]X.npy ... (--output=[NAME=]Y.npy ... | --output_dir=DIR) [--repeat=N] [options]
  convoy inspect --model=PATH [--tune] [--profile_batch=N] [--profile_runs=R] [--profile_statistic=median|min] [options]
  convoy run|inspect --engine=reference --model=PATH [--optimize=false] ...   (FP32 reference interpreter)
  convoy tune --model=PATH --batch_sizes=1,8 --cache=OUT.cache [options]
  convoy calibrate --model=PATH (--images=DIR|PHOTO,... | --inputs=X.npy[,Y.npy]) [--method=minmax|percentile|entropy]
      [--percentile=99.99] [--activations=uint8|int8] [--keep_fp32=LAYER,...] [--batch_size=8] [--output=FILE]
      runs the FP32 model on the calibration inputs (photos prepared as the server prepares an encoded-image input
      of the model; .npy: the model's float input [N,C,H,W] or UINT8 pixels [N,H,W,C]) and writes the calibration
      table `precision: int8` reads (default: calibration.yaml beside the model file; default method minmax)
  convoy algorithms
  convoy image --image=PHOTO.jpg|png --height=H --width=W [--crop_fraction=0.875] --output=X.npy
      decodes a photo as the server does for an encoded-image input (upright by its EXIF orientation, the centred
      box of the input's aspect ratio keeping crop_fraction of the shorter side, bicubic resize) and writes the
      UINT8 [1, H, W, 3] pixels the model would get
PATH: model.onnx, model.yaml, or a model repository folder (config.yaml + version folders).
options: --device=cpu|cuda|auto  --precision=fp32|fp16|bf16|tf32|int8|auto  --layout=nchw|nhwc|nchw8c
         --max_batch_size=N (model files without a config; default 8)  --cache=FILE (algorithm cache to load)
         --threads=N (CPU threads)  --quiet (no load log)
         --cuda_graphs[=true|false] (on a GPU: record a CUDA graph per batch size; default: the config's)
         --int8=true|false (QDQ models: convolutions between quantize-dequantize steps run INT8; default true)
         --verify_algorithms=true|false (on a GPU: check each chosen conv/GEMM algorithm's output once before use;
             default true, or the config's false)
         --int8_residual_add=exact|single_rounding (a residual add fused into an INT8 convolution: rounded as the
             QDQ graph does, or once at the end, faster and within one quantization step; default: the config's)
         --fuse_squeeze_excitation=true|false (each squeeze-and-excitation branch as one step where the device has
             an algorithm for it, the CPU in FP32; default true)
         --image_by_image=auto|off|N (CPU, batches of 2 or more: run the first layers one image at a time; auto:
             where the step times measured at load say it pays, for tuned batch sizes (the default, or the config's
             off); N: the first N steps; convoy run only: compare or compare:N times the batch both ways, alternating)
         --calibration_table=FILE (--precision=int8 on an FP32 model; default: the config's, or calibration.yaml
           beside the model file)
--output_dir=DIR writes output i to DIR/i.npy, in the model's output order (DIR is created if missing).
--repeat=N times N more runs after the first (warm-up) one and prints their median and fastest wall time.
--profile_runs=R (inspect) times each step in R runs after the warm-up run and prints each step's median.
--profile_statistic=median|min (inspect) each step's median (default) or its fastest of the R runs.
  convoy jobs              one command per stdin line (tab-separated arguments), each answered "job ok" or
                           "job error: MESSAGE" on stdout
)";

// --key=value flags; repeated keys keep every value in order.
struct Flags {
  std::multimap<std::string, std::string> values;
  std::string Get(const std::string& key, const std::string& fallback = "") const {
    auto it = values.find(key);
    return it == values.end() ? fallback : it->second;
  }
  std::vector<std::string> All(const std::string& key) const {
    std::vector<std::string> out;
    for (auto [it, end] = values.equal_range(key); it != end; ++it) out.push_back(it->second);
    return out;
  }
  bool Has(const std::string& key) const { return values.count(key) > 0; }
};

absl::StatusOr<Flags> ParseFlags(int argc, char** argv, const std::vector<std::string>& known) {
  Flags flags;
  for (int i = 2; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (!absl::ConsumePrefix(&arg, "--")) return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    const size_t eq = arg.find('=');
    const std::string key(arg.substr(0, eq));
    if (std::find(known.begin(), known.end(), key) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", key));
    }
    flags.values.emplace(key, eq == absl::string_view::npos ? "true" : std::string(arg.substr(eq + 1)));
  }
  return flags;
}

absl::StatusOr<int> ParsePositive(const std::string& flag, const std::string& text) {
  int value = 0;
  if (!absl::SimpleAtoi(text, &value) || value < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " must be a positive integer, got '", text, "'"));
  }
  return value;
}

// The device named by --device: `auto` is the first GPU when this binary has the CUDA backend and one is visible,
// else the CPU.
absl::StatusOr<Device*> SelectDevice(const Flags& flags) {
  const std::string name = flags.Get("device", "auto");
  if (name != "cpu" && name != "auto" && name != "cuda") {
    return absl::InvalidArgumentError(absl::StrCat("--device must be cpu, cuda or auto, got '", name, "'"));
  }
#ifdef CONVOY_CLI_WITH_CUDA
  if (name != "cpu") {
    static std::unique_ptr<cuda::CudaDevice> gpu;
    absl::StatusOr<std::unique_ptr<cuda::CudaDevice>> created = cuda::CudaDevice::Create({});
    if (created.ok()) {
      gpu = std::move(*created);
      std::cerr << "device: " << gpu->Identity() << "\n";
      return gpu.get();
    }
    if (name == "cuda") return absl::UnavailableError(absl::StrCat("--device=cuda: ", created.status().message()));
  }
#else
  if (name == "cuda") {
    return absl::UnavailableError("--device=cuda: this convoy binary was built without the CUDA backend");
  }
#endif
  static std::unique_ptr<CpuDevice> device;
  CpuDevice::Options options;
  if (flags.Has("threads")) {
    CONVOY_ASSIGN_OR_RETURN(options.num_threads, ParsePositive("threads", flags.Get("threads")));
  }
  CONVOY_ASSIGN_OR_RETURN(device, CpuDevice::Create(options));
  return device.get();
}

// Resolves --model to a model file (and, for a repository folder, its config) in `options`.
absl::Status ResolveModel(const Flags& flags, ModelRuntimeOptions& options) {
  const std::string model = flags.Get("model");
  if (model.empty()) return absl::InvalidArgumentError("--model is required");
  if (absl::EndsWith(model, ".onnx") || absl::EndsWith(model, ".yaml") || absl::EndsWith(model, ".yml")) {
    options.model_path = model;
    return absl::OkStatus();
  }
  repository::ScannedModel scanned = repository::ScanModelDirectory(model);
  if (!scanned.status.ok()) return scanned.status;
  if (scanned.versions.empty()) return absl::NotFoundError(absl::StrCat("model folder '", model, "' has no version"));
  options.model_path = scanned.versions.back().model_path;
  options.config = scanned.config;
  return absl::OkStatus();
}

// A two-way flag: absent (nullopt), `on` (true) or `off` (false); anything else is INVALID_ARGUMENT naming both.
absl::StatusOr<std::optional<bool>> ParseChoice(const Flags& flags, const std::string& name, const std::string& on,
                                                const std::string& off) {
  if (!flags.Has(name)) return std::optional<bool>();
  const std::string value = flags.Get(name);
  if (value != on && value != off) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be ", on, " or ", off, ", got '", value, "'"));
  }
  return std::optional<bool>(value == on);
}

// Fills the runtime options every subcommand shares from --model, --precision, --layout, --max_batch_size, --cache.
absl::StatusOr<ModelRuntimeOptions> CommonOptions(const Flags& flags) {
  ModelRuntimeOptions options;
  CONVOY_RETURN_IF_ERROR(ResolveModel(flags, options));
  CONVOY_ASSIGN_OR_RETURN(options.device, SelectDevice(flags));
  if (flags.Has("precision")) {
    CONVOY_ASSIGN_OR_RETURN(options.precision, runtime::ParsePrecision(flags.Get("precision")));
  }
  if (flags.Has("layout")) {
    const std::string layout = absl::AsciiStrToUpper(flags.Get("layout"));
    CONVOY_ASSIGN_OR_RETURN(options.layout, ParseLayout(layout));
  }
  CONVOY_ASSIGN_OR_RETURN(options.cuda_graphs, ParseChoice(flags, "cuda_graphs", "true", "false"));
  CONVOY_ASSIGN_OR_RETURN(options.int8_convolutions, ParseChoice(flags, "int8", "true", "false"));
  CONVOY_ASSIGN_OR_RETURN(const std::optional<bool> verify, ParseChoice(flags, "verify_algorithms", "true", "false"));
  if (verify.has_value()) options.tuning.verification.enabled = *verify;
  CONVOY_ASSIGN_OR_RETURN(const std::optional<bool> exact_adds,
                          ParseChoice(flags, "int8_residual_add", "exact", "single_rounding"));
  if (exact_adds.has_value()) options.int8_single_rounding_adds = !*exact_adds;
  CONVOY_ASSIGN_OR_RETURN(options.fuse_squeeze_excitation,
                          ParseChoice(flags, "fuse_squeeze_excitation", "true", "false"));
  if (flags.Has("image_by_image")) {
    // auto, off, N, or (convoy run) compare / compare:N.
    std::string value = flags.Get("image_by_image");
    if (absl::StartsWith(value, "compare")) {
      value = std::string(absl::StripPrefix(absl::StripPrefix(value, "compare"), ":"));
    }
    if (value == "off") {
      options.image_by_image_steps = 0;
    } else if (value != "auto" && !value.empty()) {
      CONVOY_ASSIGN_OR_RETURN(options.image_by_image_steps, ParsePositive("image_by_image", value));
    }
  }
  if (flags.Has("max_batch_size")) {
    CONVOY_ASSIGN_OR_RETURN(options.default_max_batch_size, ParsePositive("max_batch_size", flags.Get("max_batch_size")));
  }
  if (flags.Has("calibration_table")) options.calibration_table = flags.Get("calibration_table");
  if (flags.Has("cache")) {
    auto loaded = AlgorithmCache::Global().Load(flags.Get("cache"));
    if (loaded.ok()) {
      std::cerr << "loaded " << *loaded << " algorithm cache entries from " << flags.Get("cache") << "\n";
    } else if (!absl::IsNotFound(loaded.status())) {
      std::cerr << "warning: ignoring algorithm cache: " << loaded.status().message() << "\n";
    }
  }
  if (!flags.Has("quiet")) options.log = [](const std::string& line) { std::cerr << line << "\n"; };
  return options;
}

std::vector<std::string> Names(const std::vector<runtime::TensorMetadata>& tensors) {
  std::vector<std::string> names;
  for (const auto& t : tensors) names.push_back(t.name);
  return names;
}

// Matches --input/--output values ("NAME=PATH" or just "PATH", taken in order) to the model's tensor names.
absl::StatusOr<std::vector<std::string>> AssignPaths(const std::vector<std::string>& values,
                                                     const std::vector<std::string>& tensors, const char* flag) {
  std::vector<std::string> paths(tensors.size());
  size_t next = 0;
  for (const std::string& value : values) {
    const size_t eq = value.find('=');
    size_t index = next++;
    std::string path = value;
    if (eq != std::string::npos) {
      const std::string name = value.substr(0, eq);
      path = value.substr(eq + 1);
      index = std::find(tensors.begin(), tensors.end(), name) - tensors.begin();
      if (index == tensors.size()) return absl::InvalidArgumentError(absl::StrCat("--", flag, ": no tensor '", name, "'"));
    }
    if (index >= tensors.size()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": more values than the model's ", tensors.size(),
                                                     " tensors"));
    }
    paths[index] = path;
  }
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, " missing for tensor '", tensors[i], "'"));
    }
  }
  return paths;
}

// The output files: --output values matched to `outputs`, or DIR/<index>.npy for every output with --output_dir
// (DIR is created if it does not exist).
absl::StatusOr<std::vector<std::string>> OutputPaths(const Flags& flags, const std::vector<std::string>& outputs) {
  if (!flags.Has("output_dir")) return AssignPaths(flags.All("output"), outputs, "output");
  if (flags.Has("output")) return absl::InvalidArgumentError("give --output or --output_dir, not both");
  const std::string dir = flags.Get("output_dir");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) return absl::InvalidArgumentError(absl::StrCat("--output_dir=", dir, ": ", error.message()));
  std::vector<std::string> paths;
  for (size_t i = 0; i < outputs.size(); ++i) paths.push_back(absl::StrCat(dir, "/", i, ".npy"));
  return paths;
}

// Converts a float .npy array to the model's declared float datatype (FP32 files feed FP16/BF16 inputs directly).
void ConvertFloatArray(NpyArray& array, DataType target) {
  if (array.dtype == target || !IsFloatingPoint(array.dtype) || !IsFloatingPoint(target)) return;
  const size_t count = array.data.size() / DataTypeSize(array.dtype);
  std::vector<uint8_t> converted(count * DataTypeSize(target));
  for (size_t i = 0; i < count; ++i) StoreFromFloat(converted.data(), target, i, LoadAsFloat(array.data.data(), array.dtype, i));
  array.data = std::move(converted);
  array.dtype = target;
}

// --image_by_image=compare: `instance` runs the batch's first layers image by image as the model chose; a second
// instance runs it as a whole. The two alternate run by run (the host's drift hits both alike); prints both medians,
// the median of the per-pair ratios and the largest difference between their outputs.
absl::Status CompareImageByImage(const ModelRuntime& model, ModelInstance& instance, int batch, int repeat,
                                 absl::Span<const TensorView> inputs, absl::Span<const TensorView> outputs) {
  const int steps = model.image_by_image_steps(batch);
  if (steps == 0) {
    std::cout << "batch " << batch << " runs as a whole (no image-by-image prefix chosen): nothing to compare\n";
    return absl::OkStatus();
  }
  CONVOY_ASSIGN_OR_RETURN(auto whole, model.CreateInstance(/*image_by_image=*/false));
  std::vector<std::vector<uint8_t>> reference;
  std::vector<TensorView> reference_views;
  for (const TensorView& out : outputs) {
    reference.emplace_back(out.desc.size_bytes());
    reference_views.push_back({out.desc, reference.back().data()});
  }
  CONVOY_RETURN_IF_ERROR(whole->Run(batch, inputs, reference_views));
  double largest_difference = 0;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!IsFloatingPoint(outputs[i].desc.dtype())) continue;
    for (int64_t e = 0; e < outputs[i].desc.num_elements(); ++e) {
      largest_difference = std::max<double>(
          largest_difference, std::abs(LoadAsFloat(outputs[i].data, outputs[i].desc.dtype(), e) -
                                       LoadAsFloat(reference_views[i].data, outputs[i].desc.dtype(), e)));
    }
  }
  std::vector<double> split_ms, whole_ms, ratios;
  for (int r = 0; r < repeat; ++r) {
    for (int which = 0; which < 2; ++which) {
      const bool split_first = r % 2 == 0;
      const bool split = (which == 0) == split_first;
      const auto start = std::chrono::steady_clock::now();
      CONVOY_RETURN_IF_ERROR(split ? instance.Run(batch, inputs, outputs) : whole->Run(batch, inputs, reference_views));
      (split ? split_ms : whole_ms)
          .push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    ratios.push_back(split_ms.back() / whole_ms.back());
  }
  const int faster = static_cast<int>(std::count_if(ratios.begin(), ratios.end(), [](double x) { return x < 1; }));
  std::cout << absl::StrFormat("batch %d, %d alternating runs each: the first %d steps image by image %.3f ms, the "
                               "batch as a whole %.3f ms (medians); ratio %.3f (median of the pairs; image by image "
                               "faster in %d of %d); largest output difference %.3g\n",
                               batch, repeat, steps, autotuner_internal::Median(split_ms),
                               autotuner_internal::Median(whole_ms), autotuner_internal::Median(ratios), faster, repeat,
                               largest_difference);
  return absl::OkStatus();
}

absl::Status RunCommand(const Flags& flags) {
  CONVOY_ASSIGN_OR_RETURN(ModelRuntimeOptions options, CommonOptions(flags));
  CONVOY_ASSIGN_OR_RETURN(auto model, ModelRuntime::Create(options));
  CONVOY_ASSIGN_OR_RETURN(auto input_paths, AssignPaths(flags.All("input"), Names(model->inputs()), "input"));
  CONVOY_ASSIGN_OR_RETURN(auto output_paths, OutputPaths(flags, Names(model->outputs())));
  std::vector<NpyArray> arrays;
  std::vector<TensorView> inputs;
  for (size_t i = 0; i < input_paths.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(NpyArray array, ReadNpyFile(input_paths[i]));
    ConvertFloatArray(array, model->inputs()[i].datatype);
    arrays.push_back(std::move(array));
  }
  const int batch = model->max_batch_size() > 0 && !arrays[0].shape.empty() ? static_cast<int>(arrays[0].shape[0]) : 1;
  for (NpyArray& array : arrays) inputs.push_back({TensorDesc(array.dtype, array.shape), array.data.data()});
  std::vector<NpyArray> results(model->outputs().size());
  std::vector<TensorView> outputs;
  for (size_t i = 0; i < results.size(); ++i) {
    const auto& meta = model->outputs()[i];
    results[i].dtype = meta.datatype;
    results[i].shape = meta.dims;
    if (model->max_batch_size() > 0) results[i].shape[0] = batch;
    const TensorDesc desc(meta.datatype, results[i].shape);
    results[i].data.resize(desc.size_bytes());
    outputs.push_back({desc, results[i].data.data()});
  }
  CONVOY_ASSIGN_OR_RETURN(auto instance, model->CreateInstance());
  CONVOY_RETURN_IF_ERROR(instance->Run(batch, inputs, outputs));
  if (absl::StartsWith(flags.Get("image_by_image"), "compare")) {
    CONVOY_ASSIGN_OR_RETURN(int repeat, ParsePositive("repeat", flags.Get("repeat", "0")));
    CONVOY_RETURN_IF_ERROR(CompareImageByImage(*model, *instance, batch, repeat, inputs, outputs));
  } else if (flags.Has("repeat")) {
    // The run above was the warm-up; time `repeat` more and report the median (and the fastest) wall time.
    CONVOY_ASSIGN_OR_RETURN(int repeat, ParsePositive("repeat", flags.Get("repeat")));
    std::vector<double> ms;
    for (int r = 0; r < repeat; ++r) {
      const auto start = std::chrono::steady_clock::now();
      CONVOY_RETURN_IF_ERROR(instance->Run(batch, inputs, outputs));
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    std::sort(ms.begin(), ms.end());
    const double median = repeat % 2 == 1 ? ms[repeat / 2] : (ms[repeat / 2 - 1] + ms[repeat / 2]) / 2;
    std::cout << absl::StrFormat("timed %d runs at batch %d: median %.3f ms, min %.3f ms\n", repeat, batch, median,
                                 ms[0]);
  }
  for (size_t i = 0; i < results.size(); ++i) {
    CONVOY_RETURN_IF_ERROR(WriteNpyFile(output_paths[i], results[i]));
    std::cout << "wrote " << model->outputs()[i].name << " " << DimsToString(results[i].shape) << " "
              << DataTypeName(results[i].dtype) << " to " << output_paths[i] << "\n";
  }
  return absl::OkStatus();
}

// --engine=reference: the model file imported (and optimized unless --optimize=false) as the server would.
absl::StatusOr<repository::LoadedGraph> LoadReferenceGraph(const Flags& flags) {
  ModelRuntimeOptions resolved;
  CONVOY_RETURN_IF_ERROR(ResolveModel(flags, resolved));
  repository::LoadGraphOptions options;
  const std::string optimize = flags.Get("optimize", "true");
  if (optimize != "true" && optimize != "false") {
    return absl::InvalidArgumentError(absl::StrCat("--optimize must be true or false, got '", optimize, "'"));
  }
  options.optimize = optimize == "true";
  return repository::LoadGraphFile(resolved.model_path, options);
}

// `run --engine=reference`: evaluates the graph on FP32 copies of the .npy inputs; writes FP32 .npy outputs.
absl::Status ReferenceRunCommand(const Flags& flags) {
  CONVOY_ASSIGN_OR_RETURN(repository::LoadedGraph loaded, LoadReferenceGraph(flags));
  const runtime::Graph& graph = loaded.graph;
  std::vector<std::string> input_names;
  for (const auto& input : graph.inputs()) input_names.push_back(input.name);
  CONVOY_ASSIGN_OR_RETURN(auto input_paths, AssignPaths(flags.All("input"), input_names, "input"));
  CONVOY_ASSIGN_OR_RETURN(auto output_paths, OutputPaths(flags, graph.outputs()));
  std::map<std::string, runtime::Tensor> inputs;
  for (size_t i = 0; i < input_paths.size(); ++i) {
    CONVOY_ASSIGN_OR_RETURN(NpyArray array, ReadNpyFile(input_paths[i]));
    ConvertFloatArray(array, DataType::kFloat32);
    if (array.dtype != DataType::kFloat32) {
      return absl::InvalidArgumentError(absl::StrCat("--engine=reference takes float inputs; '", input_paths[i],
                                                     "' is ", DataTypeName(array.dtype)));
    }
    runtime::Tensor& tensor = inputs[input_names[i]];
    tensor.shape = array.shape;
    tensor.data.resize(array.data.size() / sizeof(float));
    std::memcpy(tensor.data.data(), array.data.data(), array.data.size());
  }
  CONVOY_ASSIGN_OR_RETURN(auto outputs, runtime::RunReference(graph, inputs));
  for (size_t i = 0; i < output_paths.size(); ++i) {
    const runtime::Tensor& tensor = outputs.at(graph.outputs()[i]);
    NpyArray array;
    array.shape = tensor.shape;
    array.data.resize(tensor.data.size() * sizeof(float));
    std::memcpy(array.data.data(), tensor.data.data(), array.data.size());
    CONVOY_RETURN_IF_ERROR(WriteNpyFile(output_paths[i], array));
    std::cout << "wrote " << graph.outputs()[i] << " " << DimsToString(array.shape) << " FP32 to " << output_paths[i]
              << "\n";
  }
  return absl::OkStatus();
}

// `inspect --engine=reference`: the imported graph, then (when optimized) what the passes did.
absl::Status ReferenceInspectCommand(const Flags& flags) {
  CONVOY_ASSIGN_OR_RETURN(repository::LoadedGraph loaded, LoadReferenceGraph(flags));
  std::cout << loaded.graph.ToString();
  if (flags.Get("optimize", "true") == "true") std::cout << "optimizations: " << loaded.stats.ToString() << "\n";
  return absl::OkStatus();
}

// Runs the plan at `batch` on random inputs, once to warm up and then `runs` times with the step observer on,
// returning each step's median milliseconds (or its fastest run's, with `fastest`: on a machine shared with other
// work, the run a neighbour did not interrupt).
absl::StatusOr<std::vector<double>> ProfileSteps(const ModelRuntime& model, int batch, int runs, bool fastest) {
  CONVOY_ASSIGN_OR_RETURN(auto instance, model.CreateInstance());
  std::vector<std::vector<double>> samples(model.plan().steps().size());
  instance->executor().set_step_observer(
      [&samples](int index, const runtime::PlanStep&, double ms) { samples[index].push_back(ms); });
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<TensorView> inputs, outputs;
  std::mt19937 rng(std::random_device{}());
  auto add = [&](const runtime::TensorMetadata& t, std::vector<TensorView>& views, bool random) {
    std::vector<int64_t> dims = t.dims;
    if (model.max_batch_size() > 0) dims[0] = batch;
    const TensorDesc desc(t.datatype, dims);
    buffers.emplace_back(desc.size_bytes());
    std::uniform_real_distribution<float> dist(0.0f, 1.0f);
    for (int64_t i = 0; random && i < desc.num_elements(); ++i) {
      StoreFromFloat(buffers.back().data(), t.datatype, i, t.datatype == DataType::kUInt8 ? 255 * dist(rng) : dist(rng));
    }
    views.push_back({desc, buffers.back().data()});
  };
  buffers.reserve(model.inputs().size() + model.outputs().size());
  for (const auto& t : model.inputs()) add(t, inputs, true);
  for (const auto& t : model.outputs()) add(t, outputs, false);
  CONVOY_RETURN_IF_ERROR(instance->Run(batch, inputs, outputs));  // first run warms caches
  for (auto& s : samples) s.clear();
  for (int i = 0; i < runs; ++i) CONVOY_RETURN_IF_ERROR(instance->Run(batch, inputs, outputs));
  std::vector<double> medians;
  for (auto& s : samples) {
    std::sort(s.begin(), s.end());
    medians.push_back(s.empty() ? 0.0 : fastest ? s.front() : s[s.size() / 2]);
  }
  return medians;
}

absl::Status InspectCommand(const Flags& flags) {
  CONVOY_ASSIGN_OR_RETURN(ModelRuntimeOptions options, CommonOptions(flags));
  options.warmup = false;
  if (flags.Has("tune")) options.selection = AlgorithmSelection::kTune;
  int batch = 1;
  if (flags.Has("profile_batch")) {
    CONVOY_ASSIGN_OR_RETURN(batch, ParsePositive("profile_batch", flags.Get("profile_batch")));
  }
  int runs = 1;
  if (flags.Has("profile_runs")) {
    CONVOY_ASSIGN_OR_RETURN(runs, ParsePositive("profile_runs", flags.Get("profile_runs")));
  }
  const std::string statistic = flags.Get("profile_statistic", "median");
  if (statistic != "median" && statistic != "min") {
    return absl::InvalidArgumentError(absl::StrCat("--profile_statistic: expected median or min, got '", statistic, "'"));
  }
  CONVOY_ASSIGN_OR_RETURN(auto model, ModelRuntime::Create(options));
  batch = std::min(batch, model->plan().max_batch_size());
  std::cout << "== model " << model->name() << "\n";
  for (const auto& t : model->inputs()) {
    std::cout << "input  " << t.name << " " << DataTypeName(t.datatype) << " " << DimsToString(t.dims) << "\n";
  }
  for (const auto& t : model->outputs()) {
    std::cout << "output " << t.name << " " << DataTypeName(t.datatype) << " " << DimsToString(t.dims) << "\n";
  }
  std::cout << "\n== optimized graph (" << model->load_report().optimize_stats << ")\n" << model->graph().ToString();
  if (!model->int8_layers().empty()) {
    std::cout << "\n== precision int8: convolutions, residual adds, classifier pool and Gemm\n";
    for (const runtime::LayerOutcome& layer : model->int8_layers()) {
      std::cout << "  " << layer.node << ": " << (layer.int8 ? "INT8 " : "FP32 (") << layer.detail
                << (layer.int8 ? "" : ")") << "\n";
    }
  }
  std::cout << "\n== " << model->plan().ToString(batch);
  if (batch > 1) {
    const int prefix = model->image_by_image_steps(batch);
    std::cout << "image by image at batch " << batch << ": "
              << (prefix > 0 ? absl::StrCat("the first ", prefix, " of ", model->plan().steps().size(), " steps")
                             : std::string("none"))
              << "\n";
  }
  CONVOY_ASSIGN_OR_RETURN(std::vector<double> times, ProfileSteps(*model, batch, runs, statistic == "min"));
  std::cout << "\n== measured step times at batch " << batch << " (ms";
  if (runs > 1) std::cout << ", " << (statistic == "min" ? "fastest" : "median") << " of " << runs << " runs";
  std::cout << ")\n";
  double total = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    const auto& step = *model->plan().steps()[i];
    std::cout << absl::StrFormat("  [%d] %-28s %-14s %-32s %9.4f\n", i, step.name(), OpKindName(step.op()),
                                 step.AlgorithmName(batch), times[i]);
    total += times[i];
  }
  std::cout << absl::StrFormat("  total %.4f ms\n", total);
  return absl::OkStatus();
}

absl::Status TuneCommand(const Flags& flags) {
  const std::string cache_path = flags.Get("cache");
  if (cache_path.empty()) return absl::InvalidArgumentError("--cache=OUT.cache is required");
  CONVOY_ASSIGN_OR_RETURN(ModelRuntimeOptions options, CommonOptions(flags));
  options.warmup = false;
  options.selection = AlgorithmSelection::kTune;
  for (absl::string_view part : absl::StrSplit(flags.Get("batch_sizes", "1"), ',', absl::SkipEmpty())) {
    CONVOY_ASSIGN_OR_RETURN(int b, ParsePositive("batch_sizes", std::string(part)));
    options.tune_batch_sizes.push_back(b);
  }
  const int largest = *std::max_element(options.tune_batch_sizes.begin(), options.tune_batch_sizes.end());
  if (!options.config) options.default_max_batch_size = std::max(options.default_max_batch_size, largest);
  // Progress: one line per tuned layer and batch size, as the planner reports them.
  options.log = [](const std::string& line) { std::cout << line << "\n" << std::flush; };
  CONVOY_ASSIGN_OR_RETURN(auto model, ModelRuntime::Create(options));
  CONVOY_RETURN_IF_ERROR(AlgorithmCache::Global().Save(cache_path));
  const AlgorithmCacheStats stats = AlgorithmCache::Global().stats();
  std::cout << absl::StrFormat("tuned %d problems in %.2f s; wrote %d entries to %s\n", stats.tunings,
                               stats.tuning_seconds, stats.entries, cache_path);
  return absl::OkStatus();
}

absl::Status AlgorithmsCommand() {
  ForEachOp([](auto tag) {
    using Op = typename decltype(tag)::type;
    for (const auto* algorithm : OpRegistry<Op>::Global().All(Backend::kCpu)) {
      std::cout << OpKindName(Op::kKind) << " " << algorithm->name() << "\n";
    }
  });
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv);

// `jobs`: runs one command per line of stdin (its arguments separated by tabs, the subcommand first, as after
// `convoy`) and answers each with one line on stdout, after the command's own output: "job ok", or "job error: " and
// the message with newlines as spaces. A failing command does not end the loop; EOF does.
absl::Status JobsCommand(char* program) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::vector<std::string> args = absl::StrSplit(line, '\t', absl::SkipEmpty());
    std::vector<char*> argv = {program};
    for (std::string& arg : args) argv.push_back(arg.data());
    absl::Status status = args.empty() || args[0] == "jobs"
                              ? absl::InvalidArgumentError("a job is a subcommand and its flags (not 'jobs')")
                              : Main(static_cast<int>(argv.size()), argv.data());
    std::string message(status.message());
    std::replace(message.begin(), message.end(), '\n', ' ');
    std::cout << (status.ok() ? "job ok" : "job error: " + message) << std::endl;
  }
  return absl::OkStatus();
}

// `image`: the pixels the server would make of a photo for an H x W image input.
absl::Status ImageCommand(const Flags& flags) {
  const std::string path = flags.Get("image");
  if (path.empty()) return absl::InvalidArgumentError("--image is required");
  if (!flags.Has("output")) return absl::InvalidArgumentError("--output is required");
  CONVOY_ASSIGN_OR_RETURN(const int height, ParsePositive("height", flags.Get("height")));
  CONVOY_ASSIGN_OR_RETURN(const int width, ParsePositive("width", flags.Get("width")));
  double crop_fraction = 0.875;
  if (flags.Has("crop_fraction") && !absl::SimpleAtod(flags.Get("crop_fraction"), &crop_fraction)) {
    return absl::InvalidArgumentError(absl::StrCat("--crop_fraction must be a number, got '",
                                                   flags.Get("crop_fraction"), "'"));
  }
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open --image=", path));
  const std::string bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  absl::StatusOr<imaging::RgbImage> image = imaging::DecodeImage(bytes);
  if (!image.ok()) return absl::Status(image.status().code(), absl::StrCat(path, ": ", image.status().message()));
  NpyArray pixels{DataType::kUInt8, {1, height, width, 3}, std::vector<uint8_t>(size_t{3} * height * width)};
  CONVOY_RETURN_IF_ERROR(imaging::CenterCropAndResize(*image, height, width, crop_fraction, pixels.data.data()));
  return WriteNpyFile(flags.Get("output"), pixels);
}

// The files --images names: a folder's JPEG and PNG files (sorted by name), or a comma-separated list of photos.
absl::StatusOr<std::vector<std::string>> PhotoPaths(const std::string& value) {
  std::vector<std::string> paths;
  std::error_code error;
  if (std::filesystem::is_directory(value, error)) {
    for (const auto& entry : std::filesystem::directory_iterator(value, error)) {
      std::string ext = absl::AsciiStrToLower(entry.path().extension().string());
      if (entry.is_regular_file() && (ext == ".jpg" || ext == ".jpeg" || ext == ".png")) {
        paths.push_back(entry.path().string());
      }
    }
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) return absl::NotFoundError(absl::StrCat("--images=", value, ": no .jpg, .jpeg or .png file"));
    return paths;
  }
  for (absl::string_view part : absl::StrSplit(value, ',', absl::SkipEmpty())) paths.emplace_back(part);
  if (paths.empty()) return absl::InvalidArgumentError("--images is empty");
  return paths;
}

// `calibrate`: runs the FP32 model on the calibration inputs and writes its calibration table.
absl::Status CalibrateCommand(const Flags& flags) {
  ModelRuntimeOptions resolved;
  CONVOY_RETURN_IF_ERROR(ResolveModel(flags, resolved));
  ModelCalibrationOptions options;
  options.model_path = resolved.model_path;
  options.config = resolved.config;
  CONVOY_ASSIGN_OR_RETURN(options.device, SelectDevice(flags));
  if (flags.Has("images")) {
    CONVOY_ASSIGN_OR_RETURN(options.images, PhotoPaths(flags.Get("images")));
  }
  for (absl::string_view part : absl::StrSplit(flags.Get("inputs"), ',', absl::SkipEmpty())) {
    options.npy_files.emplace_back(part);
  }
  CONVOY_ASSIGN_OR_RETURN(options.method, runtime::ParseCalibrationMethod(flags.Get("method", "minmax")));
  if (flags.Has("percentile")) {
    if (options.method != runtime::CalibrationMethod::kPercentile) {
      return absl::InvalidArgumentError("--percentile applies to --method=percentile only");
    }
    if (!absl::SimpleAtod(flags.Get("percentile"), &options.percentile) ||
        !(options.percentile > 50 && options.percentile <= 100)) {
      return absl::InvalidArgumentError(absl::StrCat("--percentile must be a number in (50, 100], got '",
                                                     flags.Get("percentile"), "'"));
    }
  }
  const std::string activations = flags.Get("activations", "uint8");
  if (activations != "uint8" && activations != "int8") {
    return absl::InvalidArgumentError(absl::StrCat("--activations must be uint8 (asymmetric) or int8 (symmetric), got '",
                                                   activations, "'"));
  }
  options.signed_activations = activations == "int8";
  for (absl::string_view part : absl::StrSplit(flags.Get("keep_fp32"), ',', absl::SkipEmpty())) {
    options.keep_fp32.emplace_back(part);
  }
  if (flags.Has("batch_size")) {
    CONVOY_ASSIGN_OR_RETURN(options.batch_size, ParsePositive("batch_size", flags.Get("batch_size")));
  }
  if (!flags.Has("quiet")) options.log = [](const std::string& line) { std::cerr << line << std::endl; };
  std::string output = flags.Get("output");
  if (output.empty()) {
    const size_t slash = options.model_path.find_last_of('/');
    output = slash == std::string::npos ? "calibration.yaml"
                                        : options.model_path.substr(0, slash + 1) + "calibration.yaml";
  }
  CONVOY_ASSIGN_OR_RETURN(runtime::CalibrationTable table, CalibrateModel(options));
  CONVOY_RETURN_IF_ERROR(repository::WriteCalibrationTable(output, table));
  int int8 = 0;
  for (const auto& layer : table.layers) int8 += layer.int8;
  std::cout << "wrote " << output << ": " << table.tensors.size() << " tensors, " << int8 << " of "
            << table.layers.size() << " layers int8 (" << runtime::CalibrationMethodName(table.method) << ", "
            << table.samples << " samples)\n";
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  if (argc < 2) return absl::InvalidArgumentError("missing subcommand");
  const std::string command = argv[1];
  if (command == "jobs") return JobsCommand(argv[0]);
  const std::vector<std::string> common = {"model",  "device",     "precision", "layout", "max_batch_size",
                                           "cache",  "threads",    "quiet",     "cuda_graphs", "int8",
                                           "calibration_table", "fuse_squeeze_excitation", "int8_residual_add",
                                           "verify_algorithms", "image_by_image"};
  auto with = [&common](std::vector<std::string> extra) {
    extra.insert(extra.end(), common.begin(), common.end());
    return extra;
  };
  // --engine=runtime (default) plans the model on a device; --engine=reference uses the reference interpreter.
  auto reference_engine = [](const Flags& flags) -> absl::StatusOr<bool> {
    const std::string engine = flags.Get("engine", "runtime");
    if (engine != "runtime" && engine != "reference") {
      return absl::InvalidArgumentError(absl::StrCat("--engine must be runtime or reference, got '", engine, "'"));
    }
    if (engine == "runtime" && flags.Has("optimize")) {
      return absl::InvalidArgumentError("--optimize applies to --engine=reference only (the runtime always optimizes)");
    }
    return engine == "reference";
  };
  if (command == "run") {
    CONVOY_ASSIGN_OR_RETURN(
        Flags flags, ParseFlags(argc, argv, with({"input", "output", "output_dir", "engine", "optimize", "repeat"})));
    CONVOY_ASSIGN_OR_RETURN(bool reference, reference_engine(flags));
    if (reference && flags.Has("repeat")) {
      return absl::InvalidArgumentError("--repeat applies to the runtime engine only");
    }
    return reference ? ReferenceRunCommand(flags) : RunCommand(flags);
  }
  if (command == "inspect") {
    CONVOY_ASSIGN_OR_RETURN(Flags flags, ParseFlags(argc, argv, with({"tune", "profile_batch", "profile_runs", "profile_statistic", "engine", "optimize"})));
    CONVOY_ASSIGN_OR_RETURN(bool reference, reference_engine(flags));
    return reference ? ReferenceInspectCommand(flags) : InspectCommand(flags);
  }
  if (command == "tune") {
    CONVOY_ASSIGN_OR_RETURN(Flags flags, ParseFlags(argc, argv, with({"batch_sizes"})));
    return TuneCommand(flags);
  }
  if (command == "calibrate") {
    CONVOY_ASSIGN_OR_RETURN(Flags flags, ParseFlags(argc, argv, {"model", "device", "threads", "quiet", "images",
                                                                 "inputs", "method", "percentile", "activations",
                                                                 "keep_fp32", "batch_size", "output"}));
    return CalibrateCommand(flags);
  }
  if (command == "algorithms") return AlgorithmsCommand();
  if (command == "image") {
    CONVOY_ASSIGN_OR_RETURN(Flags flags,
                            ParseFlags(argc, argv, {"image", "height", "width", "crop_fraction", "output"}));
    return ImageCommand(flags);
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown subcommand '", command, "'"));
}

}  // namespace
}  // namespace convoy::tools

int main(int argc, char** argv) {
  // `convoy help`, `convoy --help`, `convoy SUBCOMMAND --help`: the usage, on stdout, exit 0.
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h" || (i == 1 && arg == "help")) {
      std::cout << convoy::tools::kUsage;
      return 0;
    }
  }
  const absl::Status status = convoy::tools::Main(argc, argv);
  if (!status.ok()) {
    std::cerr << "convoy: " << status.message() << "\n";
    if (absl::IsInvalidArgument(status) && status.message().find("'") == absl::string_view::npos) {
      std::cerr << convoy::tools::kUsage;
    }
    return 1;
  }
  return 0;
}
