// config.yaml parsing: one function per section, each strict about its fields; cross-field checks at the end.
#include "server/repository/model_config.h"

#include <fstream>
#include <set>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"
#include "server/repository/yaml_fields.h"

namespace convoy::repository {
namespace {

template <typename E>
using EnumNames = std::vector<std::pair<const char*, E>>;

// Reads an enum field by name (case-insensitive); absent -> `fallback`.
template <typename E>
absl::StatusOr<E> EnumField(const YamlMap& m, const std::string& key, const EnumNames<E>& names, E fallback) {
  if (!m.Has(key)) return fallback;
  CONVOY_ASSIGN_OR_RETURN(std::string text, m.String(key));
  std::vector<std::string> options;
  for (const auto& [name, value] : names) {
    if (absl::AsciiStrToLower(text) == absl::AsciiStrToLower(name)) return value;
    options.push_back(name);
  }
  return m.Error(key, absl::StrCat("expected one of ", absl::StrJoin(options, ", "), ", got '", text, "'"));
}

const EnumNames<TensorDataType>& DataTypeNames() {
  static const auto* names = new EnumNames<TensorDataType>{{"FP32", TensorDataType::kFp32},
                                                           {"FP16", TensorDataType::kFp16},
                                                           {"BF16", TensorDataType::kBf16},
                                                           {"UINT8", TensorDataType::kUint8},
                                                           {"INT64", TensorDataType::kInt64},
                                                           {"INT32", TensorDataType::kInt32}};
  return *names;
}

absl::Status PositiveList(const YamlMap& m, const std::string& key, const std::vector<int64_t>& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < 1) return m.Error(key, absl::StrCat("entry ", i, " must be >= 1, got ", values[i]));
  }
  return absl::OkStatus();
}

absl::StatusOr<ImagePreprocessing> ParsePreprocessing(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"mean", "std", "scale"}));
  ImagePreprocessing p;
  for (const char* key : {"mean", "std"}) {
    CONVOY_ASSIGN_OR_RETURN(auto items, m.Sequence(key));
    std::vector<float>& out = std::string(key) == "mean" ? p.mean : p.std;
    for (const auto& [node, path] : items) {
      CONVOY_ASSIGN_OR_RETURN(double v, YamlToDouble(node, path, m.source()));
      if (std::string(key) == "std" && v <= 0) return YamlError(m.source(), node, path, "std must be > 0");
      out.push_back(static_cast<float>(v));
    }
  }
  if (p.mean.size() != p.std.size() || p.mean.empty()) {
    return m.Error("std", absl::StrCat("mean has ", p.mean.size(), " entries and std ", p.std.size(),
                                       "; expected one per channel"));
  }
  CONVOY_ASSIGN_OR_RETURN(double scale, m.Double("scale", 1.0 / 255.0));
  p.scale = static_cast<float>(scale);
  return p;
}

absl::StatusOr<EncodedImageConfig> ParseEncodedImage(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"crop_fraction", "max_bytes", "max_pixels", "max_dimension"}));
  EncodedImageConfig e;
  CONVOY_ASSIGN_OR_RETURN(e.crop_fraction, m.Double("crop_fraction", e.crop_fraction));
  if (!(e.crop_fraction > 0 && e.crop_fraction <= 1)) {
    return m.Error("crop_fraction", absl::StrCat("must be in (0, 1], got ", e.crop_fraction));
  }
  CONVOY_ASSIGN_OR_RETURN(e.max_bytes, m.Int("max_bytes", e.max_bytes));
  CONVOY_ASSIGN_OR_RETURN(e.max_pixels, m.Int("max_pixels", e.max_pixels));
  CONVOY_ASSIGN_OR_RETURN(int64_t max_dimension, m.Int("max_dimension", e.max_dimension));
  for (const auto& [key, value] : {std::pair<const char*, int64_t>{"max_bytes", e.max_bytes},
                                   {"max_pixels", e.max_pixels}, {"max_dimension", max_dimension}}) {
    if (value < 1) return m.Error(key, absl::StrCat("must be >= 1, got ", value));
  }
  if (max_dimension > 65535) return m.Error("max_dimension", absl::StrCat("must be <= 65535, got ", max_dimension));
  e.max_dimension = static_cast<int>(max_dimension);
  return e;
}

