#!/usr/bin/env bash
# Installs everything Convoy needs on Debian 12: the Debian packages for the build and tests, and a Python
# virtualenv (.venv) with the test-side tools from PyPI. Idempotent and non-interactive; run as root or with sudo.
#
#   tools/setup.sh            # packages + virtualenv
#   CONVOY_SKIP_APT=1 ...     # only the virtualenv (a machine where the packages are already there)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${CONVOY_VENV:-$repo_root/.venv}"

# Every Debian package the build, the tests and the tools use. One per line so a diff shows what changed.
debian_packages=(
  bazel-bootstrap bazel-rules-java            # Bazel 4.2.3, offline
  g++ make pkg-config git ca-certificates
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libyaml-cpp-dev prometheus-cpp-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libonnx-dev python3-onnx
  libopenblas-dev libboost-context-dev
  libssl-dev openssl zlib1g-dev
  python3 python3-venv python3-pip python3-numpy python3-yaml
  python3-torch python3-torchvision           # exports the torchvision-shaped test models to ONNX
  libclang-rt-14-dev clang-14                 # LeakSanitizer/libFuzzer runtimes for fuzz targets
  libb64-0d                                   # needed by the perf_analyzer bundled in tritonclient 2.3x wheels
)

# Python test tools. Versions pinned where a newer one does not run on Debian 12 (glibc 2.36).
python_packages=(
  "numpy<2.3"
  "onnx==1.16.2"
  "onnxruntime==1.19.2"
  "tritonclient[grpc]==2.41.1"                # its bundled perf_analyzer runs on glibc 2.36 (newer ones need 2.38)
  "nvidia-cuda-runtime-cu12"                   # libcudart.so.12, which that perf_analyzer links even on the CPU
  "nvidia-cuda-cuobjdump" "nvidia-cuda-nvdisasm"  # SASS of the CUDA kernels (//kernels/cuda:kernel_resources_test)
  "pytest"
  "grpcio-health-checking"
  "protobuf<5"
  "pyyaml"
  "matplotlib"
)

say() { printf '[setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

install_debian_packages() {
  local missing=()
  for p in "${debian_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    say "all ${#debian_packages[@]} Debian packages already installed"
    return
  fi
  say "installing ${#missing[@]} Debian packages: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  as_root apt-get update -qq
  if ! as_root apt-get install -y -qq --no-install-recommends "${missing[@]}" >/tmp/convoy-apt.log 2>&1; then
    tail -20 /tmp/convoy-apt.log
    for p in "${missing[@]}"; do
      apt-cache policy "$p" 2>/dev/null | grep -q 'Candidate: [0-9]' || say "MISSING PACKAGE: $p (not in the configured Debian archives)"
    done
    say "apt-get install failed; see /tmp/convoy-apt.log"
    exit 1
  fi
}

install_python_tools() {
  if [ ! -x "$venv/bin/python" ]; then
    say "creating virtualenv $venv"
    # Debian's python3 (not a pyenv one) so Debian's python3-onnx/torch stay out of it but glibc matches.
    /usr/bin/python3 -m venv "$venv"
  fi
  local stamp="$venv/.convoy-requirements"
  local wanted
  wanted="$(printf '%s\n' "${python_packages[@]}")"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    say "virtualenv up to date ($venv)"
    return
  fi
  say "installing Python test tools into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
  printf '%s' "$wanted" >"$stamp"
}

if [ "${CONVOY_SKIP_APT:-0}" != 1 ]; then install_debian_packages; fi
install_python_tools
say "done. Next: tools/test.sh"
