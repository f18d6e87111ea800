#!/usr/bin/env bash
# Builds Convoy's container images from deploy/Dockerfile and checks them running, on a Debian machine.
#
#   deploy/test_image.sh               # full: the CPU-only and the CUDA images built in Docker (Bazel inside), run
#   deploy/test_image.sh --fast        # the runtime image from binaries built here (target "prebuilt"), run
#   options: --skip-cuda (full mode, the CPU image only)  --keep (leave the network and any daemon it started)
#            -h|--help
#
# 1. Docker: uses a running daemon; else installs Debian's docker.io (apt-get) if dockerd is missing and starts
#    `dockerd --storage-driver=overlay2 --iptables=false --bridge=none` (stopped again at exit).
# 2. Base images: debian:12 and debian:12-slim as they are in the daemon, else pulled, else made here with
#    debootstrap (minbase, this machine's Debian mirror; slim leaves out docs, man pages and locales) - it says so.
#    The CUDA image: CUDA_IMAGE (default nvidia/cuda:13.0.0-devel-ubuntu24.04) when present or pullable, else an
#    image of the toolkit installed here (CUDA_PATH or /usr/local/cuda) fills its role.
# 3. Builds (BuildKit, --network=host): full mode targets "cpu" and "runtime" (CUDA); fast mode "prebuilt" from
#    $CONVOY_BAZEL_BIN (default: `bazel build` here) with the binaries stripped. Times and image sizes are printed.
# 4. Runs each built image on its own Docker network with model_repo/ mounted read-only (--device=auto: the CPU
#    without a GPU), waits for the image's HEALTHCHECK to report healthy, runs deploy/check_served.py against it
#    (model index, inference, classification of the sample photos where the tree has tools/classify.py, /metrics),
#    then `docker stop` and checks a clean drain: exit code 0 and the server's shutdown_complete log line.
# Ends with "test_image: PASSED ...", "test_image: FAILED ..." (exit 1) or "test_image: SKIPPED: reason" (exit 77:
# Docker cannot run on this machine, e.g. not root and no daemon, or the kernel refuses overlay2).
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
mode=full
with_cuda=1
keep=0
for arg in "$@"; do
  case "$arg" in
    --fast) mode=fast ;;
    --skip-cuda) with_cuda=0 ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test_image.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

start_time=$(date +%s)
work="$(mktemp -d /tmp/convoy-test-image.XXXXXX)"
venv="${CONVOY_VENV:-$repo_root/.venv}"
cuda_root="${CUDA_PATH:-/usr/local/cuda}"
cuda_image="${CUDA_IMAGE:-nvidia/cuda:13.0.0-devel-ubuntu24.04}"
network=convoy-test-image
started_daemon_pid=""
containers=()
results=()   # "name: value" lines for the summary

say() { printf '[test_image %s] %s\n' "$(date +%H:%M:%S)" "$*"; }
elapsed() { echo $(( $(date +%s) - $1 )); }
finish() {  # status (PASSED|FAILED|SKIPPED), message
  say "summary:"
  for r in "${results[@]}"; do echo "  $r"; done
  echo "test_image: $1${2:+: $2} ($(elapsed "$start_time") s)"
  case "$1" in PASSED) exit 0 ;; SKIPPED) exit 77 ;; *) exit 1 ;; esac
}
fail() { say "FAILED: $*"; finish FAILED "$*"; }
skip() { say "SKIPPED: $*"; finish SKIPPED "$*"; }

cleanup() {
  for c in "${containers[@]}"; do docker rm -f -v "$c" >/dev/null 2>&1; done
  if [ "$keep" != 1 ]; then
    docker network rm "$network" >/dev/null 2>&1
    if [ -n "$started_daemon_pid" ]; then
      say "stopping the dockerd this run started (pid $started_daemon_pid)"
      kill "$started_daemon_pid" 2>/dev/null
      for _ in $(seq 60); do kill -0 "$started_daemon_pid" 2>/dev/null || break; sleep 0.5; done
    fi
  fi
  rm -rf "$work"
}
trap cleanup EXIT

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo -n "$@"; fi; }

