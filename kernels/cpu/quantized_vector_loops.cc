// The vectorized INT8 element loops; see quantized_vector_loops.h. Compiled with -ffp-contract=off (BUILD): a
// multiply and an add stay two roundings on every ISA unless the definition says FMA (the add's).
#include "kernels/cpu/quantized_vector_loops.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#define CONVOY_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define CONVOY_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f")))

namespace convoy::cpu {
namespace {

const uint8_t* Bytes(const void* p) { return static_cast<const uint8_t*>(p); }
uint8_t* Bytes(void* p) { return static_cast<uint8_t*>(p); }

// ---- the scalar definitions: the portable versions and the tails of the vector versions -----------------------------

template <bool kUnsigned>
inline float LoadByte(const void* p, int64_t i) {
  if constexpr (kUnsigned) return static_cast<float>(static_cast<const uint8_t*>(p)[i]);
  return static_cast<float>(static_cast<const int8_t*>(p)[i]);
}

// q is an integer within the byte type's range: its low byte is the UINT8 or INT8 value.
inline void StoreByte(void* p, int64_t i, float q) { Bytes(p)[i] = static_cast<uint8_t>(static_cast<int>(q)); }

// saturate(rint(v) + zero_point) with comparisons, so NaN lands on lo.
inline float RoundAndSaturate(float v, float zero_point, float lo, float hi) {
  float q = rintf(v) + zero_point;
  q = q > lo ? q : lo;
  q = q < hi ? q : hi;
  return q;
}

float Lowest(const ByteQuantization& q) { return q.is_unsigned ? 0.0f : -128.0f; }
float Highest(const ByteQuantization& q) { return q.is_unsigned ? 255.0f : 127.0f; }

// The add as onnxruntime's x86 QLinearAdd evaluates it: scale ratios ra = a_scale / y_scale, rb = b_scale / y_scale,
// the zero points folded into one constant, two FMAs on the raw bytes (the header's formula).
struct AddConstants {
  float ra, rb, fixed, lo, hi;
};

AddConstants MakeAddConstants(const ByteQuantization& a, const ByteQuantization& b, const ByteQuantization& y) {
  const float ra = a.scale / y.scale, rb = b.scale / y.scale;
  const float fixed = static_cast<float>(y.zero_point) -
                      std::fmaf(ra, static_cast<float>(a.zero_point), rb * static_cast<float>(b.zero_point));
  return {ra, rb, fixed, Lowest(y), Highest(y)};
}

template <bool kAUnsigned, bool kBUnsigned>
void AddPortable(const AddConstants& k, const void* a, const void* b, void* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) {
    const float v = std::fmaf(LoadByte<kAUnsigned>(a, i), k.ra, std::fmaf(LoadByte<kBUnsigned>(b, i), k.rb, k.fixed));
    StoreByte(y, i, RoundAndSaturate(v, 0.0f, k.lo, k.hi));
  }
}

struct QuantizeConstants {
  float scale, zp, lo, hi;
};

QuantizeConstants MakeQuantizeConstants(const ByteQuantization& q) {
  return {q.scale, static_cast<float>(q.zero_point), Lowest(q), Highest(q)};
}

void QuantizePortable(const QuantizeConstants& k, const float* x, void* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) StoreByte(y, i, RoundAndSaturate(x[i] / k.scale, k.zp, k.lo, k.hi));
}

template <bool kUnsigned>
void DequantizePortable(const QuantizeConstants& k, const void* x, float* y, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) y[i] = (LoadByte<kUnsigned>(x, i) - k.zp) * k.scale;
}

// ---- AVX2: 8 lanes --------------------------------------------------------------------------------------------------

