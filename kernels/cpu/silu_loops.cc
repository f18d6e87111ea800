// The vectorized SiLU and sigmoid loops; see silu_loops.h. Compiled with -ffp-contract=off (BUILD): the only FMAs are the
// explicit ones, so every version rounds the same operations.
#include "kernels/cpu/silu_loops.h"

#include <immintrin.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#define CONVOY_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define CONVOY_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f")))

namespace convoy::cpu {
namespace {

constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2Hi = 0.693145751953125f;         // ln 2 to 16 bits: k * kLn2Hi is exact for |k| <= 128
constexpr float kLn2Lo = 1.428606765330187045e-06f;  // ln 2 - kLn2Hi
constexpr float kLowest = -87.0f, kHighest = 88.0f;  // e^t stays a normal float
constexpr float kC2 = 1.0f / 2, kC3 = 1.0f / 6, kC4 = 1.0f / 24, kC5 = 1.0f / 120, kC6 = 1.0f / 720;

// Which function a loop computes: SiLU x / (1 + e^-x), or sigmoid 1 / (1 + e^-x).
enum class Logistic { kSilu, kSigmoid };

template <Logistic kF>
float LogisticScalar(float x) {
  const float t = std::fmin(std::fmax(-x, kLowest), kHighest);  // NaN: fmax returns kLowest, the NaN stays in x
  const float k = std::nearbyint(t * kLog2e);
  const float r = std::fmaf(-k, kLn2Lo, std::fmaf(-k, kLn2Hi, t));
  float p = std::fmaf(kC6, r, kC5);
  p = std::fmaf(p, r, kC4);
  p = std::fmaf(p, r, kC3);
  p = std::fmaf(p, r, kC2);
  p = std::fmaf(p, r, 1.0f);
  p = std::fmaf(p, r, 1.0f);
  const uint32_t bits = static_cast<uint32_t>(static_cast<int32_t>(k) + 127) << 23;  // 2^k, k in [-126, 127]
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  if (kF == Logistic::kSilu) {
    return x < kLowest ? -0.0f : x / (1.0f + p * scale);  // below -87 the exact value is under 1.5e-36 in magnitude
  }
  if (std::isnan(x)) return x;
  return x < kLowest ? 0.0f : 1.0f / (1.0f + p * scale);  // below -87 the exact value is under 1.7e-38
}

template <Logistic kF>
void LogisticPortable(float* x, int64_t begin, int64_t end) {
  for (int64_t i = begin; i < end; ++i) x[i] = LogisticScalar<kF>(x[i]);
}

template <Logistic kF>
CONVOY_TARGET_AVX2 int64_t LogisticAvx2Steps(float* x, int64_t i, int64_t n) {
  const __m256 log2e = _mm256_set1_ps(kLog2e), ln2_hi = _mm256_set1_ps(kLn2Hi), ln2_lo = _mm256_set1_ps(kLn2Lo);
  const __m256 lowest = _mm256_set1_ps(kLowest), highest = _mm256_set1_ps(kHighest), one = _mm256_set1_ps(1.0f);
  const __m256 c2 = _mm256_set1_ps(kC2), c3 = _mm256_set1_ps(kC3), c4 = _mm256_set1_ps(kC4);
  const __m256 c5 = _mm256_set1_ps(kC5), c6 = _mm256_set1_ps(kC6);
  const __m256 tiny = _mm256_set1_ps(kF == Logistic::kSilu ? -0.0f : 0.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    // MAXPS returns its second operand when either is NaN: lowest, as fmax; the NaN stays in v.
    const __m256 t = _mm256_min_ps(_mm256_max_ps(_mm256_sub_ps(_mm256_setzero_ps(), v), lowest), highest);
    const __m256 k = _mm256_round_ps(_mm256_mul_ps(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256 r = _mm256_fnmadd_ps(k, ln2_lo, _mm256_fnmadd_ps(k, ln2_hi, t));
    __m256 p = _mm256_fmadd_ps(c6, r, c5);
    p = _mm256_fmadd_ps(p, r, c4);
    p = _mm256_fmadd_ps(p, r, c3);
    p = _mm256_fmadd_ps(p, r, c2);
    p = _mm256_fmadd_ps(p, r, one);
    p = _mm256_fmadd_ps(p, r, one);
    const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
    __m256 y = _mm256_div_ps(kF == Logistic::kSilu ? v : one, _mm256_add_ps(one, e));
    y = _mm256_blendv_ps(y, tiny, _mm256_cmp_ps(v, lowest, _CMP_LT_OQ));
    if (kF == Logistic::kSigmoid) y = _mm256_blendv_ps(y, v, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
    _mm256_storeu_ps(x + i, y);
  }
  return i;
}

template <Logistic kF>
CONVOY_TARGET_AVX2 void LogisticAvx2(float* x, int64_t n) {
  LogisticPortable<kF>(x, LogisticAvx2Steps<kF>(x, 0, n), n);
}

template <Logistic kF>
CONVOY_TARGET_AVX512 void LogisticAvx512(float* x, int64_t n) {
  const __m512 log2e = _mm512_set1_ps(kLog2e), ln2_hi = _mm512_set1_ps(kLn2Hi), ln2_lo = _mm512_set1_ps(kLn2Lo);
  const __m512 lowest = _mm512_set1_ps(kLowest), highest = _mm512_set1_ps(kHighest), one = _mm512_set1_ps(1.0f);
  const __m512 c2 = _mm512_set1_ps(kC2), c3 = _mm512_set1_ps(kC3), c4 = _mm512_set1_ps(kC4);
  const __m512 c5 = _mm512_set1_ps(kC5), c6 = _mm512_set1_ps(kC6);
  const __m512 tiny = _mm512_set1_ps(kF == Logistic::kSilu ? -0.0f : 0.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    const __m512 t = _mm512_min_ps(_mm512_max_ps(_mm512_sub_ps(_mm512_setzero_ps(), v), lowest), highest);
    const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(t, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m512 r = _mm512_fnmadd_ps(k, ln2_lo, _mm512_fnmadd_ps(k, ln2_hi, t));
    __m512 p = _mm512_fmadd_ps(c6, r, c5);
    p = _mm512_fmadd_ps(p, r, c4);
    p = _mm512_fmadd_ps(p, r, c3);
    p = _mm512_fmadd_ps(p, r, c2);
    p = _mm512_fmadd_ps(p, r, one);
    p = _mm512_fmadd_ps(p, r, one);
    const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
    const __m512 e = _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
    __m512 y = _mm512_div_ps(kF == Logistic::kSilu ? v : one, _mm512_add_ps(one, e));
    y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, lowest, _CMP_LT_OQ), y, tiny);
    if (kF == Logistic::kSigmoid) y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), y, v);
    _mm512_storeu_ps(x + i, y);
  }
  LogisticPortable<kF>(x, LogisticAvx2Steps<kF>(x, i, n), n);
}

template <Logistic kF>
void LogisticInPlace(CpuIsa isa, float* x, int64_t n) {
  switch (CpuSupports(isa) ? isa : CpuIsa::kBaseline) {
    case CpuIsa::kAvx512: return LogisticAvx512<kF>(x, n);
    case CpuIsa::kAvx2: return LogisticAvx2<kF>(x, n);
    case CpuIsa::kBaseline: break;
  }
  LogisticPortable<kF>(x, 0, n);
}

}  // namespace

void SiluInPlace(CpuIsa isa, float* x, int64_t n) { LogisticInPlace<Logistic::kSilu>(isa, x, n); }

void SigmoidInPlace(CpuIsa isa, float* x, int64_t n) { LogisticInPlace<Logistic::kSigmoid>(isa, x, n); }

}  // namespace convoy::cpu
