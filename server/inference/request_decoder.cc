#include "server/inference/request_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/dtype.h"
#include "kernels/common/status_macros.h"
#include "server/imaging/image_decoder.h"
#include "server/imaging/image_resize.h"
#include "server/repository/model_manager_served_model.h"
#include "server/repository/model_names.h"

namespace convoy::infer {
namespace {

using repository::InferencePayload;
using repository::QuoteClientString;
using repository::ServedModel;
using runtime::ModelSignature;
using runtime::TensorMetadata;

constexpr int kShapeLimit = 16;  // dims printed before "..."

std::string Names(const std::vector<TensorMetadata>& tensors) {
  std::vector<std::string> names;
  for (const TensorMetadata& t : tensors) names.push_back(absl::StrCat("'", t.name, "'"));
  return absl::StrCat("[", absl::StrJoin(names, ", "), "]");
}

int FindTensor(const std::vector<TensorMetadata>& tensors, absl::string_view name) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

// The integer value of a parameter (`what` names it in errors): INVALID_ARGUMENT unless it is an integer in
// [low, high].
absl::StatusOr<int64_t> IntParameter(const ParameterValue& p, absl::string_view what, int64_t low, int64_t high,
                                     absl::string_view integer_kinds) {
  if (!p.integer.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected an integer", integer_kinds, ", got ",
                                                   p.description));
  }
  const int64_t value = *p.integer;
  if (value < low || value > high) {
    const std::string range = high == INT64_MAX ? absl::StrCat(">= ", low) : absl::StrCat(low, "..", high);
    return absl::InvalidArgumentError(absl::StrCat(what, ": expected ", range, ", got ", p.description));
  }
  return value;
}

// Shape check: [batch, dims...] for a batching model, dims otherwise. Returns the batch size (1 without batching).
absl::StatusOr<int64_t> CheckShape(const InputTensorView& input, const TensorMetadata& t,
                                   const ModelSignature& model) {
  const int max_batch = model.max_batch_size;
  const absl::Span<const int64_t> shape(input.shape);
  bool matches = shape.size() == t.dims.size();
  for (size_t i = (max_batch > 0 ? 1 : 0); matches && i < shape.size(); ++i) matches = shape[i] == t.dims[i];
  if (!matches) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected shape ", DimsToString(t.dims),
                                                   ", got ", ShapeString(shape)));
  }
  if (max_batch == 0) return 1;
  if (shape[0] < 1 || shape[0] > max_batch) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': batch size ", shape[0],
                                                   " is outside 1..", max_batch, " (max_batch_size of model '",
                                                   model.name, "')"));
  }
  return shape[0];
}

// The element count of a shape that passed CheckShape; INVALID_ARGUMENT if a dim is negative or the count
// overflows (only a model declaring such dims could let one through).
absl::StatusOr<int64_t> ElementCount(const InputTensorView& input, const TensorMetadata& t) {
  int64_t count = 1;
  for (int64_t d : input.shape) {
    if (d < 0 || (d > 0 && count > INT64_MAX / d)) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': shape ", ShapeString(input.shape),
                                                     " has no valid element count"));
    }
    count *= d;
  }
  return count;
}

// The `count` BYTES elements of `input`: as the protocol delivered them, or parsed from Triton's wire form in `raw`
// (each a 4-byte little-endian length and its bytes). Raw bytes in several pieces are joined in `scratch` first
// (the elements then point into it).
absl::StatusOr<std::vector<absl::string_view>> BytesElements(const InputTensorView& input, const TensorMetadata& t,
                                                             int64_t count, std::string* scratch) {
  const std::string expected = absl::StrCat("input '", t.name, "': expected ", count, " BYTES element",
                                            count == 1 ? "" : "s", " for shape ", ShapeString(input.shape));
  if (input.bytes_elements.has_value()) {
    if (static_cast<int64_t>(input.bytes_elements->size()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(expected, ", got ", input.bytes_elements->size()));
    }
    return *input.bytes_elements;
  }
  if (input.decode || !input.raw.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(expected, " (raw BYTES data: each element a 4-byte little-endian "
                                                   "length and its bytes), got no raw data"));
  }
  std::vector<absl::string_view> elements;
  absl::string_view raw;
  if (std::optional<absl::string_view> one = input.raw->Contiguous(); one.has_value()) {
    raw = *one;
  } else {
    *scratch = input.raw->Flatten();
    raw = *scratch;
  }
  while (!raw.empty()) {
    if (raw.size() < 4) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': BYTES element ", elements.size(),
                                                     " has a truncated length (", raw.size(), " of 4 bytes)"));
    }
    const auto* p = reinterpret_cast<const unsigned char*>(raw.data());
    const uint32_t length = p[0] | p[1] << 8 | p[2] << 16 | static_cast<uint32_t>(p[3]) << 24;
    raw.remove_prefix(4);
    if (length > raw.size()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': BYTES element ", elements.size(),
                                                     " declares ", length, " bytes but only ", raw.size(),
                                                     " are left"));
    }
    elements.push_back(raw.substr(0, length));
    raw.remove_prefix(length);
  }
  if (static_cast<int64_t>(elements.size()) != count) {
    return absl::InvalidArgumentError(absl::StrCat(expected, ", got ", elements.size()));
  }
  return elements;
}

