// The emulated cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col (see tensor_map.h): every argument limit that the
// driver documents in cuda.h is checked here, and the arguments are packed into the map's 128 opaque bytes.
#include "kernels/cuda_emulation/tensor_map.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace convoy::cuda_emulation {
namespace {

constexpr uint32_t kMagic = 0x434D4150;  // "CMAP"

thread_local std::string tls_last_error;

int ElementBytes(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8:
      return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
      return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
      return 8;
  }
  return 0;
}

bool IsFloatingPoint(CUtensorMapDataType dtype) {
  switch (dtype) {
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ:
      return true;
    default:
      return false;
  }
}

CUresult Fail(std::string message) {
  tls_last_error = std::move(message);
  return CUDA_ERROR_INVALID_VALUE;
}

// The packed layout of the 128 opaque bytes.
struct PackedMap {
  uint32_t magic;
  uint8_t im2col, dtype, rank, interleave, swizzle, oob_fill;
  uint16_t channels_per_pixel;
  uint16_t pixels_per_column;
  uint8_t box_minus_one[5];
  uint8_t element_strides[5];
  int16_t lower_corner[3];
  int16_t upper_corner[3];
  uint64_t global_address;
  uint32_t dims_minus_one[5];
  uint64_t strides[4];
};
static_assert(sizeof(PackedMap) <= sizeof(CUtensorMap), "the packed map must fit the 128 opaque bytes");

// The checks shared by both encoders (everything but the box / im2col arguments).
CUresult CheckCommon(const CUtensorMap* map, CUtensorMapDataType dtype, cuuint32_t rank, uint32_t min_rank,
                     const void* address, const cuuint64_t* dims, const cuuint64_t* strides,
                     const cuuint32_t* element_strides, CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                     CUtensorMapL2promotion l2, CUtensorMapFloatOOBfill oob) {
  if (map == nullptr || reinterpret_cast<uintptr_t>(map) % 64 != 0) {
    return Fail("tensorMap address must be aligned to 64 bytes");
  }
  const int element = ElementBytes(dtype);
  if (element == 0) return Fail(absl::StrCat("tensorDataType ", static_cast<int>(dtype), " is not supported here"));
  if (rank < min_rank || rank > 5) {
    return Fail(absl::StrCat("tensorRank ", rank, " must be in [", min_rank, ", 5]"));
  }
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE && rank < 3) {
    return Fail("an interleaved layout needs tensorRank >= 3");
  }
  const uintptr_t alignment = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  if (address == nullptr || reinterpret_cast<uintptr_t>(address) % alignment != 0) {
    return Fail(absl::StrCat("globalAddress must be ", alignment, "-byte aligned"));
  }
  for (uint32_t i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (uint64_t{1} << 32)) {
      return Fail(absl::StrCat("globalDim[", i, "] = ", dims[i], " must be in [1, 2^32]"));
    }
  }
  const uint64_t stride_multiple = interleave == CU_TENSOR_MAP_INTERLEAVE_32B ? 32 : 16;
  for (uint32_t i = 0; i + 1 < rank; ++i) {
    if (strides[i] % stride_multiple != 0 || strides[i] >= (uint64_t{1} << 40)) {
      return Fail(absl::StrCat("globalStrides[", i, "] = ", strides[i], " must be a multiple of ", stride_multiple,
                               " and below 2^40"));
    }
  }
  for (uint32_t i = 0; i < rank; ++i) {
    if (element_strides[i] == 0 || element_strides[i] > 8) {
      return Fail(absl::StrCat("elementStrides[", i, "] = ", element_strides[i], " must be in [1, 8]"));
    }
  }
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_32B && swizzle != CU_TENSOR_MAP_SWIZZLE_32B) {
    return Fail("CU_TENSOR_MAP_INTERLEAVE_32B needs CU_TENSOR_MAP_SWIZZLE_32B");
  }
  if (static_cast<int>(swizzle) < 0 || static_cast<int>(swizzle) > 3) {
    return Fail(absl::StrCat("swizzle ", static_cast<int>(swizzle), " is not emulated (NONE, 32B, 64B, 128B are)"));
  }
  if (static_cast<int>(l2) < 0 || static_cast<int>(l2) > 3) return Fail("l2Promotion is out of range");
  if (oob == CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA && !IsFloatingPoint(dtype)) {
    return Fail("CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA needs a floating-point tensorDataType");
  }
  if (static_cast<int>(oob) < 0 || static_cast<int>(oob) > 1) return Fail("oobFill is out of range");
  return CUDA_SUCCESS;
}

