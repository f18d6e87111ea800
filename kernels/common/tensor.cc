#include "kernels/common/tensor.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/common/align.h"

namespace convoy {

absl::string_view LayoutName(Layout layout) {
  switch (layout) {
    case Layout::kNCHW: return "NCHW";
    case Layout::kNHWC: return "NHWC";
    case Layout::kNCHW8c: return "NCHW8c";
  }
  return "?";
}

absl::StatusOr<Layout> ParseLayout(absl::string_view name) {
  if (name == "NCHW") return Layout::kNCHW;
  if (name == "NHWC") return Layout::kNHWC;
  if (name == "NCHW8c" || name == "NCHW8C") return Layout::kNCHW8c;
  return absl::InvalidArgumentError(absl::StrCat("unknown layout '", name, "'; expected NCHW, NHWC or NCHW8c"));
}

TensorDesc::TensorDesc(DataType dtype, std::vector<int64_t> dims, Layout layout)
    : dtype_(dtype), layout_(layout), dims_(std::move(dims)), strides_(dims_.size(), 1) {
  if (dims_.size() == 4) layout_ = StoredLayout(layout_, dims_[1]);
  if (dims_.size() == 4 && layout_ == Layout::kNHWC) {
    const int64_t c = dims_[1], h = dims_[2], w = dims_[3];
    strides_ = {h * w * c, 1, w * c, c};
    return;
  }
  if (dims_.size() == 4 && layout_ == Layout::kNCHW8c) {  // Offset4 adds c % 8; C is a multiple of 8 here
    const int64_t c = dims_[1], h = dims_[2], w = dims_[3];
    const int64_t b = kLayoutChannelBlock;
    strides_ = {c * h * w, h * w * b, w * b, b};
    return;
  }
  for (int i = static_cast<int>(dims_.size()) - 2; i >= 0; --i) strides_[i] = strides_[i + 1] * dims_[i + 1];
}

int64_t TensorDesc::num_elements() const {
  int64_t n = 1;
  for (int64_t d : dims_) n *= d;
  return n;
}

bool TensorDesc::is_dense() const { return *this == TensorDesc(dtype_, dims_, layout_); }

std::string TensorDesc::ToString() const {
  std::string s = absl::StrCat(DimsToString(dims_), " ", DataTypeName(dtype_));
  if (dims_.size() == 4) absl::StrAppend(&s, " ", LayoutName(layout_));
  return s;
}

absl::StatusOr<HostBuffer> HostBuffer::Allocate(size_t bytes) {
  if (bytes == 0) return HostBuffer();
  const size_t rounded = AlignUp(bytes);
  void* p = std::aligned_alloc(64, rounded);
  if (p == nullptr) return absl::ResourceExhaustedError(absl::StrCat("host allocation of ", bytes, " bytes failed"));
  return HostBuffer(p, bytes);
}

HostBuffer::~HostBuffer() { std::free(data_); }

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

absl::StatusOr<HostTensor> HostTensor::Create(const TensorDesc& desc) {
  HostTensor t;
  t.desc_ = desc;
  auto buffer = HostBuffer::Allocate(desc.size_bytes());
  if (!buffer.ok()) return buffer.status();
  t.buffer_ = std::move(buffer).value();
  return t;
}

std::string DimsToString(absl::Span<const int64_t> dims) { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); }

}  // namespace convoy