# ---- 1. Docker ---------------------------------------------------------------------------------------------------
# A client that builds with BuildKit: one with the buildx plugin, or a client older than 23 (BuildKit built in).
pick_docker_client() {
  local dir c v dirs
  IFS=: read -ra dirs <<<"$PATH"
  for dir in "${dirs[@]}"; do  # every docker on PATH, in order (`type -a` shows only the hashed one)
    c="$dir/docker"
    [ -x "$c" ] || continue
    if "$c" buildx version >/dev/null 2>&1; then echo "$c"; return; fi
    v="$("$c" version --format '{{.Client.Version}}' 2>/dev/null)"
    if [ -n "$v" ] && [ "${v%%.*}" -lt 23 ] 2>/dev/null; then echo "$c"; return; fi
  done
}

ensure_docker() {
  if ! command -v docker >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    if ! command -v dockerd >/dev/null 2>&1; then
      command -v apt-get >/dev/null 2>&1 || skip "no Docker daemon and no apt-get to install Debian's docker.io"
      say "installing Debian's docker.io"
      as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq \
        --no-install-recommends docker.io >"$work/apt.log" 2>&1 \
        || { tail -5 "$work/apt.log"; skip "could not install docker.io (not root, or not a Debian machine)"; }
    fi
    [ "$(id -u)" -eq 0 ] || skip "no Docker daemon running, and starting dockerd needs root"
    local log=/var/log/convoy-dockerd.log
    say "starting dockerd --storage-driver=overlay2 --iptables=false --bridge=none (log $log)"
    dockerd --storage-driver=overlay2 --iptables=false --bridge=none >"$log" 2>&1 &
    started_daemon_pid=$!
    for _ in $(seq 60); do
      docker info >/dev/null 2>&1 && break
      kill -0 "$started_daemon_pid" 2>/dev/null || break
      sleep 1
    done
    if ! docker info >/dev/null 2>&1; then
      tail -5 "$log"
      started_daemon_pid=""
      skip "dockerd did not start on this machine (see $log)"
    fi
  fi
  docker_client="$(pick_docker_client)"
  [ -n "$docker_client" ] || fail "no docker client here builds with BuildKit (install docker-buildx, or Debian's docker.io)"
  docker() { command "$docker_client" "$@"; }
  export DOCKER_BUILDKIT=1
  say "docker: daemon $(docker version --format '{{.Server.Version}}' 2>/dev/null), client $docker_client" \
      "$(docker version --format '{{.Client.Version}}' 2>/dev/null), storage $(docker info --format '{{.Driver}}')"
}

# ---- 2. Base images ----------------------------------------------------------------------------------------------
debian_mirror() {
  local uri
  uri="$(grep -hoE '(URIs:|^deb) +[a-z]+://[^ ]+/debian/?( |$)' /etc/apt/sources.list /etc/apt/sources.list.d/* \
         2>/dev/null | head -1 | awk '{print $2}')"
  echo "${CONVOY_DEBIAN_MIRROR:-${uri:-http://deb.debian.org/debian}}"
}

