// CUDA's built-in vector types (dim3, uint3, float4, int2, ...) and their make_* constructors for the CUDA emulation.
// They live in the global namespace with CUDA's names and alignments, so kernel sources compile unchanged. Only
// included when emulating (nvcc brings its own).
#ifndef CONVOY_KERNELS_CUDA_EMULATION_VECTOR_TYPES_H_
#define CONVOY_KERNELS_CUDA_EMULATION_VECTOR_TYPES_H_

#define CONVOY_EMULATION_VECTOR2(T, name, align) \
  struct alignas(align) name {                   \
    T x, y;                                      \
  };                                             \
  inline name make_##name(T x, T y) { return name{x, y}; }
#define CONVOY_EMULATION_VECTOR3(T, name) \
  struct name {                           \
    T x, y, z;                            \
  };                                      \
  inline name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define CONVOY_EMULATION_VECTOR4(T, name, align) \
  struct alignas(align) name {                   \
    T x, y, z, w;                                \
  };                                             \
  inline name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

CONVOY_EMULATION_VECTOR2(float, float2, 8)
CONVOY_EMULATION_VECTOR3(float, float3)
CONVOY_EMULATION_VECTOR4(float, float4, 16)
CONVOY_EMULATION_VECTOR2(int, int2, 8)
CONVOY_EMULATION_VECTOR3(int, int3)
CONVOY_EMULATION_VECTOR4(int, int4, 16)
CONVOY_EMULATION_VECTOR2(unsigned int, uint2, 8)
CONVOY_EMULATION_VECTOR3(unsigned int, uint3)
CONVOY_EMULATION_VECTOR4(unsigned int, uint4, 16)
CONVOY_EMULATION_VECTOR2(double, double2, 16)
CONVOY_EMULATION_VECTOR2(short, short2, 4)
CONVOY_EMULATION_VECTOR4(short, short4, 8)
CONVOY_EMULATION_VECTOR2(unsigned short, ushort2, 4)
CONVOY_EMULATION_VECTOR4(unsigned short, ushort4, 8)
CONVOY_EMULATION_VECTOR4(signed char, char4, 4)
CONVOY_EMULATION_VECTOR4(unsigned char, uchar4, 4)
CONVOY_EMULATION_VECTOR2(long long, longlong2, 16)
CONVOY_EMULATION_VECTOR2(unsigned long long, ulonglong2, 16)

#undef CONVOY_EMULATION_VECTOR2
#undef CONVOY_EMULATION_VECTOR3
#undef CONVOY_EMULATION_VECTOR4

// Launch dimensions: unspecified components are 1, as in CUDA.
struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}          // NOLINT: implicit, as in CUDA
  constexpr operator uint3() const { return uint3{x, y, z}; }  // NOLINT
};

#endif  // CONVOY_KERNELS_CUDA_EMULATION_VECTOR_TYPES_H_
