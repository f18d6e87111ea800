// Calibration table files; see calibration_table.h.
#include "server/repository/calibration_table.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "kernels/common/status_macros.h"
#include "server/repository/yaml_fields.h"

namespace convoy::repository {
namespace {

using runtime::CalibrationTable;
using runtime::LayerCalibration;
using runtime::TensorQuantization;

constexpr char kFormat[] = "convoy_calibration_table";
constexpr char kUnsigned[] = "uint8_asymmetric";
constexpr char kSigned[] = "int8_symmetric";

// A double-quoted YAML scalar (tensor names hold '/', ':' and '.').
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Float(double v) { return absl::StrFormat("%.9g", v); }

// A positive finite number at `key`.
absl::StatusOr<double> PositiveFinite(const YamlMap& m, const std::string& key) {
  CONVOY_ASSIGN_OR_RETURN(double v, m.Double(key));
  if (!(v > 0) || !std::isfinite(v)) return m.Error(key, absl::StrCat("must be positive and finite, got ", v));
  return v;
}

absl::StatusOr<TensorQuantization> ParseTensor(const std::string& name, const YAML::Node& node, bool is_signed,
                                               const std::string& source) {
  CONVOY_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(node, absl::StrCat("tensors['", name, "']"), source));
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"min", "max", "lo", "hi", "scale", "zero_point"}));
  TensorQuantization t;
  t.name = name;
  t.is_signed = is_signed;
  CONVOY_ASSIGN_OR_RETURN(double min, m.Double("min", 0.0));
  CONVOY_ASSIGN_OR_RETURN(double max, m.Double("max", 0.0));
  CONVOY_ASSIGN_OR_RETURN(double lo, m.Double("lo", min));
  CONVOY_ASSIGN_OR_RETURN(double hi, m.Double("hi", max));
  CONVOY_ASSIGN_OR_RETURN(double scale, PositiveFinite(m, "scale"));
  CONVOY_ASSIGN_OR_RETURN(int64_t zero_point, m.Int("zero_point"));
  if (zero_point < 0 || zero_point > (is_signed ? 0 : 255)) {
    return m.Error("zero_point", is_signed ? absl::StrCat("must be 0 for int8_symmetric activations, got ", zero_point)
                                           : absl::StrCat("must be in 0..255 for uint8_asymmetric activations, got ",
                                                          zero_point));
  }
  t.min = static_cast<float>(min), t.max = static_cast<float>(max);
  t.lo = static_cast<float>(lo), t.hi = static_cast<float>(hi);
  t.scale = static_cast<float>(scale);
  t.zero_point = static_cast<int>(zero_point);
  return t;
}

absl::StatusOr<LayerCalibration> ParseLayer(const std::string& name, const YAML::Node& node,
                                            const std::string& source) {
  CONVOY_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(node, absl::StrCat("layers['", name, "']"), source));
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"precision", "add", "op", "weight_scales", "reason"}));
  LayerCalibration layer;
  layer.name = name;
  CONVOY_ASSIGN_OR_RETURN(std::string precision, m.String("precision"));
  if (precision != "int8" && precision != "fp32") {
    return m.Error("precision", absl::StrCat("expected int8 or fp32, got '", precision, "'"));
  }
  layer.int8 = precision == "int8";
  // A residual add says `add: true` (as tables always have); the classifier's tail says `op: global_average_pool`
  // or `op: gemm`; a convolution says neither.
  CONVOY_ASSIGN_OR_RETURN(const bool add, m.Bool("add", false));
  CONVOY_ASSIGN_OR_RETURN(const std::string op, m.String("op", add ? "residual_add" : "conv"));
  if (op == "conv") {
    layer.kind = runtime::CalibratedLayerKind::kConv;
  } else if (op == "residual_add") {
    layer.kind = runtime::CalibratedLayerKind::kResidualAdd;
  } else if (op == "global_average_pool") {
    layer.kind = runtime::CalibratedLayerKind::kGlobalAveragePool;
  } else if (op == "gemm") {
    layer.kind = runtime::CalibratedLayerKind::kGemm;
  } else {
    return m.Error("op", absl::StrCat("expected conv, residual_add, global_average_pool or gemm, got '", op, "'"));
  }
  if (add != (layer.kind == runtime::CalibratedLayerKind::kResidualAdd)) {
    return m.Error("add", absl::StrCat("says ", add ? "true" : "false", " for a layer whose op is ", op));
  }
  CONVOY_ASSIGN_OR_RETURN(layer.reason, m.String("reason", std::string()));
  if (m.Has("weight_scales")) {
    if (!layer.has_weights()) {
      return m.Error("weight_scales", absl::StrCat("a ", runtime::CalibratedLayerKindName(layer.kind),
                                                   " has no weights"));
    }
    CONVOY_ASSIGN_OR_RETURN(auto items, m.Sequence("weight_scales"));
    for (const auto& [item, path] : items) {
      CONVOY_ASSIGN_OR_RETURN(double v, YamlToDouble(item, path, source));
      if (!(v > 0) || !std::isfinite(v)) {
        return YamlError(source, item, path, absl::StrCat("must be positive and finite, got ", v));
      }
      layer.weight_scales.push_back(static_cast<float>(v));
    }
  } else if (layer.int8 && layer.has_weights()) {
    return m.Error("weight_scales", absl::StrCat("an int8 ", runtime::CalibratedLayerKindName(layer.kind),
                                                 " needs its weight scales (one per output channel)"));
  }
  return layer;
}

}  // namespace

