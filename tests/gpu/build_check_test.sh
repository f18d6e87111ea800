#!/bin/bash
# Bazel wrapper (manual, local) for build_check.sh: the CMake/nvcc build of the GPU check compiles and links here.
set -euo pipefail
script="$(readlink -f "$(dirname "$0")/build_check.sh")"
exec "$script" "${TEST_TMPDIR:-/tmp}/convoy_gpu_check_build"
