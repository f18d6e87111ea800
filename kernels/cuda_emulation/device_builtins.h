// The CUDA device language for the emulation: threadIdx/blockIdx/blockDim/gridDim, the function qualifiers,
// __syncthreads, warp collectives (__shfl*_sync, __ballot_sync, __any/__all_sync, __syncwarp, __match_*_sync,
// __reduce_*_sync), atomics, fences, and the math and bit intrinsics. Only for emulation builds: kernel sources get it
// through cuda_compat.cuh (or the cuda_emulated_library prelude, cuda_emulation.h).
//
// Barriers and warp collectives record where they were called (__builtin_FILE/__builtin_LINE default arguments), so
// a divergence is reported with the kernel's own source lines. Shared memory is declared with the macros of
// cuda_compat.cuh (CONVOY_SHARED_ARRAY, CONVOY_DYNAMIC_SHARED): a plain `__shared__` does not compile here on
// purpose, because a C++ local array would silently be per-thread.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_DEVICE_BUILTINS_H_
#define CONVOY_KERNELS_CUDA_EMULATION_DEVICE_BUILTINS_H_

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <utility>

#include "kernels/cuda_emulation/block_scheduler.h"
#include "kernels/cuda_emulation/vector_types.h"

// ------------------------------------------------------------------------------------------- qualifiers and builtins
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __constant__
#define __managed__
#define __align__(n) alignas(n)
#define __grid_constant__
#define __shared__ __shared___is_not_emulated__declare_shared_memory_with_CONVOY_SHARED_ARRAY
// __restrict__ is a GCC/Clang keyword already.

#define threadIdx (static_cast<const uint3&>(::convoy::cuda_emulation::tls_coordinates.thread_idx))
#define blockIdx (static_cast<const uint3&>(::convoy::cuda_emulation::tls_coordinates.block_idx))
#define blockDim (static_cast<const dim3&>(::convoy::cuda_emulation::tls_coordinates.block_dim))
#define gridDim (static_cast<const dim3&>(::convoy::cuda_emulation::tls_coordinates.grid_dim))
inline constexpr int warpSize = 32;