std::string FormatCalibrationTable(const CalibrationTable& table) {
  std::ostringstream out;
  out << "# Convoy calibration table, written by `convoy calibrate`; read by `precision: int8` (docs/model_config.md).\n"
      << "# Activations per tensor (min/max: seen; lo/hi: the range the method chose), weights per output channel.\n"
      << "format: " << kFormat << "\nversion: 1\n"
      << "model: " << Quoted(table.model) << "\n"
      << "method: " << runtime::CalibrationMethodName(table.method) << "\n";
  if (table.method == runtime::CalibrationMethod::kPercentile) out << "percentile: " << Float(table.percentile) << "\n";
  out << "activations: " << (table.signed_activations ? kSigned : kUnsigned) << "\n"
      << "weights: int8_symmetric_per_channel\n"
      << "samples: " << table.samples << "\n"
      << "tensors:" << (table.tensors.empty() ? " {}" : "") << "\n";
  for (const TensorQuantization& t : table.tensors) {
    out << "  " << Quoted(t.name) << ": {min: " << Float(t.min) << ", max: " << Float(t.max) << ", lo: " << Float(t.lo)
        << ", hi: " << Float(t.hi) << ", scale: " << Float(t.scale) << ", zero_point: " << t.zero_point << "}\n";
  }
  out << "layers:" << (table.layers.empty() ? " {}" : "") << "\n";
  for (const LayerCalibration& l : table.layers) {
    out << "  " << Quoted(l.name) << ": {precision: " << (l.int8 ? "int8" : "fp32");
    if (l.kind == runtime::CalibratedLayerKind::kResidualAdd) out << ", add: true";
    if (l.kind == runtime::CalibratedLayerKind::kGlobalAveragePool) out << ", op: global_average_pool";
    if (l.kind == runtime::CalibratedLayerKind::kGemm) out << ", op: gemm";
    if (!l.reason.empty()) out << ", reason: " << Quoted(l.reason);
    if (!l.weight_scales.empty()) {
      out << ", weight_scales: [";
      for (size_t i = 0; i < l.weight_scales.size(); ++i) out << (i ? ", " : "") << Float(l.weight_scales[i]);
      out << "]";
    }
    out << "}\n";
  }
  return out.str();
}

absl::Status WriteCalibrationTable(const std::string& path, const CalibrationTable& table) {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  if (!file) return absl::PermissionDeniedError(absl::StrCat("cannot write the calibration table ", path));
  file << FormatCalibrationTable(table);
  file.close();
  if (!file) return absl::DataLossError(absl::StrCat("writing the calibration table ", path, " failed"));
  return absl::OkStatus();
}

absl::StatusOr<CalibrationTable> ParseCalibrationTable(const std::string& text, const std::string& source) {
  CONVOY_ASSIGN_OR_RETURN(YAML::Node root, LoadYaml(text, source));
  CONVOY_ASSIGN_OR_RETURN(YamlMap m, YamlMap::Create(root, "", source));
  CONVOY_RETURN_IF_ERROR(m.CheckFields({"format", "version", "model", "method", "percentile", "activations", "weights",
                                        "samples", "tensors", "layers"}));
  CONVOY_ASSIGN_OR_RETURN(std::string format, m.String("format"));
  if (format != kFormat) return m.Error("format", absl::StrCat("expected ", kFormat, ", got '", format, "'"));
  CONVOY_ASSIGN_OR_RETURN(int64_t version, m.Int("version"));
  if (version != 1) return m.Error("version", absl::StrCat("this Convoy reads version 1, got ", version));
  CalibrationTable table;
  CONVOY_ASSIGN_OR_RETURN(table.model, m.String("model", std::string()));
  CONVOY_ASSIGN_OR_RETURN(std::string method, m.String("method"));
  auto parsed = runtime::ParseCalibrationMethod(method);
  if (!parsed.ok()) return m.Error("method", std::string(parsed.status().message()));
  table.method = *parsed;
  CONVOY_ASSIGN_OR_RETURN(table.percentile, m.Double("percentile", 99.99));
  CONVOY_ASSIGN_OR_RETURN(std::string activations, m.String("activations"));
  if (activations != kUnsigned && activations != kSigned) {
    return m.Error("activations", absl::StrCat("expected ", kUnsigned, " or ", kSigned, ", got '", activations, "'"));
  }
  table.signed_activations = activations == kSigned;
  CONVOY_ASSIGN_OR_RETURN(std::string weights, m.String("weights", "int8_symmetric_per_channel"));
  if (weights != "int8_symmetric_per_channel") {
    return m.Error("weights", absl::StrCat("expected int8_symmetric_per_channel, got '", weights, "'"));
  }
  CONVOY_ASSIGN_OR_RETURN(table.samples, m.Int("samples", 0));
  CONVOY_ASSIGN_OR_RETURN(YamlMap tensors, m.Map("tensors"));
  CONVOY_ASSIGN_OR_RETURN(auto tensor_entries, tensors.Entries());
  for (const auto& [name, node] : tensor_entries) {
    CONVOY_ASSIGN_OR_RETURN(TensorQuantization t, ParseTensor(name, node, table.signed_activations, source));
    table.tensors.push_back(std::move(t));
  }
  CONVOY_ASSIGN_OR_RETURN(YamlMap layers, m.Map("layers"));
  CONVOY_ASSIGN_OR_RETURN(auto layer_entries, layers.Entries());
  for (const auto& [name, node] : layer_entries) {
    CONVOY_ASSIGN_OR_RETURN(LayerCalibration l, ParseLayer(name, node, source));
    table.layers.push_back(std::move(l));
  }
  return table;
}

absl::StatusOr<CalibrationTable> ReadCalibrationTable(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return absl::NotFoundError(absl::StrCat("calibration table ", path, " not found"));
  std::stringstream text;
  text << file.rdbuf();
  return ParseCalibrationTable(text.str(), path);
}

}  // namespace convoy::repository