// Photos for an input with encoded_image: one JPEG or PNG per batch item, shape [batch] or [batch, 1] ([] or [1]
// without batching), each decoded, cropped and resized into the input's [H, W, 3] pixels (server/imaging).
absl::StatusOr<int64_t> DecodePhotos(const InputTensorView& input, const TensorMetadata& t,
                                     const ModelSignature& model, HostBuffer* out) {
  const std::vector<int64_t>& shape = input.shape;
  int64_t batch = 1;
  bool fits = false;
  if (model.max_batch_size > 0) {
    fits = shape.size() == 1 || (shape.size() == 2 && shape[1] == 1);
    if (fits) batch = shape[0];
  } else {
    fits = shape.empty() || (shape.size() == 1 && shape[0] == 1);
  }
  if (!fits) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", t.name, "': photos (BYTES) take shape ", model.max_batch_size > 0 ? "[batch] or [batch, 1]" : "[] or [1]",
        ", one encoded image per batch item, got ", ShapeString(shape)));
  }
  if (model.max_batch_size > 0 && (batch < 1 || batch > model.max_batch_size)) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': batch size ", batch, " is outside 1..",
                                                   model.max_batch_size, " (max_batch_size of model '", model.name,
                                                   "')"));
  }
  std::string joined;  // the photos' bytes when they came in pieces
  CONVOY_ASSIGN_OR_RETURN(const std::vector<absl::string_view> photos, BytesElements(input, t, batch, &joined));
  const size_t n = t.dims.size();
  const int height = static_cast<int>(t.dims[n - 3]), width = static_cast<int>(t.dims[n - 2]);
  const repository::EncodedImageConfig& config = *t.encoded_image;
  imaging::ImageLimits limits;
  limits.max_bytes = config.max_bytes;
  limits.max_pixels = config.max_pixels;
  limits.max_dimension = config.max_dimension;
  const size_t item_bytes = size_t{3} * height * width;
  CONVOY_ASSIGN_OR_RETURN(*out, HostBuffer::Allocate(item_bytes * batch));
  for (int64_t i = 0; i < batch; ++i) {
    absl::StatusOr<imaging::RgbImage> image = imaging::DecodeImage(photos[i], limits);
    absl::Status status = image.ok() ? imaging::CenterCropAndResize(*image, height, width, config.crop_fraction,
                                                                     out->as<uint8_t>() + i * item_bytes)
                                     : image.status();
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': ",
                                                     batch > 1 || model.max_batch_size > 0
                                                         ? absl::StrCat("batch item ", i, ": ")
                                                         : "",
                                                     status.message()));
    }
  }
  return batch;
}

