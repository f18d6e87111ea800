#include "server/repository/onnx_resize_import.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/status_macros.h"

namespace convoy::repository {
namespace {

using runtime::ResizeAttrs;
using runtime::Shape;

// The opset each Resize attribute appeared at (Upsample's are checked apart).
struct AttributeSince {
  const char* name;
  int64_t since;
};
constexpr AttributeSince kResizeAttributes[] = {
    {"mode", 10},          {"coordinate_transformation_mode", 11}, {"cubic_coeff_a", 11},
    {"exclude_outside", 11}, {"extrapolation_value", 11},          {"nearest_mode", 11},
    {"antialias", 18},     {"axes", 18},                           {"keep_aspect_ratio_policy", 18},
};

absl::Status Unsupported(const OnnxAttributes& a, const std::string& what) {
  return absl::UnimplementedError(absl::StrCat(a.label(), ": ", what));
}

absl::Status CheckAttributes(const onnx::NodeProto& n, const OnnxAttributes& a, int64_t opset, bool upsample) {
  for (const auto& attr : n.attribute()) {
    if (upsample) {
      if (attr.name() == "mode" || (attr.name() == "scales" && opset < 9)) continue;
      return Unsupported(a, absl::StrCat("attribute '", attr.name(), "' is not part of Upsample at opset ", opset));
    }
    bool known = false;
    for (const AttributeSince& s : kResizeAttributes) {
      if (attr.name() != s.name) continue;
      known = true;
      if (opset < s.since) {
        return Unsupported(a, absl::StrCat("attribute '", attr.name(), "' is not part of Resize at opset ", opset,
                                           " (it appears at opset ", s.since, ")"));
      }
    }
    if (!known) return Unsupported(a, absl::StrCat("attribute '", attr.name(), "' is not supported"));
  }
  return absl::OkStatus();
}

absl::Status ReadMode(const OnnxAttributes& a, int64_t opset, bool upsample, ResizeAttrs& r) {
  CONVOY_ASSIGN_OR_RETURN(std::string mode, a.String("mode", "nearest"));
  if (mode == "nearest") {
    r.mode = runtime::ResizeMode::kNearest;
  } else if (mode == "linear") {
    r.mode = runtime::ResizeMode::kLinear;
  } else if (mode == "cubic" && !upsample && opset >= 11) {
    r.mode = runtime::ResizeMode::kCubic;
  } else {
    return Unsupported(a, absl::StrCat("attribute 'mode' value '", mode, "' (opset ", opset, ") is not supported (",
                                       upsample || opset < 11 ? "nearest and linear are" : "nearest, linear and cubic are",
                                       ")"));
  }
  return absl::OkStatus();
}

absl::Status ReadCoordinates(const OnnxAttributes& a, int64_t opset, ResizeAttrs& r) {
  CONVOY_ASSIGN_OR_RETURN(std::string mode, a.String("coordinate_transformation_mode", "half_pixel"));
  using C = runtime::ResizeCoordinates;
  if (mode == "half_pixel") {
    r.coordinates = C::kHalfPixel;
  } else if (mode == "half_pixel_symmetric" && opset >= 19) {
    r.coordinates = C::kHalfPixelSymmetric;
  } else if (mode == "pytorch_half_pixel") {
    r.coordinates = C::kPytorchHalfPixel;
  } else if (mode == "align_corners") {
    r.coordinates = C::kAlignCorners;
  } else if (mode == "asymmetric") {
    r.coordinates = C::kAsymmetric;
  } else if (mode == "tf_crop_and_resize") {
    r.coordinates = C::kTfCropAndResize;
  } else {
    return Unsupported(a, absl::StrCat("attribute 'coordinate_transformation_mode' value '", mode, "' (opset ", opset,
                                       ") is not supported (half_pixel, pytorch_half_pixel, align_corners, "
                                       "asymmetric, tf_crop_and_resize", opset >= 19 ? ", half_pixel_symmetric" : "",
                                       " are)"));
  }
  return absl::OkStatus();
}

absl::Status ReadNearest(const OnnxAttributes& a, int64_t opset, ResizeAttrs& r) {
  CONVOY_ASSIGN_OR_RETURN(std::string mode, a.String("nearest_mode", "round_prefer_floor"));
  using N = runtime::ResizeNearest;
  if (mode == "round_prefer_floor") {
    r.nearest = N::kRoundPreferFloor;
  } else if (mode == "round_prefer_ceil") {
    r.nearest = N::kRoundPreferCeil;
  } else if (mode == "floor") {
    r.nearest = N::kFloor;
  } else if (mode == "ceil") {
    r.nearest = N::kCeil;
  } else {
    return Unsupported(a, absl::StrCat("attribute 'nearest_mode' value '", mode, "' (opset ", opset,
                                       ") is not supported (round_prefer_floor, round_prefer_ceil, floor, ceil are)"));
  }
  return absl::OkStatus();
}

// Per-axis values of the whole rank from the values of `axes` (or of every axis when axes is empty).
template <typename T>
std::vector<T> OverAllAxes(const std::vector<T>& values, const std::vector<int64_t>& axes, std::vector<T> defaults) {
  if (axes.empty()) return values;
  for (size_t i = 0; i < axes.size(); ++i) defaults[axes[i]] = values[i];
  return defaults;
}

// The axes attribute (opset 18+), normalised; empty for every axis.
absl::StatusOr<std::vector<int64_t>> ReadAxes(const OnnxAttributes& a, int64_t rank) {
  CONVOY_ASSIGN_OR_RETURN(std::vector<int64_t> axes, a.Ints("axes", {}));
  std::set<int64_t> seen;
  for (int64_t& axis : axes) {
    if (axis < -rank || axis >= rank) {
      return a.Error(absl::StrCat("attribute 'axes': axis ", axis, " is out of range for rank ", rank));
    }
    if (axis < 0) axis += rank;
    if (!seen.insert(axis).second) return a.Error(absl::StrCat("attribute 'axes': axis ", axis, " is listed twice"));
  }
  return axes;
}

}  // namespace

absl::StatusOr<ResizeAttrs> ImportResizeAttrs(const onnx::NodeProto& n, const OnnxAttributes& a, int64_t opset,
                                              const Shape& x, const OnnxResizeInputs& inputs) {
  const bool upsample = n.op_type() == "Upsample";
  if (upsample && opset >= 10) {
    return Unsupported(a, absl::StrCat("Upsample is deprecated at opset ", opset, " (from opset 10 models use Resize)"));
  }
  CONVOY_RETURN_IF_ERROR(CheckAttributes(n, a, opset, upsample));
  ResizeAttrs r;
  CONVOY_RETURN_IF_ERROR(ReadMode(a, opset, upsample, r));
  if (upsample || opset < 11) {
    // Upsample and Resize-10: asymmetric coordinates, nearest rounds down when upscaling and up when downscaling.
    r.coordinates = runtime::ResizeCoordinates::kAsymmetric;
    r.nearest = runtime::ResizeNearest::kSimple;
  } else {
    CONVOY_RETURN_IF_ERROR(ReadCoordinates(a, opset, r));
    CONVOY_RETURN_IF_ERROR(ReadNearest(a, opset, r));
    CONVOY_ASSIGN_OR_RETURN(r.cubic_a, a.Float("cubic_coeff_a", -0.75f));
    CONVOY_ASSIGN_OR_RETURN(int64_t exclude_outside, a.Int("exclude_outside", 0));
    r.exclude_outside = exclude_outside != 0;
    CONVOY_ASSIGN_OR_RETURN(r.extrapolation_value, a.Float("extrapolation_value", 0.0f));
    CONVOY_ASSIGN_OR_RETURN(int64_t antialias, a.Int("antialias", 0));
    r.antialias = antialias != 0 && r.mode != runtime::ResizeMode::kNearest;  // nearest has no filter to widen
  }
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank != 4) {
    return Unsupported(a, absl::StrCat("only 4-D inputs [N,C,H,W] are resized, got ", runtime::ShapeToString(x)));
  }
  std::vector<int64_t> axes;
  if (!upsample && opset >= 18) {
    CONVOY_ASSIGN_OR_RETURN(axes, ReadAxes(a, rank));
  }
  const size_t count = axes.empty() ? static_cast<size_t>(rank) : axes.size();