# Makes debian:12 and debian:12-slim with debootstrap the way Debian's official images are made: minbase,
# bookworm + bookworm-updates + bookworm-security sources, no package lists or .deb caches left; slim also drops
# documentation, man pages and translations (and keeps dpkg from installing them later).
make_base_images() {
  command -v debootstrap >/dev/null 2>&1 || as_root env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends debootstrap >"$work/apt.log" 2>&1 \
    || fail "debootstrap is not installed and could not be installed"
  local mirror root="$work/rootfs" t0=$(date +%s)
  mirror="$(debian_mirror)"
  say "making debian:12 and debian:12-slim locally: debootstrap --variant=minbase bookworm from $mirror"
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log"; fail "debootstrap failed"; }
  rm -f "$root/etc/apt/sources.list"
  cat >"$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian*}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  cat >"$root/etc/apt/apt.conf.d/docker-clean" <<'EOF'
// Image builds: no .deb files or binary caches kept after apt runs.
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
EOF
  echo 'Acquire::Languages "none";' >"$root/etc/apt/apt.conf.d/docker-no-languages"
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/var/log/*.log
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - debian:12 >/dev/null || fail "docker import debian:12"
  cat >"$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'EOF'
# slim image: no documentation, man pages or translations
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$root/usr/share/doc" -mindepth 1 ! -name copyright ! -type d -delete 2>/dev/null
  rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/*
  find "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} + 2>/dev/null
  tar -C "$root" -c . | docker import -c 'CMD ["bash"]' - debian:12-slim >/dev/null || fail "docker import debian:12-slim"
  rm -rf "$root"
  say "made debian:12 ($(image_mb debian:12) MB) and debian:12-slim ($(image_mb debian:12-slim) MB) in $(elapsed "$t0") s"
  results+=("base images: made locally with debootstrap (no registry reachable)")
}

image_mb() { docker image inspect --format '{{.Size}}' "$1" | awk '{printf "%.0f", $1 / 1e6}'; }
have_image() { docker image inspect "$1" >/dev/null 2>&1; }
try_pull() { timeout 60 docker pull -q "$1" >/dev/null 2>&1; }

ensure_base_images() {
  local need=(debian:12-slim)
  [ "$mode" = full ] && need+=(debian:12)
  local missing=()
  for i in "${need[@]}"; do have_image "$i" || try_pull "$i" || missing+=("$i"); done
  if [ ${#missing[@]} -eq 0 ]; then
    say "base images present: ${need[*]}"
    return
  fi
  say "cannot pull ${missing[*]} (no registry reachable)"
  make_base_images
}

# The CUDA devel image's role: CUDA_IMAGE if present or pullable, else the toolkit installed here as an image
# holding /usr/local/cuda-X.Y (the only path the Dockerfile copies from it).
ensure_cuda_image() {
  local toolkit version
  if have_image "$cuda_image" || try_pull "$cuda_image"; then
    say "CUDA image: $cuda_image"
    return
  fi
  [ -x "$cuda_root/bin/nvcc" ] || fail "cannot pull $cuda_image and no CUDA toolkit at $cuda_root (set CUDA_PATH, or --skip-cuda)"
  toolkit="$(readlink -f "$cuda_root")"
  version="$(sed -n 's/.*release \([0-9]*\.[0-9]*\).*/\1/p' < <("$toolkit/bin/nvcc" --version))"
  [ "$(basename "$toolkit")" = "cuda-$version" ] \
    || fail "the toolkit at $toolkit is not in a folder named cuda-$version, which the Dockerfile copies"
  cuda_version="$version"
  cuda_image="convoy-local/cuda-toolkit:$version"
  if have_image "$cuda_image"; then
    say "cannot pull NVIDIA's image; using $cuda_image, made earlier from $toolkit"
  else
    local t0=$(date +%s)
    say "cannot pull NVIDIA's image; making $cuda_image from the toolkit installed at $toolkit ($(du -sh "$toolkit" | cut -f1))"
    tar -C / -c "${toolkit#/}" | docker import - "$cuda_image" >/dev/null || fail "docker import of the toolkit"
    say "made $cuda_image in $(elapsed "$t0") s"
  fi
  results+=("CUDA image: $cuda_image (the toolkit installed at $toolkit; NVIDIA's image not reachable)")
}

# ---- 3. Builds ---------------------------------------------------------------------------------------------------
build_image() {  # tag, target, context, extra args...
  local tag="$1" target="$2" context="$3" t0=$(date +%s)
  shift 3
  say "docker build --target=$target -t $tag $* (log $work/build-$target.log)"
  if ! docker build --network=host --progress=plain -f "$repo_root/deploy/Dockerfile" --target="$target" -t "$tag" \
       "$@" "$context" >"$work/build-$target.log" 2>&1; then
    tail -40 "$work/build-$target.log"
    fail "docker build --target=$target"
  fi
  local took; took=$(elapsed "$t0")
  grep -E 'INFO: (Elapsed time|[0-9]+ processes)' "$work/build-$target.log" | sed 's/^#[0-9]* [0-9.]* /    bazel: /'
  say "built $tag in $took s: $(image_mb "$tag") MB"
  results+=("image $tag (target $target): $(image_mb "$tag") MB, built in $took s")
}

prebuilt_context() {
  local bin_dir="${CONVOY_BAZEL_BIN:-}"
  if [ -z "$bin_dir" ]; then
    say "bazel build //server:convoy_server //deploy:convoy_health_probe"
    bazel build --color=no --curses=no //server:convoy_server //deploy:convoy_health_probe >"$work/bazel.log" 2>&1 \
      || { tail -20 "$work/bazel.log"; fail "bazel build of the binaries"; }
    bin_dir="$(bazel info bazel-bin 2>/dev/null)"
  fi
  mkdir -p "$work/context/bin"
  for b in server/convoy_server deploy/convoy_health_probe; do
    [ -x "$bin_dir/$b" ] || fail "no $bin_dir/$b (build it, or set CONVOY_BAZEL_BIN)"
    cp -L "$bin_dir/$b" "$work/context/bin/" && strip "$work/context/bin/$(basename "$b")"
  done
  [ -x "$bin_dir/server/tools/convoy" ] && cli="$bin_dir/server/tools/convoy"
  say "binaries from $bin_dir ($(du -sh "$work/context/bin" | cut -f1) stripped)"
}

