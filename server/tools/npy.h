// Reading and writing NumPy .npy files (format versions 1.0 to 3.0, little-endian, C order) for the convoy CLI.
//
//   CONVOY_ASSIGN_OR_RETURN(NpyArray images, ReadNpyFile("x.npy"));
//   CONVOY_RETURN_IF_ERROR(WriteNpyFile("y.npy", logits));
//
// Element types: float32 ('<f4'), float16 ('<f2'), uint8 ('|u1'), int64 ('<i8'); float64 ('<f8') is read and
// narrowed to float32 (NumPy's default dtype, so `np.save` of a plain array works). BF16 has no NumPy type: arrays
// of it are written as float32. Errors name the file and what was wrong (bad magic, header, dtype, size).
#ifndef CONVOY_SERVER_TOOLS_NPY_H_
#define CONVOY_SERVER_TOOLS_NPY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "kernels/common/dtype.h"

namespace convoy::tools {

struct NpyArray {
  DataType dtype = DataType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;  // num_elements * DataTypeSize(dtype) bytes
};

absl::StatusOr<NpyArray> ParseNpy(absl::string_view bytes, const std::string& source);
absl::StatusOr<NpyArray> ReadNpyFile(const std::string& path);
// Format 1.0; BF16 arrays become float32.
std::string SerializeNpy(const NpyArray& array);
absl::Status WriteNpyFile(const std::string& path, const NpyArray& array);

}  // namespace convoy::tools

#endif  // CONVOY_SERVER_TOOLS_NPY_H_