  // Scales (Upsample-7's attribute, else the input) or sizes: exactly one.
  std::vector<float> scales;
  std::vector<int64_t> sizes;
  if (upsample && opset < 9) {
    CONVOY_ASSIGN_OR_RETURN(scales, a.Floats("scales"));
  } else {
    if (inputs.scales && inputs.scales->size() > 0) {
      if (inputs.scales->is_int()) {
        return a.Error(absl::StrCat("the scales must be a float tensor, got ", inputs.scales->Describe()));
      }
      scales = inputs.scales->floats;
    }
    if (inputs.sizes && inputs.sizes->size() > 0) {
      if (!inputs.sizes->is_int()) {
        return a.Error(absl::StrCat("the sizes must be an integer tensor, got ", inputs.sizes->Describe()));
      }
      sizes = inputs.sizes->ints;
    }
  }
  if (scales.empty() == sizes.empty()) {
    return a.Error(scales.empty() ? "neither scales nor sizes is given" : "both scales and sizes are given");
  }
  if (!scales.empty() && scales.size() != count) {
    return a.Error(absl::StrCat("scales has ", scales.size(), " values for ", count, " axes"));
  }
  if (!sizes.empty() && sizes.size() != count) {
    return a.Error(absl::StrCat("sizes has ", sizes.size(), " values for ", count, " axes"));
  }

