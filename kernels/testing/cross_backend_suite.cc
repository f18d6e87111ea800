#include "kernels/testing/cross_backend_suite.h"

namespace convoy::testing::cross_backend_internal {

absl::StatusOr<HostBuffers> MakeHostBuffers(const std::vector<BufferSpec>& specs, uint32_t seed, bool poison) {
  HostBuffers host;
  for (size_t i = 0; i < specs.size(); ++i) {
    const BufferSpec& spec = specs[i];
    if (spec.count == 0) {
      host.buffers.emplace_back();
      host.pointers.push_back(nullptr);
      continue;
    }
    CONVOY_ASSIGN_OR_RETURN(HostBuffer buffer,
                            HostBuffer::Allocate(static_cast<size_t>(spec.count) * DataTypeSize(spec.dtype)));
    if (poison) {
      PoisonWithNaN(buffer.data(), spec.dtype, spec.count);
    } else {
      FillUniform(buffer.data(), spec.dtype, spec.count, seed + static_cast<uint32_t>(i), spec.lo, spec.hi);
    }
    host.pointers.push_back(buffer.data());
    host.buffers.push_back(std::move(buffer));
  }
  return host;
}

absl::StatusOr<std::vector<DeviceAllocation>> CopyToDevice(Device& device, const std::vector<BufferSpec>& specs,
                                                           const HostBuffers& host, std::vector<void*>& pointers) {
  std::vector<DeviceAllocation> allocations;
  pointers.clear();
  for (size_t i = 0; i < specs.size(); ++i) {
    if (host.pointers[i] == nullptr) {
      allocations.emplace_back();
      pointers.push_back(nullptr);
      continue;
    }
    const size_t bytes = static_cast<size_t>(specs[i].count) * DataTypeSize(specs[i].dtype);
    CONVOY_ASSIGN_OR_RETURN(DeviceAllocation allocation, device.Allocate(bytes));
    CONVOY_RETURN_IF_ERROR(device.CopyToDevice(allocation.data(), host.pointers[i], bytes));
    pointers.push_back(allocation.data());
    allocations.push_back(std::move(allocation));
  }
  return allocations;
}

absl::Status CompareOutputs(const std::vector<BufferSpec>& specs, const HostBuffers& actual,
                            const HostBuffers& expected, Tolerance tolerance) {
  for (size_t i = 0; i < specs.size(); ++i) {
    const absl::Status status =
        CompareFloats(ToFloats(actual.pointers[i], specs[i].dtype, specs[i].count),
                      ToFloats(expected.pointers[i], specs[i].dtype, specs[i].count), tolerance);
    if (!status.ok()) return absl::Status(status.code(), absl::StrCat("output '", specs[i].name, "': ", status.message()));
  }
  return absl::OkStatus();
}

}  // namespace convoy::testing::cross_backend_internal