absl::StatusOr<TensorConfig> ParseTensor(const YamlMap& m, bool is_input) {
  if (is_input) {
    CONVOY_RETURN_IF_ERROR(m.CheckFields({"name", "datatype", "dims", "layout", "preprocessing", "encoded_image"}));
  } else {
    CONVOY_RETURN_IF_ERROR(m.CheckFields({"name", "datatype", "dims", "layout", "labels", "class_map"}));
  }
  TensorConfig t;
  CONVOY_ASSIGN_OR_RETURN(t.name, m.String("name"));
  if (t.name.empty()) return m.Error("name", "must not be empty");
  CONVOY_ASSIGN_OR_RETURN(t.data_type, EnumField(m, "datatype", DataTypeNames(), TensorDataType::kFp32));
  CONVOY_ASSIGN_OR_RETURN(t.dims, m.IntList("dims"));
  CONVOY_RETURN_IF_ERROR(PositiveList(m, "dims", t.dims));
  CONVOY_ASSIGN_OR_RETURN(
      t.layout, EnumField(m, "layout", EnumNames<TensorLayout>{{"NCHW", TensorLayout::kNchw}, {"NHWC", TensorLayout::kNhwc}},
                          TensorLayout::kNchw));
  if (m.Has("preprocessing")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap pre, m.Map("preprocessing"));
    CONVOY_ASSIGN_OR_RETURN(t.preprocessing, ParsePreprocessing(pre));
    // The client sends UINT8 HWC pixels; the model sees float data in its own layout.
    if (t.data_type != TensorDataType::kUint8 || t.dims.size() != 3) {
      return m.Error("preprocessing", absl::StrCat("needs datatype UINT8 and dims [H, W, C], got ",
                                                   TensorDataTypeName(t.data_type), " with ", t.dims.size(), " dims"));
    }
    if (static_cast<int64_t>(t.preprocessing->mean.size()) != t.dims[2]) {
      return m.Error("preprocessing", absl::StrCat(t.preprocessing->mean.size(), " mean/std entries for ",
                                                   t.dims[2], " channels"));
    }
  }
  if (m.Has("encoded_image")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap encoded, m.Map("encoded_image"));
    CONVOY_ASSIGN_OR_RETURN(t.encoded_image, ParseEncodedImage(encoded));
    // Photos decode to 8-bit RGB pixels in [H, W, 3] order: the input must take exactly those.
    if (t.data_type != TensorDataType::kUint8 || t.dims.size() != 3 || t.dims[2] != 3) {
      return m.Error("encoded_image", absl::StrCat("needs datatype UINT8 and dims [H, W, 3], got ",
                                                   TensorDataTypeName(t.data_type), " with dims [",
                                                   absl::StrJoin(t.dims, ", "), "]"));
    }
  }
  CONVOY_ASSIGN_OR_RETURN(t.labels_file, m.String("labels", std::string()));
  if (!is_input) {
    CONVOY_ASSIGN_OR_RETURN(t.class_map, m.Bool("class_map", false));
    if (t.class_map && t.data_type != TensorDataType::kUint8 && t.data_type != TensorDataType::kInt32) {
      return m.Error("class_map", absl::StrCat("a class map is served as UINT8 or INT32, got datatype ",
                                               TensorDataTypeName(t.data_type)));
    }
  }
  if (is_input && t.data_type == TensorDataType::kInt32) {
    return m.Error("datatype", "INT32 is served for outputs only (class maps and ArgMax outputs)");
  }
  return t;
}

