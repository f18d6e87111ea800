// TestDeviceBuffer<T>: a cudaMalloc'd array for kernel tests (either mode), poisoned with 0xFF bytes (NaN for
// float, half and bfloat16) at creation and on demand, so an element a kernel never writes shows up.
//
//   TestDeviceBuffer<float> out(n);          // poisoned
//   ASSERT_EQ(LaunchX(in.get(), out.get(), n, nullptr), cudaSuccess);
//   std::vector<float> host = out.Download();
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TEST_DEVICE_BUFFER_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TEST_DEVICE_BUFFER_H_

#include <cstddef>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda_emulation/cuda_host_api.h"

namespace convoy::cuda_emulation {

template <typename T>
class TestDeviceBuffer {
 public:
  explicit TestDeviceBuffer(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&data_), bytes()), cudaSuccess) << bytes() << " bytes";
    Poison();
  }
  explicit TestDeviceBuffer(const std::vector<T>& values) : TestDeviceBuffer(values.size()) { Upload(values); }
  ~TestDeviceBuffer() { cudaFree(data_); }
  TestDeviceBuffer(const TestDeviceBuffer&) = delete;
  TestDeviceBuffer& operator=(const TestDeviceBuffer&) = delete;

  T* get() const { return data_; }
  size_t size() const { return count_; }
  size_t bytes() const { return count_ * sizeof(T); }

  void Poison() { EXPECT_EQ(cudaMemset(data_, 0xFF, bytes()), cudaSuccess); }
  void Upload(const std::vector<T>& values) {
    ASSERT_EQ(values.size(), count_);
    EXPECT_EQ(cudaMemcpy(data_, values.data(), bytes(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  std::vector<T> Download() const {
    std::vector<T> values(count_);
    EXPECT_EQ(cudaMemcpy(values.data(), data_, bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    return values;
  }

 private:
  size_t count_;
  T* data_ = nullptr;
};

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TEST_DEVICE_BUFFER_H_
