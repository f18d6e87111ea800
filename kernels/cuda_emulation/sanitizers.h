// Which sanitizer this translation unit is built with, for the CUDA emulation's fiber and shared-memory annotations.
// GCC defines __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; Clang answers __has_feature.
#ifndef CONVOY_KERNELS_CUDA_EMULATION_SANITIZERS_H_
#define CONVOY_KERNELS_CUDA_EMULATION_SANITIZERS_H_

#if defined(__SANITIZE_ADDRESS__)
#define CONVOY_EMULATION_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CONVOY_EMULATION_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define CONVOY_EMULATION_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CONVOY_EMULATION_TSAN 1
#endif
#endif

#ifndef CONVOY_EMULATION_ASAN
#define CONVOY_EMULATION_ASAN 0
#endif
#ifndef CONVOY_EMULATION_TSAN
#define CONVOY_EMULATION_TSAN 0
#endif

#endif  // CONVOY_KERNELS_CUDA_EMULATION_SANITIZERS_H_