absl::StatusOr<std::vector<TensorConfig>> ParseTensors(const YamlMap& root, const std::string& key, bool is_input) {
  CONVOY_ASSIGN_OR_RETURN(auto items, root.Sequence(key));
  if (items.empty()) return root.Error(key, "at least one entry is required");
  std::vector<TensorConfig> out;
  std::set<std::string> names;
  for (const auto& [node, path] : items) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(node, path, root.source()));
    CONVOY_ASSIGN_OR_RETURN(TensorConfig t, ParseTensor(m, is_input));
    if (!names.insert(t.name).second) return m.Error("name", absl::StrCat("duplicate name '", t.name, "'"));
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<QueuePolicy> ParseQueuePolicy(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"max_queue_size", "default_timeout_microseconds", "timeout_action",
                                        "allow_timeout_override"}));
  QueuePolicy q;
  CONVOY_ASSIGN_OR_RETURN(q.max_queue_size, m.Int("max_queue_size", 0));
  CONVOY_ASSIGN_OR_RETURN(q.default_timeout_microseconds, m.Int("default_timeout_microseconds", 0));
  if (q.max_queue_size < 0) return m.Error("max_queue_size", "must be >= 0");
  if (q.default_timeout_microseconds < 0) return m.Error("default_timeout_microseconds", "must be >= 0");
  CONVOY_ASSIGN_OR_RETURN(q.timeout_action,
                          EnumField(m, "timeout_action",
                                    EnumNames<TimeoutAction>{{"REJECT", TimeoutAction::kReject},
                                                             {"DELAY", TimeoutAction::kDelay}},
                                    TimeoutAction::kReject));
  CONVOY_ASSIGN_OR_RETURN(q.allow_timeout_override, m.Bool("allow_timeout_override", false));
  return q;
}

// policy and target_latency_microseconds: the fixed delay (Triton's) or the adaptive policy with its target.
absl::Status ParseBatchingPolicy(const YamlMap& m, DynamicBatchingConfig& d) {
  CONVOY_ASSIGN_OR_RETURN(d.policy, EnumField(m, "policy",
                                              EnumNames<BatchingPolicyKind>{{"fixed", BatchingPolicyKind::kFixed},
                                                                            {"adaptive", BatchingPolicyKind::kAdaptive}},
                                              BatchingPolicyKind::kFixed));
  CONVOY_ASSIGN_OR_RETURN(d.target_latency_microseconds, m.Int("target_latency_microseconds", 0));
  const bool adaptive = d.policy == BatchingPolicyKind::kAdaptive;
  if (m.Has("target_latency_microseconds")) {
    if (!adaptive) return m.Error("target_latency_microseconds", "needs policy: adaptive");
    if (d.target_latency_microseconds < 1) {
      return m.Error("target_latency_microseconds", absl::StrCat("must be >= 1 (leave it out for no target), got ",
                                                                 d.target_latency_microseconds));
    }
  }
  if (adaptive && !d.preferred_batch_size.empty()) {
    return m.Error("preferred_batch_size", "is not used by policy: adaptive (it measures the execution time of every "
                                           "batch size); remove it, or use policy: fixed");
  }
  return absl::OkStatus();
}

