# Shared by deploy/test_image.sh and deploy/test_scale_out.sh (sourced, not run): finding or starting Docker, the
# Debian base images (made with debootstrap where no registry is reachable), the CUDA image's stand-in, and building
# deploy/Dockerfile's targets; and the scripts' reporting (say, fail, skip, finish). The sourcing script sets
# script_name, start_time, repo_root, work (a scratch folder), mode (full|fast), results (an array),
# started_daemon_pid, cuda_root and cuda_image.
# shellcheck shell=bash

# ---- 0. Reporting ------------------------------------------------------------------------------------------------
# say (timestamped, prefixed with $script_name), elapsed, and finish / fail / skip: the summary of $results, then the
# closing line "<script_name>: PASSED|FAILED|SKIPPED..." and exit 0, 1 or 77 (timed from $start_time).
say() { printf '[%s %s] %s\n' "$script_name" "$(date +%H:%M:%S)" "$*"; }
elapsed() { echo $(( $(date +%s) - $1 )); }
finish() {  # status (PASSED|FAILED|SKIPPED), message
  say "summary:"
  for r in "${results[@]}"; do echo "  $r"; done
  echo "$script_name: $1${2:+: $2} ($(elapsed "$start_time") s)"
  case "$1" in PASSED) exit 0 ;; SKIPPED) exit 77 ;; *) exit 1 ;; esac
}
fail() { say "FAILED: $*"; finish FAILED "$*"; }
skip() { say "SKIPPED: $*"; finish SKIPPED "$*"; }

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
