// Tensor descriptors, non-owning views and owning host buffers.
//
// A TensorDesc is a data type, logical dims and element strides. Four-dimensional image tensors always list their
// dims in logical N, C, H, W order; `layout` says how they lie in memory (NCHW, NHWC, or the channel-blocked NCHW8c)
// and the default strides follow it. Kernels take problems (problems.h) plus raw pointers; TensorView is what the runtime and tests pass around.
#ifndef CONVOY_KERNELS_COMMON_TENSOR_H_
#define CONVOY_KERNELS_COMMON_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/common/dtype.h"

namespace convoy {

// kNCHW8c is oneDNN's nChw8c: [N, C/8, H, W, 8], channels in blocks of 8 innermost (what its AVX2 convolutions
// prefer). Convoy blocks only tensors whose C is a multiple of 8, so a blocked tensor has no padding and the same byte
// size as the plain layouts; a tensor described as kNCHW8c whose C is not a multiple of 8 lies as plain NCHW
// (StoredLayout), which is how a blocked convolution reads a 3-channel image (oneDNN's "first convolution": NCHW in,
// blocked out). Only the oneDNN algorithms (conv2d, pool2d, convert), the binary kernel and the layout-free
// element-wise kernels take it (docs/kernels.md, "The blocked layout").
enum class Layout : uint8_t { kNCHW = 0, kNHWC = 1, kNCHW8c = 2 };
constexpr int kLayoutChannelBlock = 8;  // channels per block of kNCHW8c
// How a 4-D tensor of `channels` channels described in `layout` lies in memory: kNCHW for a kNCHW8c tensor whose
// channel count is not a multiple of the block, else `layout`.
constexpr Layout StoredLayout(Layout layout, int64_t channels) {
  return layout == Layout::kNCHW8c && channels % kLayoutChannelBlock != 0 ? Layout::kNCHW : layout;
}
absl::string_view LayoutName(Layout layout);
absl::StatusOr<Layout> ParseLayout(absl::string_view name);

class TensorDesc {
 public:
  TensorDesc() = default;
  // Dense tensor; for 4-D dims (N, C, H, W) the strides follow StoredLayout(layout, C) (which layout() returns),
  // otherwise row-major.
  TensorDesc(DataType dtype, std::vector<int64_t> dims, Layout layout = Layout::kNCHW);
  static TensorDesc Image(DataType dtype, int64_t n, int64_t c, int64_t h, int64_t w, Layout layout) {
    return TensorDesc(dtype, {n, c, h, w}, layout);
  }

  DataType dtype() const { return dtype_; }
  Layout layout() const { return layout_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  int rank() const { return static_cast<int>(dims_.size()); }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t num_elements() const;
  size_t size_bytes() const { return static_cast<size_t>(num_elements()) * DataTypeSize(dtype_); }
  bool is_dense() const;
  // Offset in elements of the 4-D logical index (n, c, h, w).
  int64_t Offset4(int64_t n, int64_t c, int64_t h, int64_t w) const {
    if (layout_ == Layout::kNCHW8c) {  // strides_[1] is the stride of a channel block
      return n * strides_[0] + (c / kLayoutChannelBlock) * strides_[1] + h * strides_[2] + w * strides_[3] +
             c % kLayoutChannelBlock;
    }
    return n * strides_[0] + c * strides_[1] + h * strides_[2] + w * strides_[3];
  }
  // "[1,3,224,224] FP32 NCHW"
  std::string ToString() const;

  bool operator==(const TensorDesc& o) const {
    return dtype_ == o.dtype_ && layout_ == o.layout_ && dims_ == o.dims_ && strides_ == o.strides_;
  }
  bool operator!=(const TensorDesc& o) const { return !(*this == o); }

 private:
  DataType dtype_ = DataType::kFloat32;
  Layout layout_ = Layout::kNCHW;
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
};

// Non-owning pointer + descriptor. The viewed memory must outlive the view.
struct TensorView {
  TensorDesc desc;
  void* data = nullptr;

  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// Move-only, 64-byte aligned host allocation.
class HostBuffer {
 public:
  HostBuffer() = default;
  static absl::StatusOr<HostBuffer> Allocate(size_t bytes);
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  void* data() const { return data_; }
  size_t size() const { return size_; }
  template <typename T>
  T* as() const { return static_cast<T*>(data_); }

 private:
  HostBuffer(void* data, size_t size) : data_(data), size_(size) {}
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A HostBuffer with a descriptor: the owning tensor used by tests, weights and the CPU runtime.
class HostTensor {
 public:
  HostTensor() = default;
  static absl::StatusOr<HostTensor> Create(const TensorDesc& desc);
  const TensorDesc& desc() const { return desc_; }
  void* data() const { return buffer_.data(); }
  template <typename T>
  T* as() const { return buffer_.as<T>(); }
  TensorView view() const { return TensorView{desc_, buffer_.data()}; }

 private:
  TensorDesc desc_;
  HostBuffer buffer_;
};

// Dims as "[1,3,224,224]".
std::string DimsToString(absl::Span<const int64_t> dims);

}  // namespace convoy

#endif  // CONVOY_KERNELS_COMMON_TENSOR_H_