template <bool kUnsigned>
CONVOY_TARGET_AVX2 inline __m256 Load8(const uint8_t* p) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  if constexpr (kUnsigned) return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(bytes));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// q holds integers within the byte type's range: the low byte of each lane, packed.
CONVOY_TARGET_AVX2 inline void Store8(uint8_t* p, __m256 q) {
  const __m256i lanes = _mm256_cvtps_epi32(q);
  const __m256i low_bytes = _mm256_shuffle_epi8(
      lanes, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1,  //
                              0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
  const __m256i packed = _mm256_permutevar8x32_epi32(low_bytes, _mm256_setr_epi32(0, 4, 0, 0, 0, 0, 0, 0));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
}

CONVOY_TARGET_AVX2 inline __m256 RoundAndSaturate8(__m256 v, __m256 zero_point, __m256 lo, __m256 hi) {
  const __m256 q = _mm256_add_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zero_point);
  return _mm256_min_ps(_mm256_max_ps(q, lo), hi);  // MAXPS returns its second operand for NaN: lo
}

// Elements [i, count) in steps of 8 while a whole step fits; returns where it stopped.
template <bool kAUnsigned, bool kBUnsigned>
CONVOY_TARGET_AVX2 int64_t AddAvx2Steps(const AddConstants& k, const uint8_t* a, const uint8_t* b, uint8_t* y,
                                        int64_t i, int64_t count) {
  const __m256 ra = _mm256_set1_ps(k.ra), rb = _mm256_set1_ps(k.rb), fixed = _mm256_set1_ps(k.fixed);
  const __m256 zero = _mm256_setzero_ps(), lo = _mm256_set1_ps(k.lo), hi = _mm256_set1_ps(k.hi);
  for (; i + 8 <= count; i += 8) {
    const __m256 partial = _mm256_fmadd_ps(Load8<kBUnsigned>(b + i), rb, fixed);
    const __m256 v = _mm256_fmadd_ps(Load8<kAUnsigned>(a + i), ra, partial);
    Store8(y + i, RoundAndSaturate8(v, zero, lo, hi));
  }
  return i;
}

template <bool kAUnsigned, bool kBUnsigned>
CONVOY_TARGET_AVX2 void AddAvx2(const AddConstants& k, const void* a, const void* b, void* y, int64_t count) {
  const int64_t done = AddAvx2Steps<kAUnsigned, kBUnsigned>(k, Bytes(a), Bytes(b), Bytes(y), 0, count);
  AddPortable<kAUnsigned, kBUnsigned>(k, a, b, y, done, count);
}

CONVOY_TARGET_AVX2 int64_t QuantizeAvx2Steps(const QuantizeConstants& k, const float* x, uint8_t* y, int64_t i,
                                             int64_t count) {
  const __m256 scale = _mm256_set1_ps(k.scale), zp = _mm256_set1_ps(k.zp);
  const __m256 lo = _mm256_set1_ps(k.lo), hi = _mm256_set1_ps(k.hi);
  for (; i + 8 <= count; i += 8) {
    Store8(y + i, RoundAndSaturate8(_mm256_div_ps(_mm256_loadu_ps(x + i), scale), zp, lo, hi));
  }
  return i;
}

template <bool kUnsigned>
CONVOY_TARGET_AVX2 int64_t DequantizeAvx2Steps(const QuantizeConstants& k, const uint8_t* x, float* y, int64_t i,
                                               int64_t count) {
  const __m256 scale = _mm256_set1_ps(k.scale), zp = _mm256_set1_ps(k.zp);
  for (; i + 8 <= count; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_sub_ps(Load8<kUnsigned>(x + i), zp), scale));
  }
  return i;
}

CONVOY_TARGET_AVX2 void QuantizeRunsAvx2(const QuantizeConstants& k, const float* x, int64_t x_stride, uint8_t* y,
                                         int64_t y_stride, int64_t runs, int64_t width) {
  for (int64_t r = 0; r < runs; ++r, x += x_stride, y += y_stride) {
    QuantizePortable(k, x, y, QuantizeAvx2Steps(k, x, y, 0, width), width);
  }
}