# ---- 4. Run and check --------------------------------------------------------------------------------------------
run_and_check() {  # image tag
  local tag="$1" name="convoy-test-$$-${1//[^a-zA-Z0-9]/-}" t0=$(date +%s) python="$venv/bin/python"
  [ -x "$python" ] || fail "no virtualenv at $venv (tools/setup.sh makes it; tritonclient runs the checks)"
  docker network inspect "$network" >/dev/null 2>&1 || docker network create "$network" >/dev/null \
    || fail "docker network create $network"
  say "docker run $tag (network $network, model_repo mounted read-only at /models)"
  containers+=("$name")
  docker run -d --name "$name" --network "$network" -v "$repo_root/model_repo:/models:ro" "$tag" >/dev/null \
    || fail "docker run $tag"
  local status="" ip=""
  for _ in $(seq 240); do
    status="$(docker inspect --format '{{if .State.Health}}{{.State.Health.Status}}{{end}}/{{.State.Status}}' "$name")"
    case "$status" in
      healthy/*) break ;;
      */exited|*/dead|unhealthy/*) break ;;
    esac
    sleep 1
  done
  if [ "${status%%/*}" != healthy ]; then
    docker logs "$name" 2>&1 | tail -30
    fail "$tag did not become healthy (status $status after $(elapsed "$t0") s)"
  fi
  local healthy_after; healthy_after=$(elapsed "$t0")
  say "$tag healthy after $healthy_after s (the HEALTHCHECK: convoy_health_probe --service=readiness)"
  docker logs "$name" 2>&1 | grep -E 'ready in|device:|READY' | sed 's/^/    /'
  ip="$(docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$name")"
  say "deploy/check_served.py --url=$ip:8001 --metrics_url=http://$ip:8002/metrics"
  if ! "$python" deploy/check_served.py --url="$ip:8001" --metrics_url="http://$ip:8002/metrics" \
       ${cli:+--cli="$cli"} ${CONVOY_SAMPLE_PHOTOS:+--photos="$CONVOY_SAMPLE_PHOTOS"}; then
    docker logs "$name" 2>&1 | tail -20
    fail "checks against $tag"
  fi
  local t1=$(date +%s) code
  say "docker stop -t 40 $name (SIGTERM: drain, then exit)"
  docker stop -t 40 "$name" >/dev/null
  code="$(docker inspect --format '{{.State.ExitCode}}' "$name")"
  docker logs "$name" 2>&1 | grep -E 'event=(shutdown|drain|algorithm_cache)' | sed 's/^/    /'
  if [ "$code" != 0 ] || ! docker logs "$name" 2>&1 | grep -q 'event=shutdown_complete' \
     || docker logs "$name" 2>&1 | grep -q 'event=drain_incomplete'; then
    docker logs "$name" 2>&1 | tail -20
    fail "$tag did not drain cleanly on docker stop (exit code $code)"
  fi
  say "$tag stopped in $(elapsed "$t1") s, exit code 0, drain complete"
  results+=("run $tag: healthy after $healthy_after s, checks passed, docker stop -> exit 0 after $(elapsed "$t1") s")
  docker rm -v "$name" >/dev/null
}

# ---- main --------------------------------------------------------------------------------------------------------
say "mode: $mode$([ "$mode" = full ] && [ "$with_cuda" = 0 ] && echo ' (CPU image only)'); repo $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
ensure_docker
ensure_base_images
# The convoy tool built on this machine, to compare the served answers with (fast mode: the same build's).
cli="${CONVOY_CLI:-}"
[ -z "$cli" ] && [ -x "$repo_root/bazel-bin/server/tools/convoy" ] && cli="$repo_root/bazel-bin/server/tools/convoy"
cuda_version=13.0
if [ "$mode" = fast ]; then
  prebuilt_context
  build_image convoy:prebuilt prebuilt "$work/context"
  run_and_check convoy:prebuilt
else
  build_image convoy:cpu cpu "$repo_root"
  if [ "$with_cuda" = 1 ]; then
    ensure_cuda_image
    build_image convoy:latest runtime "$repo_root" --build-arg CUDA_IMAGE="$cuda_image" \
      --build-arg CUDA_VERSION="$cuda_version"
  fi
  run_and_check convoy:cpu
  [ "$with_cuda" = 1 ] && run_and_check convoy:latest
fi
finish PASSED "$mode mode"