absl::StatusOr<DynamicBatchingConfig> ParseDynamicBatching(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"policy", "target_latency_microseconds", "preferred_batch_size",
                                        "max_queue_delay_microseconds", "preserve_ordering", "priority_levels",
                                        "default_priority_level", "default_queue_policy", "priority_queue_policy"}));
  DynamicBatchingConfig d;
  CONVOY_ASSIGN_OR_RETURN(d.preferred_batch_size, m.IntList("preferred_batch_size", std::vector<int64_t>{}));
  CONVOY_RETURN_IF_ERROR(PositiveList(m, "preferred_batch_size", d.preferred_batch_size));
  CONVOY_RETURN_IF_ERROR(ParseBatchingPolicy(m, d));
  CONVOY_ASSIGN_OR_RETURN(d.max_queue_delay_microseconds, m.Int("max_queue_delay_microseconds", 0));
  d.max_queue_delay_given = m.Has("max_queue_delay_microseconds");
  if (d.max_queue_delay_microseconds < 0) return m.Error("max_queue_delay_microseconds", "must be >= 0");
  CONVOY_ASSIGN_OR_RETURN(d.preserve_ordering, m.Bool("preserve_ordering", false));
  CONVOY_ASSIGN_OR_RETURN(d.priority_levels, m.Int("priority_levels", 0));
  CONVOY_ASSIGN_OR_RETURN(d.default_priority_level, m.Int("default_priority_level", 0));
  if (d.priority_levels < 0) return m.Error("priority_levels", "must be >= 0");
  if (d.priority_levels > 0 && (d.default_priority_level < 1 || d.default_priority_level > d.priority_levels)) {
    return m.Error("default_priority_level", absl::StrCat("must be in 1..", d.priority_levels, " (priority_levels), got ",
                                                          d.default_priority_level));
  }
  if (d.priority_levels == 0 && d.default_priority_level != 0) {
    return m.Error("default_priority_level", "set without priority_levels");
  }
  if (m.Has("default_queue_policy")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap q, m.Map("default_queue_policy"));
    CONVOY_ASSIGN_OR_RETURN(d.default_queue_policy, ParseQueuePolicy(q));
  }
  if (m.Has("priority_queue_policy")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap levels, m.Map("priority_queue_policy"));
    CONVOY_ASSIGN_OR_RETURN(auto entries, levels.Entries());
    for (const auto& [key, node] : entries) {
      const std::string path = levels.ChildPath(key);
      CONVOY_ASSIGN_OR_RETURN(int64_t level, YamlToInt(YAML::Node(key), path, m.source()));
      if (level < 1 || level > d.priority_levels) {
        return YamlError(m.source(), node, path,
                         absl::StrCat("priority level ", level, " outside 1..", d.priority_levels, " (priority_levels)"));
      }
      CONVOY_ASSIGN_OR_RETURN(YamlMap q, YamlMap::Create(node, path, m.source()));
      CONVOY_ASSIGN_OR_RETURN(d.priority_queue_policy[level], ParseQueuePolicy(q));
    }
  }
  return d;
}

absl::StatusOr<std::vector<InstanceGroupConfig>> ParseInstanceGroups(const YamlMap& root) {
  CONVOY_ASSIGN_OR_RETURN(auto items, root.Sequence("instance_group"));
  std::vector<InstanceGroupConfig> groups;
  for (const auto& [node, path] : items) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(node, path, root.source()));
    CONVOY_RETURN_IF_ERROR(m.CheckFields({"count", "kind", "gpus"}));
    InstanceGroupConfig g;
    CONVOY_ASSIGN_OR_RETURN(g.count, m.Int("count", 1));
    if (g.count < 1) return m.Error("count", absl::StrCat("must be >= 1, got ", g.count));
    CONVOY_ASSIGN_OR_RETURN(g.kind, EnumField(m, "kind",
                                              EnumNames<InstanceKind>{{"auto", InstanceKind::kAuto},
                                                                      {"gpu", InstanceKind::kGpu},
                                                                      {"cpu", InstanceKind::kCpu}},
                                              InstanceKind::kAuto));
    CONVOY_ASSIGN_OR_RETURN(g.gpus, m.IntList("gpus", std::vector<int64_t>{}));
    for (int64_t gpu : g.gpus) {
      if (gpu < 0) return m.Error("gpus", absl::StrCat("GPU index must be >= 0, got ", gpu));
    }
    if (!g.gpus.empty() && g.kind == InstanceKind::kCpu) return m.Error("gpus", "listed for a cpu instance group");
    groups.push_back(std::move(g));
  }
  return groups;
}

