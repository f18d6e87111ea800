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

script_name=test_image
source "$repo_root/deploy/docker_lib.sh"  # reporting, Docker, base images, builds (shared with test_scale_out.sh)

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
