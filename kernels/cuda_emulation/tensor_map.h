// Tensor maps for the emulated bulk tensor copies (cp.async.bulk.tensor, TMA): the CUDA driver's CUtensorMap type,
// its enums and cuTensorMapEncodeTiled / cuTensorMapEncodeIm2col with the driver's own signatures and argument
// limits (cuda.h documents them; each violated limit returns CUDA_ERROR_INVALID_VALUE and records the reason, see
// convoy::cuda_emulation::LastTensorMapError()). Host code calls them the same way in both builds through
// kernels/cuda_emulation/tensor_map_host.h; in the nvcc build the real driver encodes the map.
//
// The emulated CUtensorMap keeps the arguments in its 128 opaque bytes (DecodeTensorMap reads them back for the
// copy emulation in hopper_emulation.cc); a map that was not encoded here is refused by the copy.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_H_
#define CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_H_

#include <cstdint>
#include <string>

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;

enum CUresult_enum { CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1 };
typedef enum CUresult_enum CUresult;

typedef struct CUtensorMap_st {
  alignas(64) cuuint64_t opaque[16];
} CUtensorMap;

typedef enum CUtensorMapDataType_enum {
  CU_TENSOR_MAP_DATA_TYPE_UINT8 = 0,
  CU_TENSOR_MAP_DATA_TYPE_UINT16,
  CU_TENSOR_MAP_DATA_TYPE_UINT32,
  CU_TENSOR_MAP_DATA_TYPE_INT32,
  CU_TENSOR_MAP_DATA_TYPE_UINT64,
  CU_TENSOR_MAP_DATA_TYPE_INT64,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
  CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
  CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32,
  CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ,
} CUtensorMapDataType;

typedef enum CUtensorMapInterleave_enum {
  CU_TENSOR_MAP_INTERLEAVE_NONE = 0,
  CU_TENSOR_MAP_INTERLEAVE_16B,
  CU_TENSOR_MAP_INTERLEAVE_32B,
} CUtensorMapInterleave;

typedef enum CUtensorMapSwizzle_enum {
  CU_TENSOR_MAP_SWIZZLE_NONE = 0,
  CU_TENSOR_MAP_SWIZZLE_32B,
  CU_TENSOR_MAP_SWIZZLE_64B,
  CU_TENSOR_MAP_SWIZZLE_128B,
} CUtensorMapSwizzle;

typedef enum CUtensorMapL2promotion_enum {
  CU_TENSOR_MAP_L2_PROMOTION_NONE = 0,
  CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
  CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
} CUtensorMapL2promotion;

typedef enum CUtensorMapFloatOOBfill_enum {
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0,
  CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
} CUtensorMapFloatOOBfill;

CUresult cuTensorMapEncodeTiled(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
                                void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                const cuuint32_t* boxDim, const cuuint32_t* elementStrides,
                                CUtensorMapInterleave interleave, CUtensorMapSwizzle swizzle,
                                CUtensorMapL2promotion l2Promotion, CUtensorMapFloatOOBfill oobFill);

CUresult cuTensorMapEncodeIm2col(CUtensorMap* tensorMap, CUtensorMapDataType tensorDataType, cuuint32_t tensorRank,
                                 void* globalAddress, const cuuint64_t* globalDim, const cuuint64_t* globalStrides,
                                 const int* pixelBoxLowerCorner, const int* pixelBoxUpperCorner,
                                 cuuint32_t channelsPerPixel, cuuint32_t pixelsPerColumn,
                                 const cuuint32_t* elementStrides, CUtensorMapInterleave interleave,
                                 CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
                                 CUtensorMapFloatOOBfill oobFill);

namespace convoy::cuda_emulation {

// Why the calling thread's last encode failed ("" after a success).
std::string LastTensorMapError();

// What an emulated CUtensorMap holds.
struct DecodedTensorMap {
  bool im2col = false;
  CUtensorMapDataType dtype = CU_TENSOR_MAP_DATA_TYPE_UINT8;
  int element_bytes = 1;
  int rank = 0;
  const unsigned char* global_address = nullptr;
  uint64_t dims[5] = {};     // elements, innermost first
  uint64_t strides[5] = {};  // bytes; strides[0] is the element size
  uint32_t box[5] = {};      // tiled: box size per dimension
  uint32_t element_strides[5] = {};
  int lower_corner[3] = {};  // im2col, W first (innermost spatial dimension first)
  int upper_corner[3] = {};
  uint32_t channels_per_pixel = 0;  // im2col
  uint32_t pixels_per_column = 0;   // im2col
  CUtensorMapInterleave interleave = CU_TENSOR_MAP_INTERLEAVE_NONE;
  CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_NONE;
  CUtensorMapFloatOOBfill oob_fill = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE;
};

// False if `map` was not produced by the emulated encoders.
bool DecodeTensorMap(const CUtensorMap& map, DecodedTensorMap* decoded);

// Bytes of the swizzle span (0 for CU_TENSOR_MAP_SWIZZLE_NONE).
int SwizzleSpanBytes(CUtensorMapSwizzle swizzle);

}  // namespace convoy::cuda_emulation

#endif  // CONVOY_KERNELS_CUDA_EMULATION_TENSOR_MAP_H_