absl::StatusOr<OptimizationConfig> ParseOptimization(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(
      m.CheckFields({"precision", "cuda_graphs", "algorithm_selection", "tune_batch_sizes", "verify_algorithms",
                     "calibration_table", "int8_residual_add", "image_by_image"}));
  OptimizationConfig o;
  CONVOY_ASSIGN_OR_RETURN(o.precision, EnumField(m, "precision",
                                                 EnumNames<Precision>{{"fp32", Precision::kFp32},
                                                                      {"tf32", Precision::kTf32},
                                                                      {"fp16", Precision::kFp16},
                                                                      {"bf16", Precision::kBf16},
                                                                      {"auto", Precision::kAuto},
                                                                      {"int8", Precision::kInt8}},
                                                 Precision::kFp32));
  CONVOY_ASSIGN_OR_RETURN(o.cuda_graphs, m.Bool("cuda_graphs", false));
  CONVOY_ASSIGN_OR_RETURN(o.algorithm_selection,
                          EnumField(m, "algorithm_selection",
                                    EnumNames<AlgorithmSelection>{{"heuristic", AlgorithmSelection::kHeuristic},
                                                                  {"tune", AlgorithmSelection::kTune}},
                                    AlgorithmSelection::kHeuristic));
  CONVOY_ASSIGN_OR_RETURN(o.tune_batch_sizes, m.IntList("tune_batch_sizes", std::vector<int64_t>{}));
  CONVOY_RETURN_IF_ERROR(PositiveList(m, "tune_batch_sizes", o.tune_batch_sizes));
  CONVOY_ASSIGN_OR_RETURN(o.verify_algorithms, m.Bool("verify_algorithms", true));
  CONVOY_ASSIGN_OR_RETURN(o.calibration_table, m.String("calibration_table", o.calibration_table));
  if (m.Has("calibration_table") && o.precision != Precision::kInt8) {
    return m.Error("calibration_table", "is read by precision: int8 only");
  }
  if (o.calibration_table.empty()) return m.Error("calibration_table", "must name a file");
  CONVOY_ASSIGN_OR_RETURN(o.int8_residual_add,
                          EnumField(m, "int8_residual_add",
                                    EnumNames<Int8ResidualAdd>{{"exact", Int8ResidualAdd::kExact},
                                                               {"single_rounding", Int8ResidualAdd::kSingleRounding}},
                                    Int8ResidualAdd::kExact));
  CONVOY_ASSIGN_OR_RETURN(o.image_by_image, m.Bool("image_by_image", true));
  return o;
}

absl::StatusOr<WarmupConfig> ParseWarmup(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"batch_sizes", "iterations"}));
  WarmupConfig w;
  CONVOY_ASSIGN_OR_RETURN(w.batch_sizes, m.IntList("batch_sizes"));
  CONVOY_RETURN_IF_ERROR(PositiveList(m, "batch_sizes", w.batch_sizes));
  CONVOY_ASSIGN_OR_RETURN(w.iterations, m.Int("iterations", 1));
  if (w.iterations < 1) return m.Error("iterations", absl::StrCat("must be >= 1, got ", w.iterations));
  return w;
}

// version_policy: {latest: N} | {all: true} | {specific: [v, ...]}; exactly one key.
absl::StatusOr<VersionPolicy> ParseVersionPolicy(const YamlMap& m) {
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"latest", "all", "specific"}));
  int given = m.Has("latest") + m.Has("all") + m.Has("specific");
  if (given != 1) return m.Error("latest", absl::StrCat("give exactly one of latest, all, specific (got ", given, ")"));
  VersionPolicy v;
  if (m.Has("latest")) {
    v.kind = VersionPolicyKind::kLatest;
    CONVOY_ASSIGN_OR_RETURN(v.latest_count, m.Int("latest"));
    if (v.latest_count < 1) return m.Error("latest", absl::StrCat("must be >= 1, got ", v.latest_count));
  } else if (m.Has("all")) {
    CONVOY_ASSIGN_OR_RETURN(bool all, m.Bool("all"));
    if (!all) return m.Error("all", "only 'all: true' is meaningful");
    v.kind = VersionPolicyKind::kAll;
  } else {
    v.kind = VersionPolicyKind::kSpecific;
    CONVOY_ASSIGN_OR_RETURN(v.versions, m.IntList("specific"));
    if (v.versions.empty()) return m.Error("specific", "list at least one version");
    CONVOY_RETURN_IF_ERROR(PositiveList(m, "specific", v.versions));
  }
  return v;
}