// The inner dimension of the box in bytes must fit the swizzle span (interleave NONE only).
CUresult CheckSwizzleSpan(CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle, uint64_t inner_bytes,
                          const char* what) {
  if (interleave != CU_TENSOR_MAP_INTERLEAVE_NONE || swizzle == CU_TENSOR_MAP_SWIZZLE_NONE) return CUDA_SUCCESS;
  const int span = SwizzleSpanBytes(swizzle);
  if (inner_bytes > static_cast<uint64_t>(span)) {
    return Fail(absl::StrCat("the bounding box inner dimension (", what, " = ", inner_bytes, " bytes) exceeds the ",
                             span, "-byte swizzle span"));
  }
  return CUDA_SUCCESS;
}

PackedMap PackCommon(CUtensorMapDataType dtype, cuuint32_t rank, const void* address, const cuuint64_t* dims,
                     const cuuint64_t* strides, const cuuint32_t* element_strides, CUtensorMapInterleave interleave,
                     CUtensorMapSwizzle swizzle, CUtensorMapFloatOOBfill oob) {
  PackedMap packed;
  std::memset(&packed, 0, sizeof(packed));
  packed.magic = kMagic;
  packed.dtype = static_cast<uint8_t>(dtype);
  packed.rank = static_cast<uint8_t>(rank);
  packed.interleave = static_cast<uint8_t>(interleave);
  packed.swizzle = static_cast<uint8_t>(swizzle);
  packed.oob_fill = static_cast<uint8_t>(oob);
  packed.global_address = reinterpret_cast<uintptr_t>(address);
  for (uint32_t i = 0; i < rank; ++i) {
    packed.dims_minus_one[i] = static_cast<uint32_t>(dims[i] - 1);
    packed.element_strides[i] = static_cast<uint8_t>(element_strides[i]);
  }
  for (uint32_t i = 0; i + 1 < rank; ++i) packed.strides[i] = strides[i];
  return packed;
}

void Store(const PackedMap& packed, CUtensorMap* map) {
  std::memset(map, 0, sizeof(*map));
  std::memcpy(map, &packed, sizeof(packed));
  tls_last_error.clear();
}

}  // namespace

std::string LastTensorMapError() { return tls_last_error; }

int SwizzleSpanBytes(CUtensorMapSwizzle swizzle) {
  switch (swizzle) {
    case CU_TENSOR_MAP_SWIZZLE_32B:
      return 32;
    case CU_TENSOR_MAP_SWIZZLE_64B:
      return 64;
    case CU_TENSOR_MAP_SWIZZLE_128B:
      return 128;
    default:
      return 0;
  }
}

bool DecodeTensorMap(const CUtensorMap& map, DecodedTensorMap* decoded) {
  PackedMap packed;
  std::memcpy(&packed, &map, sizeof(packed));
  if (packed.magic != kMagic) return false;
  DecodedTensorMap d;
  d.im2col = packed.im2col != 0;
  d.dtype = static_cast<CUtensorMapDataType>(packed.dtype);
  d.element_bytes = ElementBytes(d.dtype);
  d.rank = packed.rank;
  d.global_address = reinterpret_cast<const unsigned char*>(static_cast<uintptr_t>(packed.global_address));
  for (int i = 0; i < d.rank; ++i) {
    d.dims[i] = uint64_t{packed.dims_minus_one[i]} + 1;
    d.element_strides[i] = packed.element_strides[i];
    d.box[i] = uint32_t{packed.box_minus_one[i]} + 1;
  }
  d.strides[0] = static_cast<uint64_t>(d.element_bytes);
  for (int i = 1; i < d.rank; ++i) d.strides[i] = packed.strides[i - 1];
  for (int i = 0; i < 3; ++i) {
    d.lower_corner[i] = packed.lower_corner[i];
    d.upper_corner[i] = packed.upper_corner[i];
  }
  d.channels_per_pixel = packed.channels_per_pixel;
  d.pixels_per_column = packed.pixels_per_column;
  d.interleave = static_cast<CUtensorMapInterleave>(packed.interleave);
  d.swizzle = static_cast<CUtensorMapSwizzle>(packed.swizzle);
  d.oob_fill = static_cast<CUtensorMapFloatOOBfill>(packed.oob_fill);
  *decoded = d;
  return true;
}

}  // namespace convoy::cuda_emulation

using convoy::cuda_emulation::CheckCommon;
using convoy::cuda_emulation::CheckSwizzleSpan;
using convoy::cuda_emulation::ElementBytes;
using convoy::cuda_emulation::Fail;
using convoy::cuda_emulation::PackCommon;
using convoy::cuda_emulation::PackedMap;
using convoy::cuda_emulation::Store;

CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
                                void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                const cuuint32_t* boxDim, const cuuint32_t* elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill) {
  if (CUresult r = CheckCommon(tensorMap, tensorDataType, tensorRank, 1, globalAddress, globalDim, globalStrides,
                               elementStrides, interleave, swizzle, l2Promotion, oobFill);
      r != CUDA_SUCCESS) {
    return r;
  }
  PackedMap packed = PackCommon(tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, elementStrides,
                                interleave, swizzle, oobFill);
  for (uint32_t i = 0; i < tensorRank; ++i) {
    if (boxDim[i] == 0 || boxDim[i] > 256) {
      return Fail(absl::StrCat("boxDim[", i, "] = ", boxDim[i], " must be in [1, 256]"));
    }
    packed.box_minus_one[i] = static_cast<uint8_t>(boxDim[i] - 1);
  }
  const uint64_t inner_bytes = uint64_t{boxDim[0]} * ElementBytes(tensorDataType);
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner_bytes % 16 != 0) {
    return Fail(absl::StrCat("boxDim[0] * element size = ", inner_bytes, " bytes must be a multiple of 16"));
  }
  if (CUresult r = CheckSwizzleSpan(interleave, swizzle, inner_bytes, "boxDim[0] * element size"); r != CUDA_SUCCESS) {
    return r;
  }
  Store(packed, tensorMap);
  return CUDA_SUCCESS;
}

CUresult cuTensorMapEncodeIm2col(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
                                 void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                 const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner,
                                 cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                 const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                 CUtensorMapFloatOOBfill oobFill) {
  if (CUresult r = CheckCommon(tensorMap, tensorDataType, tensorRank, 3, globalAddress, globalDim, globalStrides,
                               elementStrides, interleave, swizzle, l2Promotion, oobFill);
      r != CUDA_SUCCESS) {
    return r;
  }
  PackedMap packed = PackCommon(tensorDataType, tensorRank, globalAddress, globalDim, globalStrides, elementStrides,
                                interleave, swizzle, oobFill);
  packed.im2col = 1;
  const int spatial = static_cast<int>(tensorRank) - 2;
  const int limit = tensorRank == 3 ? 32768 : tensorRank == 4 ? 128 : 16;  // corners in [-limit, limit - 1]
  int64_t box_volume = 1;
  for (int i = 0; i < spatial; ++i) {
    for (const int* corner : {pixelBoxLowerCorner, pixelBoxUpperCorner}) {
      if (corner[i] < -limit || corner[i] > limit - 1) {
        return Fail(absl::StrCat(corner == pixelBoxLowerCorner ? "pixelBoxLowerCorner[" : "pixelBoxUpperCorner[", i,
                                 "] = ", corner[i], " must be in [", -limit, ", ", limit - 1, "] for rank ",
                                 tensorRank));
      }
    }
    // The box spans [lower, dim - 1 + upper] along each spatial dimension.
    const int64_t extent = static_cast<int64_t>(globalDim[i + 1]) + pixelBoxUpperCorner[i] - pixelBoxLowerCorner[i];
    box_volume *= extent > 0 ? extent : 0;
    packed.lower_corner[i] = static_cast<int16_t>(pixelBoxLowerCorner[i]);
    packed.upper_corner[i] = static_cast<int16_t>(pixelBoxUpperCorner[i]);
  }
  if (box_volume <= 0) return Fail("the bounding box of pixelBoxLowerCorner / pixelBoxUpperCorner has zero area");
  if (channelsPerPixel == 0 || channelsPerPixel > 256) {
    return Fail(absl::StrCat("channelsPerPixel = ", channelsPerPixel, " must be in [1, 256]"));
  }
  if (pixelsPerColumn == 0 || pixelsPerColumn > 1024) {
    return Fail(absl::StrCat("pixelsPerColumn = ", pixelsPerColumn, " must be in [1, 1024]"));
  }
  const uint64_t inner_bytes = uint64_t{channelsPerPixel} * ElementBytes(tensorDataType);
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE && inner_bytes % 16 != 0) {
    return Fail(absl::StrCat("channelsPerPixel * element size = ", inner_bytes, " bytes must be a multiple of 16"));
  }
  if (CUresult r = CheckSwizzleSpan(interleave, swizzle, inner_bytes, "channelsPerPixel * element size");
      r != CUDA_SUCCESS) {
    return r;
  }
  packed.channels_per_pixel = static_cast<uint16_t>(channelsPerPixel);
  packed.pixels_per_column = static_cast<uint16_t>(pixelsPerColumn);
  Store(packed, tensorMap);
  return CUDA_SUCCESS;
}
