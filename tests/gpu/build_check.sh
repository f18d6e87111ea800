#!/bin/bash
# Builds the GPU check exactly as run_gpu_check.sh does on the GPU machine (CMake + nvcc, no Bazel) and proves it
# compiles and links here; leaves what a GPU session carries over in tests/gpu/out/ (git-ignored):
#   out/deps/      Abseil headers and static libraries (the GPU machine has no C++ Abseil)
#   out/prebuilt/  the gpu_check binary (static Abseil, cudart, libstdc++; cuDNN is dlopen'ed), tried first there
# Usage: tests/gpu/build_check.sh [build_dir]   (default /tmp/convoy_gpu_check_build; CONVOY_BUILD_JOBS, default 2)
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build="${1:-/tmp/convoy_gpu_check_build}"
jobs="${CONVOY_BUILD_JOBS:-2}"
nvcc="${CUDA_PATH:-/usr/local/cuda}/bin/nvcc"
[[ -x "$nvcc" ]] || { echo "build_check: no nvcc at $nvcc"; exit 1; }

deps="$here/out/deps"
rm -rf "$deps" && mkdir -p "$deps/include" "$deps/lib" "$here/out/prebuilt"
cp -r /usr/include/absl "$deps/include/"
cp /usr/lib/x86_64-linux-gnu/libabsl_*.a "$deps/lib/"

cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CUDA_COMPILER="$nvcc" -DCONVOY_DEPS_DIR="$deps" \
  -DCMAKE_CUDA_ARCHITECTURES="${CONVOY_CUDA_ARCHS:-90}"
ninja -C "$build" -j "$jobs" gpu_check
cp "$build/gpu_check" "$here/out/prebuilt/gpu_check"

"$here/out/prebuilt/gpu_check" --probe
echo "newest glibc symbol version needed: $(objdump -T "$here/out/prebuilt/gpu_check" | grep -o 'GLIBC_[0-9.]*' | sort -V | tail -1)"
# With no GPU the driver must say so cleanly (never crash or hang).
set +e
"$here/out/prebuilt/gpu_check" --no_bench --out="$build/no_gpu.txt" > /dev/null 2>&1
status=$?
set -e
if nvidia-smi > /dev/null 2>&1; then
  echo "build_check: a GPU is present; run tests/gpu/run_gpu_check.sh for the real check"
elif [[ $status -ne 1 ]] || ! grep -q "^FAIL no CUDA device" "$build/no_gpu.txt"; then
  echo "build_check: without a GPU the driver should fail cleanly with 'FAIL no CUDA device' (status $status)"
  cat "$build/no_gpu.txt"
  exit 1
fi
echo "build_check: OK ($(du -h "$here/out/prebuilt/gpu_check" | cut -f1) binary in tests/gpu/out/prebuilt)"