absl::Status ValidateAcrossFields(const YamlMap& root, const ModelConfig& c) {
  if (c.max_batch_size < 0) return root.Error("max_batch_size", absl::StrCat("must be >= 0, got ", c.max_batch_size));
  if (c.dynamic_batching) {
    if (c.max_batch_size == 0) return root.Error("dynamic_batching", "needs max_batch_size > 0");
    const auto& sizes = c.dynamic_batching->preferred_batch_size;
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] > c.max_batch_size) {
        return root.Error("dynamic_batching", absl::StrCat("preferred_batch_size[", i, "] is ", sizes[i],
                                                           ", larger than max_batch_size ", c.max_batch_size));
      }
    }
  }
  const std::vector<int64_t>* lists[] = {&c.optimization.tune_batch_sizes,
                                         c.warmup ? &c.warmup->batch_sizes : nullptr};
  const char* keys[] = {"optimization", "warmup"};
  for (int l = 0; l < 2; ++l) {
    if (!lists[l]) continue;
    for (int64_t b : *lists[l]) {
      if (b > std::max<int64_t>(c.max_batch_size, 1)) {
        return root.Error(keys[l], absl::StrCat("batch size ", b, " exceeds max_batch_size ", c.max_batch_size));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

const char* TensorDataTypeName(TensorDataType type) {
  for (const auto& [name, value] : DataTypeNames()) {
    if (value == type) return name;
  }
  return "?";
}

absl::StatusOr<ModelConfig> ParseModelConfigText(const std::string& text, const std::string& source_name) {
  CONVOY_ASSIGN_OR_RETURN(YAML::Node doc, LoadYaml(text, source_name));
  CONVOY_ASSIGN_OR_RETURN(YamlMap root, YamlMap::Create(doc, "", source_name));
  CONVOY_RETURN_IF_ERROR(root.CheckFields({"name", "format", "max_batch_size", "inputs", "outputs", "dynamic_batching",
                                           "instance_group", "optimization", "warmup", "version_policy"}));
  ModelConfig c;
  CONVOY_ASSIGN_OR_RETURN(c.name, root.String("name"));
  if (c.name.empty() || c.name.find('/') != std::string::npos) return root.Error("name", "must be a plain, non-empty name");
  CONVOY_ASSIGN_OR_RETURN(c.format, EnumField(root, "format",
                                              EnumNames<ModelFormat>{{"convoy", ModelFormat::kConvoy},
                                                                     {"onnx", ModelFormat::kOnnx}},
                                              ModelFormat::kOnnx));
  if (!root.Has("format")) return root.Error("format", "required field is missing (convoy or onnx)");
  CONVOY_ASSIGN_OR_RETURN(c.max_batch_size, root.Int("max_batch_size", 0));
  CONVOY_ASSIGN_OR_RETURN(c.inputs, ParseTensors(root, "inputs", true));
  CONVOY_ASSIGN_OR_RETURN(c.outputs, ParseTensors(root, "outputs", false));
  if (root.Has("dynamic_batching")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, root.Map("dynamic_batching"));
    CONVOY_ASSIGN_OR_RETURN(c.dynamic_batching, ParseDynamicBatching(m));
  }
  if (root.Has("instance_group")) {
    CONVOY_ASSIGN_OR_RETURN(c.instance_groups, ParseInstanceGroups(root));
  } else {
    c.instance_groups.push_back(InstanceGroupConfig{});
  }
  if (root.Has("optimization")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, root.Map("optimization"));
    CONVOY_ASSIGN_OR_RETURN(c.optimization, ParseOptimization(m));
  }
  if (root.Has("warmup")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, root.Map("warmup"));
    CONVOY_ASSIGN_OR_RETURN(c.warmup, ParseWarmup(m));
  }
  if (root.Has("version_policy")) {
    CONVOY_ASSIGN_OR_RETURN(YamlMap m, root.Map("version_policy"));
    CONVOY_ASSIGN_OR_RETURN(c.version_policy, ParseVersionPolicy(m));
  }
  CONVOY_RETURN_IF_ERROR(ValidateAcrossFields(root, c));
  return c;
}

absl::StatusOr<ModelConfig> ParseModelConfig(const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("cannot open model config '", path, "'"));
  std::stringstream text;
  text << file.rdbuf();
  return ParseModelConfigText(text.str(), path);
}

}  // namespace convoy::repository