// Decodes `input` (model input `t`) into `out`; returns its batch size.
absl::StatusOr<int64_t> DecodeInput(const InputTensorView& input, const TensorMetadata& t,
                                    const ModelSignature& model, HostBuffer* out) {
  if (t.encoded_image.has_value() && input.datatype == "BYTES") return DecodePhotos(input, t, model, out);
  if (input.datatype != DataTypeName(t.datatype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "input '", t.name, "': expected datatype ", DataTypeName(t.datatype),
        t.encoded_image.has_value() ? " (pixels) or BYTES (JPEG / PNG photos)" : "", ", got ",
        QuoteClientString(input.datatype)));
  }
  CONVOY_ASSIGN_OR_RETURN(const int64_t batch, CheckShape(input, t, model));
  CONVOY_ASSIGN_OR_RETURN(const int64_t count, ElementCount(input, t));
  if (input.decode) {
    CONVOY_RETURN_IF_ERROR(input.decode(t, count, out));
    return batch;
  }
  const size_t bytes = static_cast<size_t>(count) * DataTypeSize(t.datatype);
  const RawBytes none;
  const RawBytes& raw = input.raw.has_value() ? *input.raw : none;
  if (raw.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat("input '", t.name, "': expected ", bytes, " bytes for shape ",
                                                   ShapeString(input.shape), " ", DataTypeName(t.datatype),
                                                   ", got ", raw.size()));
  }
  CONVOY_ASSIGN_OR_RETURN(*out, HostBuffer::Allocate(bytes));
  raw.CopyTo(static_cast<char*>(out->data()));
  return batch;
}

// HTTP's photo body: the one photo goes to the model's one input, which must take photos.
absl::Status DecodePhotoBody(const RequestView& request, const ModelSignature& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& inputs = model.inputs;
  if (inputs.size() != 1 || !inputs[0].encoded_image.has_value() || request.inputs.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model '", model.name, "' does not take a photo as the request body: that needs exactly one input, with "
        "encoded_image in its config (docs/model_config.md); it has inputs ", Names(inputs),
        inputs.size() == 1 ? " without encoded_image" : ""));
  }
  InputTensorView photo = request.inputs[0];
  photo.name = inputs[0].name;
  photo.datatype = "BYTES";
  photo.shape = model.max_batch_size > 0 ? std::vector<int64_t>{1} : std::vector<int64_t>{};
  decoded.payload->inputs.resize(1);
  CONVOY_ASSIGN_OR_RETURN(const int64_t batch, DecodePhotos(photo, inputs[0], model, &decoded.payload->inputs[0]));
  decoded.payload->batch_size = batch;
  decoded.spec.batch_size = batch;
  return absl::OkStatus();
}

absl::Status DecodeInputs(const RequestView& request, const ModelSignature& model, DecodedRequest& decoded) {
  if (request.photo_body) return DecodePhotoBody(request, model, decoded);
  const std::vector<TensorMetadata>& inputs = model.inputs;
  decoded.payload->inputs.resize(inputs.size());
  std::vector<int> given_at(inputs.size(), -1);  // request input index of each model input
  int64_t batch = -1;
  int batch_from = -1;
  for (int i = 0; i < static_cast<int>(request.inputs.size()); ++i) {
    const absl::string_view name = request.inputs[i].name;
    const int index = FindTensor(inputs, name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected input ", QuoteClientString(name), ": model '",
                                                     model.name, "' has inputs ", Names(inputs)));
    }
    if (given_at[index] >= 0) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "' is given twice (request inputs ",
                                                     given_at[index], " and ", i, ")"));
    }
    given_at[index] = i;
    CONVOY_ASSIGN_OR_RETURN(const int64_t b, DecodeInput(request.inputs[i], inputs[index], model,
                                                         &decoded.payload->inputs[index]));
    if (batch >= 0 && b != batch) {
      return absl::InvalidArgumentError(absl::StrCat("input '", name, "': batch size ", b, " differs from input '",
                                                     request.inputs[batch_from].name, "' (batch size ", batch,
                                                     ")"));
    }
    batch = b;
    batch_from = i;
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (given_at[i] < 0) {
      return absl::InvalidArgumentError(absl::StrCat("missing input '", inputs[i].name, "' of model '", model.name,
                                                     "' (expected ", DimsToString(inputs[i].dims), " ",
                                                     DataTypeName(inputs[i].datatype), ")"));
    }
  }
  decoded.payload->batch_size = batch;
  decoded.spec.batch_size = batch;
  return absl::OkStatus();
}

// Elements of one batch item of `t` (its dims after the batch dimension when the model batches).
int64_t ItemElements(const TensorMetadata& t, const ModelSignature& model) {
  int64_t n = 1;
  for (size_t d = (model.max_batch_size > 0 ? 1 : 0); d < t.dims.size(); ++d) n *= std::max<int64_t>(t.dims[d], 0);
  return n;
}

