#!/bin/bash
# The GPU check, for a machine with an NVIDIA GPU and CUDA 13 (nvcc, cmake, ninja) but no Bazel and no internet.
#   1. finds cuDNN (CONVOY_CUDNN_LIBRARY, the CUDA toolkit, ldconfig, or the nvidia-cudnn / torch Python packages);
#   2. uses tests/gpu/out/prebuilt/gpu_check if it was carried from a dev machine (tests/gpu/build_check.sh) and
#      starts here, else builds it with CMake + nvcc from this source tree (Abseil from the carried tests/gpu/out/deps
#      bundle, or the system);
#   3. runs it: every CUDA conv2d/GEMM algorithm against the CPU reference on the GPU (PASS/FAIL per case), then the
#      ResNet-50 conv layers (batch 1, 8, 32; FP16 NHWC and FP32-as-TF32 NHWC) against cuDNN's best, with a table and
#      the geometric-mean time ratio.
# Output: $OUT/gpu_check.txt when $OUT is set, else tests/gpu/out/gpu_check.txt (plus run_gpu_check.log beside it).
# Budget: under 5 minutes on an H200 (build ~1-2 min only when no prebuilt binary runs; the check itself ~1-2 min).
set -uo pipefail
case "${1:-}" in -h|--help) echo "usage: tests/gpu/run_gpu_check.sh   (no arguments; CONVOY_CUDNN_LIBRARY, OUT)"; sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="${OUT:-$here/out}"
mkdir -p "$out_dir"
log="$out_dir/run_gpu_check.log"
report="$out_dir/gpu_check.txt"
exec > >(tee "$log") 2>&1
say() { echo "[run_gpu_check $(date +%H:%M:%S)] $*"; }

say "repo: $(cd "$here/../.." && git rev-parse --short HEAD 2>/dev/null || echo unknown)"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv 2>&1 | head -3

# ---- cuDNN (dlopen'ed by the driver) --------------------------------------------------------------------------
cuda_root="${CUDA_PATH:-/usr/local/cuda}"
if [[ -z "${CONVOY_CUDNN_LIBRARY:-}" ]]; then
  candidates=("$cuda_root"/lib64/libcudnn.so.9 "$cuda_root"/lib/libcudnn.so.9 /usr/local/cuda-13.0/lib/libcudnn.so.9)
  candidates+=($(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF}'))
  py_dirs="$(python3 - 2>/dev/null <<'PY'
import importlib.util, os
for name in ("nvidia.cudnn", "torch"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec and spec.submodule_search_locations:
        print(os.path.join(list(spec.submodule_search_locations)[0], "lib"))
PY
)"
  for d in $py_dirs; do candidates+=("$d/libcudnn.so.9"); done
  for c in "${candidates[@]}"; do
    if [[ -f "$c" ]]; then export CONVOY_CUDNN_LIBRARY="$c"; break; fi
  done
fi
if [[ -n "${CONVOY_CUDNN_LIBRARY:-}" ]]; then
  cudnn_dir="$(dirname "$CONVOY_CUDNN_LIBRARY")"
  export LD_LIBRARY_PATH="$cudnn_dir:${LD_LIBRARY_PATH:-}"
  say "cuDNN: $CONVOY_CUDNN_LIBRARY"
else
  say "cuDNN: not found (the check runs; the comparison column says SKIPPED)"
fi

# ---- the binary ---------------------------------------------------------------------------------------------
binary=""
prebuilt="$here/out/prebuilt/gpu_check"
if [[ -x "$prebuilt" ]] && "$prebuilt" --probe > /dev/null 2>&1; then
  binary="$prebuilt"
  say "using the carried binary $prebuilt"
else
  [[ -x "$prebuilt" ]] && say "the carried binary does not start here: $("$prebuilt" --probe 2>&1 | head -3)"
  build="${CONVOY_GPU_CHECK_BUILD:-/tmp/convoy_gpu_check_build}"
  nvcc="$(command -v nvcc || echo "$cuda_root/bin/nvcc")"
  deps_flag=()
  [[ -d "$here/out/deps/include/absl" ]] && deps_flag=(-DCONVOY_DEPS_DIR="$here/out/deps")
  cudnn_include=""
  for d in "$cuda_root/include" ${py_dirs:-}; do
    [[ -f "$d/cudnn.h" ]] && cudnn_include="$d" && break
    [[ -f "$(dirname "$d")/include/cudnn.h" ]] && cudnn_include="$(dirname "$d")/include" && break
  done
  say "building with CMake + nvcc ($nvcc) into $build"
  if cmake -S "$here" -B "$build" -G Ninja -DCMAKE_CUDA_COMPILER="$nvcc" -DCMAKE_CUDA_ARCHITECTURES=90 \
       "${deps_flag[@]}" ${cudnn_include:+-DCONVOY_CUDNN_INCLUDE_DIR="$cudnn_include"} &&
     ninja -C "$build" -j "$(nproc)" gpu_check; then
    binary="$build/gpu_check"
  else
    say "FAIL: the build failed (see above)"
    echo "gpu_check: 0 passed, 1 failed (build)" > "$report"
    exit 1
  fi
fi

# ---- run ----------------------------------------------------------------------------------------------------
say "running $binary (report: $report)"
timeout "${CONVOY_GPU_CHECK_TIMEOUT:-270}" "$binary" --out="$report" "$@"
status=$?
[[ $status -eq 124 ]] && say "FAIL: the check ran past its time limit" && echo "gpu_check: TIMEOUT" >> "$report"
say "done: exit status $status; $(tail -1 "$report" 2>/dev/null)"
exit $status