  // The crop of tf_crop_and_resize: starts then ends, per listed axis.
  std::vector<float> roi_start(rank, 0.0f), roi_end(rank, 1.0f);
  if (r.coordinates == runtime::ResizeCoordinates::kTfCropAndResize) {
    if (!inputs.roi || inputs.roi->size() != static_cast<int64_t>(2 * count) || inputs.roi->is_int()) {
      return a.Error(absl::StrCat("tf_crop_and_resize needs a constant float roi of ", 2 * count, " values, got ",
                                  inputs.roi ? inputs.roi->Describe() : "none"));
    }
    const std::vector<float>& roi = inputs.roi->floats;
    roi_start = OverAllAxes(std::vector<float>(roi.begin(), roi.begin() + count), axes, roi_start);
    roi_end = OverAllAxes(std::vector<float>(roi.begin() + count, roi.end()), axes, roi_end);
  }

  // Per axis: the scale, the resized length and the output extent (ONNX's rules, in double as its reference).
  std::vector<double> scale(rank, 1.0), length(rank);
  std::vector<int64_t> out(x.begin(), x.end());
  for (int64_t d = 0; d < rank; ++d) length[d] = static_cast<double>(x[d]);
  if (!scales.empty()) {
    const std::vector<float> all = OverAllAxes(scales, axes, std::vector<float>(rank, 1.0f));
    for (int64_t d = 0; d < rank; ++d) {
      if (!(all[d] > 0.0f)) return a.Error(absl::StrCat("scale ", all[d], " of axis ", d, " must be positive"));
      scale[d] = all[d];
      if (x[d] == runtime::kBatch) continue;
      length[d] = x[d] * scale[d];
      out[d] = static_cast<int64_t>(std::floor(length[d] * (roi_end[d] - roi_start[d])));
    }
  } else {
    CONVOY_ASSIGN_OR_RETURN(std::string policy, a.String("keep_aspect_ratio_policy", "stretch"));
    if (policy != "stretch" && policy != "not_larger" && policy != "not_smaller") {
      return Unsupported(a, absl::StrCat("attribute 'keep_aspect_ratio_policy' value '", policy, "' (opset ", opset,
                                         ") is not supported (stretch, not_larger, not_smaller are)"));
    }
    std::vector<int64_t> all = OverAllAxes(sizes, axes, out);
    std::vector<int64_t> listed = axes;
    if (listed.empty()) {
      for (int64_t d = 0; d < rank; ++d) listed.push_back(d);
    }
    for (int64_t d : listed) {
      if (x[d] == runtime::kBatch) {
        if (all[d] != kSymbolicBatchValue) {
          return Unsupported(a, absl::StrCat("sizes resize the dynamic batch axis to ", all[d],
                                             "; Convoy resizes H and W of [N,C,H,W] only"));
        }
        all[d] = runtime::kBatch;
        continue;
      }
      if (all[d] < 1) return a.Error(absl::StrCat("size ", all[d], " of axis ", d, " must be positive"));
      scale[d] = static_cast<double>(all[d]) / x[d];
    }
    if (policy != "stretch") {
      double common = policy == "not_larger" ? 1e300 : 0.0;
      for (int64_t d : listed) {
        if (x[d] == runtime::kBatch) continue;
        common = policy == "not_larger" ? std::min(common, scale[d]) : std::max(common, scale[d]);
      }
      for (int64_t d : listed) {
        if (x[d] == runtime::kBatch) continue;
        scale[d] = common;
        all[d] = static_cast<int64_t>(common * x[d] + 0.5);  // ONNX rounds half up here
      }
    }
    for (int64_t d = 0; d < rank; ++d) {
      out[d] = all[d];
      if (x[d] != runtime::kBatch) length[d] = policy == "stretch" ? static_cast<double>(out[d]) : scale[d] * x[d];
    }
  }
  for (int64_t d = 0; d < 2; ++d) {
    if (scale[d] != 1.0 || out[d] != x[d]) {
      return Unsupported(a, absl::StrCat("resizing axis ", d, d == 0 ? " (the batch)" : " (the channels)", " of ",
                                         runtime::ShapeToString(x), " to ", out[d], " (scale ", scale[d],
                                         ") is not supported; Convoy resizes H and W of [N,C,H,W] only"));
    }
  }
  if (out[2] < 1 || out[3] < 1) {
    return a.Error(absl::StrCat("the output ", out[2], "x", out[3], " of ", runtime::ShapeToString(x), " is empty"));
  }
  r.out_h = out[2], r.out_w = out[3];
  r.scale_h = static_cast<float>(scale[2]), r.scale_w = static_cast<float>(scale[3]);
  r.length_h = static_cast<float>(length[2]), r.length_w = static_cast<float>(length[3]);
  r.roi_top = roi_start[2], r.roi_left = roi_start[3], r.roi_bottom = roi_end[2], r.roi_right = roi_end[3];
  return r;
}

}  // namespace convoy::repository