template <bool kUnsigned>
CONVOY_TARGET_AVX2 void DequantizeRunsAvx2(const QuantizeConstants& k, const uint8_t* x, int64_t x_stride, float* y,
                                           int64_t y_stride, int64_t runs, int64_t width) {
  for (int64_t r = 0; r < runs; ++r, x += x_stride, y += y_stride) {
    DequantizePortable<kUnsigned>(k, x, y, DequantizeAvx2Steps<kUnsigned>(k, x, y, 0, width), width);
  }
}

// ---- AVX-512: 16 lanes, then one 8-lane step, then the scalar tail --------------------------------------------------

template <bool kUnsigned>
CONVOY_TARGET_AVX512 inline __m512 Load16(const uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  if constexpr (kUnsigned) return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(bytes));
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes));
}

CONVOY_TARGET_AVX512 inline void Store16(uint8_t* p, __m512 q) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(q)));
}

CONVOY_TARGET_AVX512 inline __m512 RoundAndSaturate16(__m512 v, __m512 zero_point, __m512 lo, __m512 hi) {
  const __m512 q = _mm512_add_ps(_mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zero_point);
  return _mm512_min_ps(_mm512_max_ps(q, lo), hi);  // VMAXPS returns its second operand for NaN: lo
}

template <bool kAUnsigned, bool kBUnsigned>
CONVOY_TARGET_AVX512 void AddAvx512(const AddConstants& k, const void* a_data, const void* b_data, void* y_data,
                                    int64_t count) {
  const uint8_t* a = Bytes(a_data);
  const uint8_t* b = Bytes(b_data);
  uint8_t* y = Bytes(y_data);
  const __m512 ra = _mm512_set1_ps(k.ra), rb = _mm512_set1_ps(k.rb), fixed = _mm512_set1_ps(k.fixed);
  const __m512 zero = _mm512_setzero_ps(), lo = _mm512_set1_ps(k.lo), hi = _mm512_set1_ps(k.hi);
  int64_t i = 0;
  for (; i + 16 <= count; i += 16) {
    const __m512 partial = _mm512_fmadd_ps(Load16<kBUnsigned>(b + i), rb, fixed);
    const __m512 v = _mm512_fmadd_ps(Load16<kAUnsigned>(a + i), ra, partial);
    Store16(y + i, RoundAndSaturate16(v, zero, lo, hi));
  }
  i = AddAvx2Steps<kAUnsigned, kBUnsigned>(k, a, b, y, i, count);
  AddPortable<kAUnsigned, kBUnsigned>(k, a_data, b_data, y_data, i, count);
}

CONVOY_TARGET_AVX512 void QuantizeRunsAvx512(const QuantizeConstants& k, const float* x, int64_t x_stride, uint8_t* y,
                                             int64_t y_stride, int64_t runs, int64_t width) {
  const __m512 scale = _mm512_set1_ps(k.scale), zp = _mm512_set1_ps(k.zp);
  const __m512 lo = _mm512_set1_ps(k.lo), hi = _mm512_set1_ps(k.hi);
  for (int64_t r = 0; r < runs; ++r, x += x_stride, y += y_stride) {
    int64_t i = 0;
    for (; i + 16 <= width; i += 16) {
      Store16(y + i, RoundAndSaturate16(_mm512_div_ps(_mm512_loadu_ps(x + i), scale), zp, lo, hi));
    }
    QuantizePortable(k, x, y, QuantizeAvx2Steps(k, x, y, i, width), width);
  }
}

template <bool kUnsigned>
CONVOY_TARGET_AVX512 void DequantizeRunsAvx512(const QuantizeConstants& k, const uint8_t* x, int64_t x_stride,
                                               float* y, int64_t y_stride, int64_t runs, int64_t width) {
  const __m512 scale = _mm512_set1_ps(k.scale), zp = _mm512_set1_ps(k.zp);
  for (int64_t r = 0; r < runs; ++r, x += x_stride, y += y_stride) {
    int64_t i = 0;
    for (; i + 16 <= width; i += 16) {
      _mm512_storeu_ps(y + i, _mm512_mul_ps(_mm512_sub_ps(Load16<kUnsigned>(x + i), zp), scale));
    }
    DequantizePortable<kUnsigned>(k, x, y, DequantizeAvx2Steps<kUnsigned>(k, x, y, i, width), width);
  }
}

