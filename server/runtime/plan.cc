// Precision names, tensor sizes and the plan's human-readable dump (see plan.h).
#include "server/runtime/plan.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace convoy::runtime {

absl::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kFp32: return "fp32";
    case Precision::kFp16: return "fp16";
    case Precision::kBf16: return "bf16";
    case Precision::kTf32: return "tf32";
    case Precision::kAuto: return "auto";
    case Precision::kInt8: return "int8";
  }
  return "unknown";
}

Precision ResolvePrecision(Precision precision, bool bf16_compute) {
  if (precision != Precision::kAuto) return precision;
  return bf16_compute ? Precision::kBf16 : Precision::kFp32;
}

absl::StatusOr<Precision> ParsePrecision(absl::string_view name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (Precision p :
       {Precision::kFp32, Precision::kFp16, Precision::kBf16, Precision::kTf32, Precision::kAuto, Precision::kInt8}) {
    if (lower == PrecisionName(p)) return p;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown precision '", name, "'; expected fp32, fp16, bf16, tf32, int8 or auto"));
}

DataType ComputeDataType(Precision precision) {
  switch (precision) {
    case Precision::kFp16: return DataType::kFloat16;
    case Precision::kBf16: return DataType::kBFloat16;
    default: return DataType::kFloat32;
  }
}

size_t PlanTensor::Bytes(int batch_size) const {
  return static_cast<size_t>(NumElements(shape, batch_size)) * DataTypeSize(dtype);
}

TensorDesc PlanTensor::Desc(int batch_size) const { return TensorDesc(dtype, Dims(batch_size), layout); }

std::string ExecutionPlan::QuantizationSummary() const {
  if (quantized_layers_.empty()) return "";
  int convs = 0, convs_int8 = 0, adds = 0, adds_int8 = 0, adds_rounded_once = 0, tails = 0, tails_int8 = 0, fp32 = 0;
  const QuantizedLayerChoice* first_fp32 = nullptr;
  for (const QuantizedLayerChoice& layer : quantized_layers_) {
    if (layer.pool_or_gemm) {
      ++tails;
      tails_int8 += layer.int8;
    } else if (layer.add) {
      ++adds;
      adds_int8 += layer.int8;
      adds_rounded_once += layer.rounded_once;
    } else {
      ++convs;
      convs_int8 += layer.int8;
    }
    if (!layer.int8) {
      ++fp32;
      if (first_fp32 == nullptr) first_fp32 = &layer;
    }
  }
  std::string out = absl::StrCat(convs_int8, " of ", convs, " quantized convolutions");
  if (adds > 0) absl::StrAppend(&out, " and ", adds_int8, " of ", adds, " quantized adds");
  absl::StrAppend(&out, " run INT8");
  if (adds_rounded_once > 0) {
    absl::StrAppend(&out, " (", adds_rounded_once, " of the adds fused and rounded once: int8_residual_add ",
                    "single_rounding)");
  }
  if (tails > 0) absl::StrAppend(&out, ", and ", tails_int8, " of ", tails, " quantized pooling and Gemm layers");
  if (first_fp32 != nullptr) {
    absl::StrAppend(&out, "; ", fp32, " stay FP32 with simulated quantization (first: '", first_fp32->node, "': ",
                    first_fp32->reason, ")");
  }
  return out;
}

std::string ExecutionPlan::ToString(int batch_size) const {
  std::string out = absl::StrFormat("plan: %d steps, %d tensors, precision %s, layout %s, device %s\n",
                                    steps_.size(), tensors_.size(), PrecisionName(precision_),
                                    LayoutName(layout_), device_->Identity());
  absl::StrAppend(&out, "weights: ", FormatBytes(weight_bytes_), ", workspace: ", FormatBytes(workspace_bytes_),
                  "\n");
  auto tensor_names = [&](const std::vector<int>& ids) {
    return absl::StrJoin(ids, ", ", [&](std::string* s, int id) { absl::StrAppend(s, tensors_[id].name); });
  };
  absl::StrAppend(&out, "steps at batch size ", batch_size, ":\n");
  for (size_t i = 0; i < steps_.size(); ++i) {
    const PlanStep& step = *steps_[i];
    absl::StrAppendFormat(&out, "  [%d] %s (%s): %s -> %s\n      %s\n      algorithm %s", i, step.name(),
                          OpKindName(step.op()), tensor_names(step.inputs()), tensor_names(step.outputs()),
                          step.ProblemString(batch_size), step.AlgorithmName(batch_size));
    if (const double ms = step.TunedMilliseconds(batch_size); ms > 0) absl::StrAppendFormat(&out, " (tuned %.4f ms)", ms);
    if (const size_t ws = step.WorkspaceBytes(batch_size); ws > 0) absl::StrAppend(&out, ", workspace ", FormatBytes(ws));
    if (step.Verified(batch_size)) absl::StrAppend(&out, ", verified");
    absl::StrAppend(&out, "\n");
    if (const std::string launch = step.LaunchSummary(batch_size); !launch.empty()) {
      absl::StrAppend(&out, "      launch ", launch, "\n");
    }
  }
  if (!quantized_layers_.empty()) {
    absl::StrAppend(&out, "quantization: ", QuantizationSummary(), "\n");
    for (const QuantizedLayerChoice& layer : quantized_layers_) {
      absl::StrAppend(&out, "  ", layer.node, ": ",
                      layer.int8 ? (layer.rounded_once ? "INT8, rounded once" : "INT8")
                                 : absl::StrCat("FP32 (", layer.reason, ")"),
                      "\n");
    }
  }
  // Every tensor with its layout: where a blocked (NCHW8c) plan keeps activations blocked, and where it reorders.
  absl::StrAppend(&out, "tensors at batch size ", batch_size, " (dims, dtype, layout, bytes):\n");
  for (size_t i = 0; i < tensors_.size(); ++i) {
    const PlanTensor& t = tensors_[i];
    absl::StrAppendFormat(&out, "  t%d %s %s %s %s %s%s\n", i, t.name, DimsToString(t.Dims(batch_size)),
                          DataTypeName(t.dtype), t.shape.size() == 4 ? LayoutName(t.layout) : "row-major",
                          FormatBytes(t.Bytes(batch_size)),
                          t.alias_of >= 0 ? absl::StrCat(" (view of ", tensors_[t.alias_of].name, ")") : "");
  }
  absl::StrAppend(&out, "memory plan (activation arena per batch size):\n");
  for (int b = 1; b <= max_batch_size_; ++b) {
    absl::StrAppend(&out, "  batch ", b, ": ", DescribeMemoryPlan(memory_plans_[b - 1]), "\n");
  }
  return out;
}

}  // namespace convoy::runtime