absl::Status DecodeOutputs(const RequestView& request, const ModelSignature& model, DecodedRequest& decoded) {
  const std::vector<TensorMetadata>& outputs = model.outputs;
  if (request.outputs.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      // A photo body's classifier outputs (floating point, one value per class) answer their top classes.
      const TensorMetadata& t = outputs[i];
      const size_t item_dims = t.dims.size() - (model.max_batch_size > 0 ? 1 : 0);
      const bool classifier = IsFloatingPoint(t.datatype) && item_dims == 1 && ItemElements(t, model) > 0;
      decoded.outputs.push_back(
          {i, request.photo_body && classifier ? std::min(request.photo_classification, ItemElements(t, model)) : 0});
    }
    return absl::OkStatus();
  }
  std::vector<bool> requested_already(outputs.size(), false);
  for (const RequestedOutputView& requested : request.outputs) {
    const int index = FindTensor(outputs, requested.name);
    if (index < 0) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected output ", QuoteClientString(requested.name),
                                                     ": model '", model.name, "' has outputs ", Names(outputs)));
    }
    if (requested_already[index]) {
      return absl::InvalidArgumentError(absl::StrCat("output '", requested.name, "' is requested twice"));
    }
    requested_already[index] = true;
    RequestedOutput out{static_cast<size_t>(index), 0};
    if (requested.classification.has_value()) {
      const TensorMetadata& t = outputs[index];
      if (!IsFloatingPoint(t.datatype)) {
        return absl::InvalidArgumentError(absl::StrCat("output '", t.name,
                                                       "': classification needs a floating-point output, it is ",
                                                       DataTypeName(t.datatype)));
      }
      const int64_t classes = ItemElements(t, model);
      CONVOY_ASSIGN_OR_RETURN(out.classification,
                              IntParameter(*requested.classification,
                                           absl::StrCat("output '", t.name, "': parameter 'classification' (the ",
                                                        classes, " classes of ", DimsToString(t.dims), ")"),
                                           1, classes, request.integer_kinds));
    }
    decoded.outputs.push_back(out);
  }
  return absl::OkStatus();
}

absl::Status DecodeParameters(const RequestView& request, DecodedRequest& decoded) {
  for (const NamedParameter& p : request.parameters) {
    if (p.name == "priority") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t priority, IntParameter(p.value, "parameter 'priority'", 0, INT64_MAX,
                                                                   request.integer_kinds));
      decoded.spec.priority = static_cast<uint64_t>(priority);
    } else if (p.name == "timeout") {
      CONVOY_ASSIGN_OR_RETURN(const int64_t timeout_us,
                              IntParameter(p.value, "parameter 'timeout' (microseconds)", 0, INT64_MAX,
                                           request.integer_kinds));
      decoded.spec.timeout = absl::Microseconds(timeout_us);
    }
    // Other parameters (binary_data_output, sequence ids of stateless clients, ...) do not apply and are ignored.
  }
  return absl::OkStatus();
}

}  // namespace

std::string ShapeString(absl::Span<const int64_t> dims) {
  if (dims.size() <= static_cast<size_t>(kShapeLimit)) return DimsToString(dims);
  return absl::StrCat("[", absl::StrJoin(dims.subspan(0, kShapeLimit), ","), ",...(", dims.size(), " dims)]");
}

absl::StatusOr<DecodedRequest> DecodeRequest(const RequestView& request, const ModelSignature& model) {
  DecodedRequest decoded;
  decoded.payload = std::make_unique<InferencePayload>();
  CONVOY_RETURN_IF_ERROR(DecodeInputs(request, model, decoded));
  CONVOY_RETURN_IF_ERROR(DecodeOutputs(request, model, decoded));
  CONVOY_RETURN_IF_ERROR(DecodeParameters(request, decoded));
  return decoded;
}