// ---- dispatch -------------------------------------------------------------------------------------------------------

// `isa` if this CPU runs it, else the portable loops (a caller asking for more than the CPU has gets correct results).
CpuIsa Runnable(CpuIsa isa) { return CpuSupports(isa) ? isa : CpuIsa::kBaseline; }

template <bool kAUnsigned, bool kBUnsigned>
void Add(CpuIsa isa, const AddConstants& k, const void* a, const void* b, void* y, int64_t count) {
  switch (Runnable(isa)) {
    case CpuIsa::kAvx512: return AddAvx512<kAUnsigned, kBUnsigned>(k, a, b, y, count);
    case CpuIsa::kAvx2: return AddAvx2<kAUnsigned, kBUnsigned>(k, a, b, y, count);
    case CpuIsa::kBaseline: break;
  }
  AddPortable<kAUnsigned, kBUnsigned>(k, a, b, y, 0, count);
}

template <bool kUnsigned>
void Dequantize(CpuIsa isa, const QuantizeConstants& k, const uint8_t* x, int64_t x_stride, float* y,
                int64_t y_stride, int64_t runs, int64_t width) {
  switch (Runnable(isa)) {
    case CpuIsa::kAvx512: return DequantizeRunsAvx512<kUnsigned>(k, x, x_stride, y, y_stride, runs, width);
    case CpuIsa::kAvx2: return DequantizeRunsAvx2<kUnsigned>(k, x, x_stride, y, y_stride, runs, width);
    case CpuIsa::kBaseline: break;
  }
  for (int64_t r = 0; r < runs; ++r) DequantizePortable<kUnsigned>(k, x + r * x_stride, y + r * y_stride, 0, width);
}

}  // namespace

void QuantizedAddLoop(CpuIsa isa, const ByteQuantization& a, const void* a_data, const ByteQuantization& b,
                      const void* b_data, const ByteQuantization& y, void* y_data, int64_t count) {
  const AddConstants k = MakeAddConstants(a, b, y);
  if (a.is_unsigned) {
    if (b.is_unsigned) return Add<true, true>(isa, k, a_data, b_data, y_data, count);
    return Add<true, false>(isa, k, a_data, b_data, y_data, count);
  }
  if (b.is_unsigned) return Add<false, true>(isa, k, a_data, b_data, y_data, count);
  return Add<false, false>(isa, k, a_data, b_data, y_data, count);
}

void QuantizeRuns(CpuIsa isa, const ByteQuantization& q, const float* x, int64_t x_stride, void* y_data,
                  int64_t y_stride, int64_t runs, int64_t width) {
  const QuantizeConstants k = MakeQuantizeConstants(q);
  uint8_t* y = Bytes(y_data);
  switch (Runnable(isa)) {
    case CpuIsa::kAvx512: return QuantizeRunsAvx512(k, x, x_stride, y, y_stride, runs, width);
    case CpuIsa::kAvx2: return QuantizeRunsAvx2(k, x, x_stride, y, y_stride, runs, width);
    case CpuIsa::kBaseline: break;
  }
  for (int64_t r = 0; r < runs; ++r) QuantizePortable(k, x + r * x_stride, y + r * y_stride, 0, width);
}

void DequantizeRuns(CpuIsa isa, const ByteQuantization& q, const void* x, int64_t x_stride, float* y,
                    int64_t y_stride, int64_t runs, int64_t width) {
  const QuantizeConstants k = MakeQuantizeConstants(q);
  if (q.is_unsigned) return Dequantize<true>(isa, k, Bytes(x), x_stride, y, y_stride, runs, width);
  return Dequantize<false>(isa, k, Bytes(x), x_stride, y, y_stride, runs, width);
}

}  // namespace convoy::cpu
