// The Device defaults (see device.h): ordinary host memory for staging where the backend has nothing better.
#include "kernels/registry/device.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace convoy {

absl::StatusOr<DeviceAllocation> Device::AllocateStagingHost(size_t bytes) {
  if (bytes == 0) return DeviceAllocation();
  constexpr size_t kAlignment = 64;
  void* data = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  if (data == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate ", bytes, " bytes of host staging memory"));
  }
  return DeviceAllocation(data, bytes, [](void* p) { std::free(p); });
}

}  // namespace convoy