std::vector<std::string> TopKClasses(const std::vector<float>& scores, int64_t k,
                                     const std::vector<std::string>& labels) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t top = static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(scores.size())));
  auto rank = [&](size_t i) { return std::isnan(scores[i]) ? -INFINITY : scores[i]; };
  std::partial_sort(order.begin(), order.begin() + top, order.end(), [&](size_t a, size_t b) {
    return rank(a) > rank(b) || (rank(a) == rank(b) && a < b);
  });
  std::vector<std::string> classes;
  for (size_t j = 0; j < top; ++j) {
    const size_t i = order[j];
    std::string entry = absl::StrCat(std::to_string(scores[i]), ":", i);
    if (i < labels.size()) absl::StrAppend(&entry, ":", labels[i]);
    classes.push_back(std::move(entry));
  }
  return classes;
}

std::string BytesWireForm(const std::vector<std::string>& elements) {
  std::string out;
  for (const std::string& element : elements) {
    const uint32_t size = static_cast<uint32_t>(element.size());
    const char prefix[4] = {static_cast<char>(size & 0xff), static_cast<char>((size >> 8) & 0xff),
                            static_cast<char>((size >> 16) & 0xff), static_cast<char>((size >> 24) & 0xff)};
    out.append(prefix, 4);
    out.append(element);
  }
  return out;
}

namespace {

ResponseTensor Classification(const ServedModel& model, const RequestedOutput& requested, const HostBuffer& data,
                              int64_t batch) {
  const TensorMetadata& t = model.runtime().outputs()[requested.index];
  const bool batched = model.runtime().max_batch_size() > 0;
  const size_t classes = static_cast<size_t>(
      batch == 0 ? 0 : data.size() / DataTypeSize(t.datatype) / static_cast<size_t>(batch));
  const int64_t k = std::min<int64_t>(requested.classification, static_cast<int64_t>(classes));
  ResponseTensor tensor;
  tensor.name = t.name;
  tensor.datatype = "BYTES";
  tensor.is_classification = true;
  if (batched) tensor.shape.push_back(batch);
  tensor.shape.push_back(k);
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<float> scores(classes);
    for (size_t c = 0; c < classes; ++c) scores[c] = LoadAsFloat(data.data(), t.datatype, b * classes + c);
    for (std::string& entry : TopKClasses(scores, k, model.labels(requested.index))) {
      tensor.classes.push_back(std::move(entry));
    }
  }
  return tensor;
}

}  // namespace

absl::StatusOr<std::vector<ResponseTensor>> ResponseTensors(const ServedModel& model,
                                                            const std::vector<RequestedOutput>& outputs,
                                                            const InferencePayload& payload) {
  if (payload.outputs.size() != model.runtime().outputs().size()) {
    return absl::InternalError(absl::StrCat("model '", model.name(), "' produced ", payload.outputs.size(),
                                            " outputs, expected ", model.runtime().outputs().size()));
  }
  const bool batched = model.runtime().max_batch_size() > 0;
  std::vector<ResponseTensor> tensors;
  tensors.reserve(outputs.size());
  for (const RequestedOutput& requested : outputs) {
    const TensorMetadata& t = model.runtime().outputs()[requested.index];
    const HostBuffer& data = payload.outputs[requested.index];
    if (requested.classification > 0) {
      tensors.push_back(Classification(model, requested, data, payload.batch_size));
      continue;
    }
    ResponseTensor tensor;
    tensor.name = t.name;
    tensor.datatype = std::string(DataTypeName(t.datatype));
    for (size_t d = 0; d < t.dims.size(); ++d) tensor.shape.push_back(d == 0 && batched ? payload.batch_size : t.dims[d]);
    tensor.data = absl::string_view(data.as<const char>(), data.size());
    tensors.push_back(std::move(tensor));
  }
  return tensors;
}

void RawBytes::CopyTo(char* out) const {
  for (absl::string_view piece : pieces_) {
    std::memcpy(out, piece.data(), piece.size());
    out += piece.size();
  }
}

std::string RawBytes::Flatten() const {
  std::string joined(size_, '\0');
  CopyTo(joined.data());
  return joined;
}

RawBytes RawBytes::Substr(size_t offset, size_t length) const {
  RawBytes part;
  for (absl::string_view piece : pieces_) {
    if (length == 0) break;
    if (offset >= piece.size()) {
      offset -= piece.size();
      continue;
    }
    const absl::string_view taken = piece.substr(offset, length);
    part.Append(taken);
    length -= taken.size();
    offset = 0;
  }
  return part;
}

}  // namespace convoy::infer