namespace convoy::cuda_emulation {

inline SourceLocation Here(const char* file, int line) { return SourceLocation{file, line}; }

// Storage behind CONVOY_SHARED_ARRAY / CONVOY_DYNAMIC_SHARED.
inline void* StaticSharedStorage(const void* key, size_t bytes, size_t alignment, const char* file, int line) {
  return BlockScheduler::Current().StaticShared(key, bytes, alignment, Here(file, line));
}
inline void* DynamicSharedStorage() { return BlockScheduler::Current().DynamicShared(); }

// --------------------------------------------------------------------------------------------- warp collectives
template <typename T>
uint64_t ToLaneBits(const T& value) {
  static_assert(sizeof(T) <= sizeof(uint64_t) && std::is_trivially_copyable_v<T>,
                "warp collectives exchange trivially copyable values of at most 8 bytes");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T FromLaneBits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}

enum class ShuffleMode { kIndex, kUp, kDown, kXor };

struct ShuffleLane {
  uint64_t value;
  int operand;  // source lane, delta or lane mask
  int width;
  uint64_t result;
};

std::string ResolveShuffleIndex(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveShuffleUp(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveShuffleDown(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveShuffleXor(void* const payloads[kWarpSize], unsigned mask);
inline constexpr WarpCollectiveKind kShflSync{"__shfl_sync", &ResolveShuffleIndex};
inline constexpr WarpCollectiveKind kShflUpSync{"__shfl_up_sync", &ResolveShuffleUp};
inline constexpr WarpCollectiveKind kShflDownSync{"__shfl_down_sync", &ResolveShuffleDown};
inline constexpr WarpCollectiveKind kShflXorSync{"__shfl_xor_sync", &ResolveShuffleXor};

template <typename T>
T Shuffle(const WarpCollectiveKind& kind, unsigned mask, T value, int operand, int width, SourceLocation where) {
  ShuffleLane lane{ToLaneBits(value), operand, width, 0};
  BlockScheduler::Current().WarpCollective(kind, mask, &lane, where);
  return FromLaneBits<T>(lane.result);
}

// Ballot, any, all, match and reduce share one payload: a value in, a 32-bit answer (and a flag) out.
struct VoteLane {
  uint64_t value;
  unsigned result;
  int flag;
};
std::string ResolveBallot(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveMatchAny(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveMatchAll(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceAdd(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceMinSigned(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceMaxSigned(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceMinUnsigned(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceMaxUnsigned(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceAnd(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceOr(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveReduceXor(void* const payloads[kWarpSize], unsigned mask);
std::string ResolveNothing(void* const payloads[kWarpSize], unsigned mask);
inline constexpr WarpCollectiveKind kBallotSync{"__ballot_sync", &ResolveBallot};
inline constexpr WarpCollectiveKind kAnySync{"__any_sync", &ResolveBallot};
inline constexpr WarpCollectiveKind kAllSync{"__all_sync", &ResolveBallot};
inline constexpr WarpCollectiveKind kUniSync{"__uni_sync", &ResolveBallot};
inline constexpr WarpCollectiveKind kMatchAnySync{"__match_any_sync", &ResolveMatchAny};
inline constexpr WarpCollectiveKind kMatchAllSync{"__match_all_sync", &ResolveMatchAll};
inline constexpr WarpCollectiveKind kReduceAddSync{"__reduce_add_sync", &ResolveReduceAdd};
inline constexpr WarpCollectiveKind kReduceMinSync{"__reduce_min_sync", &ResolveReduceMinSigned};
inline constexpr WarpCollectiveKind kReduceMaxSync{"__reduce_max_sync", &ResolveReduceMaxSigned};
inline constexpr WarpCollectiveKind kReduceMinUnsignedSync{"__reduce_min_sync", &ResolveReduceMinUnsigned};
inline constexpr WarpCollectiveKind kReduceMaxUnsignedSync{"__reduce_max_sync", &ResolveReduceMaxUnsigned};
inline constexpr WarpCollectiveKind kReduceAndSync{"__reduce_and_sync", &ResolveReduceAnd};
inline constexpr WarpCollectiveKind kReduceOrSync{"__reduce_or_sync", &ResolveReduceOr};
inline constexpr WarpCollectiveKind kReduceXorSync{"__reduce_xor_sync", &ResolveReduceXor};
inline constexpr WarpCollectiveKind kSyncWarp{"__syncwarp", &ResolveNothing};

inline VoteLane Vote(const WarpCollectiveKind& kind, unsigned mask, uint64_t value, SourceLocation where) {
  VoteLane lane{value, 0, 0};
  BlockScheduler::Current().WarpCollective(kind, mask, &lane, where);
  return lane;
}

[[noreturn]] inline void Trap(const char* what, SourceLocation where) {
  std::string message = std::string(what) + " at " + where.ToString();
  BlockScheduler::Current().FailCurrentThread(std::move(message));
}

}  // namespace convoy::cuda_emulation

// ---------------------------------------------------------------------------------------------------- barriers
inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using convoy::cuda_emulation::BlockScheduler;
  BlockScheduler::Current().SyncThreads({file, line}, BlockScheduler::BarrierReduction::kNone, 0);
}
inline int __syncthreads_count(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using convoy::cuda_emulation::BlockScheduler;
  return BlockScheduler::Current().SyncThreads({file, line}, BlockScheduler::BarrierReduction::kCount, predicate);
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using convoy::cuda_emulation::BlockScheduler;
  return BlockScheduler::Current().SyncThreads({file, line}, BlockScheduler::BarrierReduction::kAnd, predicate);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using convoy::cuda_emulation::BlockScheduler;
  return BlockScheduler::Current().SyncThreads({file, line}, BlockScheduler::BarrierReduction::kOr, predicate);
}
inline void __syncwarp(unsigned mask = 0xFFFFFFFFu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  BlockScheduler::Current().WarpCollective(kSyncWarp, mask, nullptr, {file, line});
}
inline unsigned __activemask() { return convoy::cuda_emulation::BlockScheduler::Current().LiveLanesOfCurrentWarp(); }

// ------------------------------------------------------------------------------------------------- shuffles
template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize, const char* file = __builtin_FILE(),
              int line = __builtin_LINE()) {
  return convoy::cuda_emulation::Shuffle(convoy::cuda_emulation::kShflSync, mask, var, src_lane, width, {file, line});
}
template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                 int line = __builtin_LINE()) {
  return convoy::cuda_emulation::Shuffle(convoy::cuda_emulation::kShflUpSync, mask, var, static_cast<int>(delta), width,
                                         {file, line});
}
template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize, const char* file = __builtin_FILE(),
                   int line = __builtin_LINE()) {
  return convoy::cuda_emulation::Shuffle(convoy::cuda_emulation::kShflDownSync, mask, var, static_cast<int>(delta),
                                         width, {file, line});
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize, const char* file = __builtin_FILE(),
                  int line = __builtin_LINE()) {
  return convoy::cuda_emulation::Shuffle(convoy::cuda_emulation::kShflXorSync, mask, var, lane_mask, width,
                                         {file, line});
}

// ---------------------------------------------------------------------------------------------------- votes
inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  return Vote(kBallotSync, mask, predicate != 0, {file, line}).result;
}
inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  return Vote(kAnySync, mask, predicate != 0, {file, line}).result != 0;
}
inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  return Vote(kAllSync, mask, predicate != 0, {file, line}).result == mask;
}
inline int __uni_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  const unsigned ballot = Vote(kUniSync, mask, predicate != 0, {file, line}).result;
  return ballot == 0 || ballot == mask;
}
template <typename T>
unsigned __match_any_sync(unsigned mask, T value, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  return Vote(kMatchAnySync, mask, ToLaneBits(value), {file, line}).result;
}
template <typename T>
unsigned __match_all_sync(unsigned mask, T value, int* predicate, const char* file = __builtin_FILE(),
                          int line = __builtin_LINE()) {
  using namespace convoy::cuda_emulation;  // NOLINT
  const VoteLane lane = Vote(kMatchAllSync, mask, ToLaneBits(value), {file, line});
  *predicate = lane.flag;
  return lane.result;
}

#define CONVOY_EMULATION_WARP_REDUCE(name, type, kind)                                                            \
  inline type name(unsigned mask, type value, const char* file = __builtin_FILE(), int line = __builtin_LINE()) { \
    using namespace convoy::cuda_emulation; /* NOLINT */                                                          \
    return static_cast<type>(Vote(kind, mask, static_cast<uint32_t>(value), {file, line}).result);                \
  }
CONVOY_EMULATION_WARP_REDUCE(__reduce_add_sync, unsigned, kReduceAddSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_add_sync, int, kReduceAddSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_min_sync, unsigned, kReduceMinUnsignedSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_min_sync, int, kReduceMinSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_max_sync, unsigned, kReduceMaxUnsignedSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_max_sync, int, kReduceMaxSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_and_sync, unsigned, kReduceAndSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_or_sync, unsigned, kReduceOrSync)
CONVOY_EMULATION_WARP_REDUCE(__reduce_xor_sync, unsigned, kReduceXorSync)
#undef CONVOY_EMULATION_WARP_REDUCE

// ---------------------------------------------------------------------------------------- atomics and fences
// Blocks run concurrently on several OS threads, so global atomics are real atomics (GCC __atomic builtins).
#define CONVOY_EMULATION_INTEGER_ATOMICS(T)                                                                  \
  inline T atomicAdd(T* address, T value) { return __atomic_fetch_add(address, value, __ATOMIC_SEQ_CST); }   \
  inline T atomicSub(T* address, T value) { return __atomic_fetch_sub(address, value, __ATOMIC_SEQ_CST); }   \
  inline T atomicAnd(T* address, T value) { return __atomic_fetch_and(address, value, __ATOMIC_SEQ_CST); }   \
  inline T atomicOr(T* address, T value) { return __atomic_fetch_or(address, value, __ATOMIC_SEQ_CST); }     \
  inline T atomicXor(T* address, T value) { return __atomic_fetch_xor(address, value, __ATOMIC_SEQ_CST); }   \
  inline T atomicExch(T* address, T value) { return __atomic_exchange_n(address, value, __ATOMIC_SEQ_CST); } \
  inline T atomicCAS(T* address, T compare, T value) {                                                       \
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);        \
    return compare;                                                                                          \
  }                                                                                                          \
  inline T atomicMax(T* address, T value) {                                                                  \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                                                      \
    while (old < value &&                                                                                    \
           !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {   \
    }                                                                                                        \
    return old;                                                                                              \
  }                                                                                                          \
  inline T atomicMin(T* address, T value) {                                                                  \
    T old = __atomic_load_n(address, __ATOMIC_SEQ_CST);                                                      \
    while (value < old &&                                                                                    \
           !__atomic_compare_exchange_n(address, &old, value, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {   \
    }                                                                                                        \
    return old;                                                                                              \
  }
CONVOY_EMULATION_INTEGER_ATOMICS(int)
CONVOY_EMULATION_INTEGER_ATOMICS(unsigned int)
CONVOY_EMULATION_INTEGER_ATOMICS(unsigned long long)  // NOLINT: CUDA's type
CONVOY_EMULATION_INTEGER_ATOMICS(long long)           // NOLINT: CUDA's type
#undef CONVOY_EMULATION_INTEGER_ATOMICS

namespace convoy::cuda_emulation {
template <typename T, typename Op>
T AtomicFloatingUpdate(T* address, Op op) {
  T old;
  __atomic_load(address, &old, __ATOMIC_SEQ_CST);
  T desired = op(old);
  while (!__atomic_compare_exchange(address, &old, &desired, true, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    desired = op(old);
  }
  return old;
}
}  // namespace convoy::cuda_emulation

inline float atomicAdd(float* address, float value) {
  return convoy::cuda_emulation::AtomicFloatingUpdate(address, [value](float old) { return old + value; });
}
inline double atomicAdd(double* address, double value) {
  return convoy::cuda_emulation::AtomicFloatingUpdate(address, [value](double old) { return old + value; });
}
inline float atomicExch(float* address, float value) {
  float old;
  __atomic_exchange(address, &value, &old, __ATOMIC_SEQ_CST);
  return old;
}
inline unsigned atomicInc(unsigned* address, unsigned limit) {
  return convoy::cuda_emulation::AtomicFloatingUpdate(address,
                                                      [limit](unsigned old) { return old >= limit ? 0u : old + 1; });
}
inline unsigned atomicDec(unsigned* address, unsigned limit) {
  return convoy::cuda_emulation::AtomicFloatingUpdate(
      address, [limit](unsigned old) { return (old == 0 || old > limit) ? limit : old - 1; });
}
#define atomicAdd_block atomicAdd
#define atomicAdd_system atomicAdd
#define atomicMax_block atomicMax
#define atomicMin_block atomicMin
#define atomicCAS_block atomicCAS
#define atomicExch_block atomicExch

inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_block() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

// ------------------------------------------------------------------------------------------- memory access hints
template <typename T>
T __ldg(const T* address) {
  return *address;
}
template <typename T>
T __ldcg(const T* address) {
  return *address;
}
template <typename T>
T __ldca(const T* address) {
  return *address;
}
template <typename T>
T __ldcs(const T* address) {
  return *address;
}
template <typename T>
T __ldlu(const T* address) {
  return *address;
}
template <typename T>
void __stcg(T* address, T value) {
  *address = value;
}
template <typename T>
void __stcs(T* address, T value) {
  *address = value;
}
template <typename T>
void __stwb(T* address, T value) {
  *address = value;
}

// ------------------------------------------------------------------------------------------- math intrinsics
// The fast-math intrinsics compute the accurate libm function here: tolerances written for the GPU's approximations
// are looser than the emulation needs. glibc already declares (but does not export) __expf and friends, hence macros.
#define __expf(x) (::expf(x))
#define __logf(x) (::logf(x))
#define __log2f(x) (::log2f(x))
#define __log10f(x) (::log10f(x))
#define __exp10f(x) (::exp10f(x))
#define __powf(x, y) (::powf((x), (y)))
#define __sinf(x) (::sinf(x))
#define __cosf(x) (::cosf(x))
#define __tanf(x) (::tanf(x))
#define __sincosf(x, s, c) (::sincosf((x), (s), (c)))
inline float __fdividef(float x, float y) { return x / y; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return std::sqrt(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline double rsqrt(double x) { return 1.0 / std::sqrt(x); }
inline float __saturatef(float x) { return std::isnan(x) ? 0.0f : std::fmin(std::fmax(x, 0.0f), 1.0f); }
inline float __fadd_rn(float x, float y) { return x + y; }
inline float __fsub_rn(float x, float y) { return x - y; }
inline float __fmul_rn(float x, float y) { return x * y; }
inline float __fdiv_rn(float x, float y) { return x / y; }
inline float __fmaf_rn(float x, float y, float z) { return std::fma(x, y, z); }
inline float __fadd_rz(float x, float y) { return x + y; }
inline float __fmul_rz(float x, float y) { return x * y; }
inline int __float2int_rn(float x) { return static_cast<int>(std::nearbyint(x)); }
inline int __float2int_rz(float x) { return static_cast<int>(x); }
inline int __float2int_rd(float x) { return static_cast<int>(std::floor(x)); }
inline int __float2int_ru(float x) { return static_cast<int>(std::ceil(x)); }
inline unsigned __float2uint_rn(float x) { return static_cast<unsigned>(std::nearbyint(x)); }
inline float __int2float_rn(int x) { return static_cast<float>(x); }
inline float __uint2float_rn(unsigned x) { return static_cast<float>(x); }
inline int __float_as_int(float x) {
  int r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline unsigned __float_as_uint(float x) {
  unsigned r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __int_as_float(int x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline float __uint_as_float(unsigned x) {
  float r;
  std::memcpy(&r, &x, 4);
  return r;
}
inline long long __double_as_longlong(double x) {
  long long r;
  std::memcpy(&r, &x, 8);
  return r;
}  // NOLINT
inline double __longlong_as_double(long long x) {
  double r;
  std::memcpy(&r, &x, 8);
  return r;
}  // NOLINT

// Integer intrinsics.
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }  // NOLINT
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz(static_cast<unsigned>(x)); }
inline int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }  // NOLINT
inline int __ffs(int x) { return __builtin_ffs(x); }
inline int __ffsll(long long x) { return __builtin_ffsll(x); }  // NOLINT
inline unsigned __brev(unsigned x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1);
  x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4);
  return __builtin_bswap32(x);
}
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned selector) {
  const uint64_t bytes = (uint64_t{y} << 32) | x;
  unsigned result = 0;
  for (int i = 0; i < 4; ++i) result |= ((bytes >> (((selector >> (4 * i)) & 7) * 8)) & 0xFF) << (8 * i);
  return result;
}
inline unsigned __funnelshift_l(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>(((uint64_t{hi} << 32 | lo) << (shift & 31)) >> 32);
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
  return static_cast<unsigned>((uint64_t{hi} << 32 | lo) >> (shift & 31));
}
inline unsigned __umulhi(unsigned x, unsigned y) { return static_cast<unsigned>((uint64_t{x} * y) >> 32); }
inline int __mulhi(int x, int y) { return static_cast<int>((int64_t{x} * y) >> 32); }
inline int __mul24(int x, int y) { return ((x << 8) >> 8) * ((y << 8) >> 8); }
inline unsigned __umul24(unsigned x, unsigned y) { return (x & 0xFFFFFFu) * (y & 0xFFFFFFu); }

// CUDA's unqualified min/max overloads.
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }  // NOLINT
inline long long max(long long a, long long b) { return a > b ? a : b; }  // NOLINT
inline float min(float a, float b) { return std::fmin(a, b); }
inline float max(float a, float b) { return std::fmax(a, b); }
inline double min(double a, double b) { return std::fmin(a, b); }
inline double max(double a, double b) { return std::fmax(a, b); }

// Timing and control.
inline long long clock64() {  // NOLINT: CUDA's type
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
inline void __nanosleep(unsigned) {}
inline void __trap(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  convoy::cuda_emulation::Trap("__trap()", {file, line});
}
inline void __brkpt(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  convoy::cuda_emulation::Trap("__brkpt()", {file, line});
}

#endif  // CONVOY_KERNELS_CUDA_EMULATION_DEVICE_BUILTINS_H_
