#!/usr/bin/env bash
# Convoy scaled out in Docker: replicas behind HAProxy (deploy/compose/balancer), as docker-compose.scale.yaml runs
# them, driven with plain `docker run` (the same images, the same haproxy.cfg, the replicas sharing the DNS name
# "convoy" on one network) so that it needs no Compose.
#
#   deploy/test_scale_out.sh               # rolling restart under load: must lose no request
#   deploy/test_scale_out.sh --throughput  # 1 replica vs 2 behind the balancer, each replica held to one core
#   options: --image=TAG (a Convoy image already built, e.g. convoy:cpu; default: target "prebuilt" from the binaries
#            built here, as deploy/test_image.sh --fast, tagged for this run only)  --model=NAME (default resnet_classifier)
#            --model_dir=DIR (serve the model folder DIR, config.yaml and version folders, instead of model_repo/NAME;
#            its name is the folder's: e.g. a ResNet-50 for --throughput, where compute should dominate a request)
#            --exit-delay=SECONDS (the replicas' --exit_delay_seconds, default 5; 0 shows what it prevents)
#            --keep (leave the containers and network)  -h|--help
#
# Rolling restart: 2 replicas (--exit_delay_seconds=5) and the balancer on a network of their own; perf_analyzer
# over gRPC (concurrency 4) and a second one over HTTP/REST (concurrency 2) run through the balancer while each
# replica in turn gets `docker stop` (SIGTERM: readiness NOT_SERVING, still serving for 5 s while HAProxy takes it out
# of rotation, drain, exit 0) and `docker start`, the next one only once HAProxy has it UP again in both backends.
# PASSED when neither perf_analyzer saw a failed request (exit 0, no error), the balancer logged only answered
# requests (status 200, no termination flags; some of them HTTP), every replica's /metrics shows served requests and
# no failure (read before each stop and at the end), each stop drained cleanly (exit code 0, readiness_withdrawn then
# shutdown_complete, no drain_incomplete), and both perf_analyzers were still running after the last restart.
#
# Throughput: the replicas pinned to one core each (--cpuset-cpus, CONVOY_CPU_THREADS=1, OMP_NUM_THREADS=1), the
# balancer and perf_analyzer left to the scheduler; perf_analyzer at concurrency 8 through the balancer with 1, then
# 2 replicas; prints inferences/s (perf_analyzer's last window, and the replicas' own nv_inference_count over the
# whole run), the ratio, and the CPU seconds used by the balancer, each replica and perf_analyzer meanwhile. It
# asserts nothing about the ratio (it depends on the machine: see docs/deploy.md).
#
# Docker, base images and the Convoy image as deploy/test_image.sh does them (deploy/docker_lib.sh). Ends with
# "test_scale_out: PASSED ...", "FAILED ..." (exit 1) or "SKIPPED: reason" (exit 77: Docker cannot run here).
set -uo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
mode=fast
scenario=restart
exit_delay=5
image=""
model=resnet_classifier
model_dir=""
keep=0
for arg in "$@"; do
  case "$arg" in
    --throughput) scenario=throughput ;;
    --image=*) image="${arg#--image=}" ;;
    --model=*) model="${arg#--model=}" ;;
    --model_dir=*) model_dir="${arg#--model_dir=}"; model="$(basename "$model_dir")" ;;
    --exit-delay=*) exit_delay="${arg#--exit-delay=}" ;;
    --keep) keep=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "test_scale_out.sh: unknown argument $arg (see --help)" >&2; exit 2 ;;
  esac
done

start_time=$(date +%s)
work="$(mktemp -d /tmp/convoy-scale-out.XXXXXX)"
venv="${CONVOY_VENV:-$repo_root/.venv}"
python="$venv/bin/python"
cuda_root="${CUDA_PATH:-/usr/local/cuda}"
cuda_image=""
network="convoy-scale-out-$$"
balancer_image="convoy-balancer:test-$$"
built_tags=("$balancer_image")  # removed at exit (the layers stay cached)
started_daemon_pid=""
containers=()
results=()

script_name=test_scale_out
source "$repo_root/deploy/docker_lib.sh"  # reporting, Docker, base images and the Convoy image (as test_image.sh)

cleanup() {
  [ -n "${pa_pid:-}" ] && kill "$pa_pid" 2>/dev/null
  [ -n "${pa_http_pid:-}" ] && kill "$pa_http_pid" 2>/dev/null
  if [ "$keep" != 1 ]; then
    for c in "${containers[@]}"; do docker rm -f -v "$c" >/dev/null 2>&1; done
    docker network rm "$network" >/dev/null 2>&1
    for t in "${built_tags[@]}"; do docker rmi "$t" >/dev/null 2>&1; done
    if [ -n "$started_daemon_pid" ]; then
      say "stopping the dockerd this run started (pid $started_daemon_pid)"
      kill "$started_daemon_pid" 2>/dev/null
      for _ in $(seq 60); do kill -0 "$started_daemon_pid" 2>/dev/null || break; sleep 0.5; done
    fi
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# ---- helpers -------------------------------------------------------------------------------------------------------
# GET a URL, the body on stdout (nothing on an error); the virtualenv's Python, so the host needs no HTTP client.
http_get() {
  "$python" -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
    "$1" 2>/dev/null
}
ip_of() { docker inspect --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

# The model repository the replicas serve: only the model under test (a tree with models that fail to load would keep
# strict readiness, and so the balancer's check, from ever passing).
make_repository() {
  local source="${model_dir:-model_repo/$model}"
  [ -f "$source/config.yaml" ] || fail "no $source/config.yaml"
  mkdir -p "$work/models"
  cp -r "$source" "$work/models/$model"
  # No queueing deadline: a request the model's own policy rejects after waiting (resnet_classifier: 1 s, REJECT)
  # while one replica carries all the load during a restart is the model's choice, not a request the balancer lost.
  sed -i -E 's/^( *default_timeout_microseconds:) *[0-9]+/\1 0/' "$work/models/$model/config.yaml"
  chmod -R a+rX "$work/models"
}

start_replica() {  # name, extra docker run args...
  local name="$1"
  shift
  containers+=("$name")
  docker run -d --name "$name" --network "$network" --network-alias convoy \
    -e CONVOY_CPU_THREADS=1 -e OMP_NUM_THREADS=1 "$@" \
    -v "$work/models:/models:ro" "$image" --device=auto --exit_delay_seconds="$exit_delay" >/dev/null \
    || fail "docker run $image"
}

start_balancer() {
  containers+=("$balancer")
  docker run -d --name "$balancer" --network "$network" "$balancer_image" >/dev/null || fail "docker run $balancer_image"
  balancer_ip="$(ip_of "$balancer")"
}

# HAProxy's view of a backend (convoy_grpc by default, or convoy_http): "name status address" for each server slot
# that has an address (stats CSV: pxname,svname,...,status).
balancer_servers() {  # [backend]
  http_get "http://$balancer_ip:8404/stats;csv" | awk -F, -v backend="${1:-convoy_grpc}" \
    '$1 == backend && $2 != "BACKEND" && $2 != "FRONTEND" && $74 != "" {print $2, $18, $74}'
}
# Waits until the replica at this address is UP in the balancer's gRPC backend and, when asked, its HTTP one.
wait_up() {  # address, timeout seconds, [also http: 1]
  local address="$1" limit="$2" http="${3:-0}" t0=$(date +%s)
  until grep -q "UP $address:8001\$" <<<"$(balancer_servers)" &&
        { [ "$http" != 1 ] || grep -q "UP $address:8000\$" <<<"$(balancer_servers convoy_http)"; }; do
    [ "$(elapsed "$t0")" -ge "$limit" ] && { balancer_servers; balancer_servers convoy_http; return 1; }
    sleep 0.25
  done
}
# A counter of one replica's /metrics for the model under test (0 when absent).
replica_metric() {  # address, metric name
  http_get "http://$1:8002/metrics" \
    | awk -v name="$2" -v model="model=\"$model\"" '$1 ~ "^"name"\\{" && index($1, model) {sum += $2} END {printf "%d", sum}'
}
# CPU seconds a container has used so far (cgroup v1 cpuacct or v2 cpu.stat).
container_cpu_seconds() {
  local id f
  id="$(docker inspect --format '{{.Id}}' "$1")"
  for f in "/sys/fs/cgroup/cpuacct/docker/$id/cpuacct.usage" "/sys/fs/cgroup/cpu,cpuacct/docker/$id/cpuacct.usage"; do
    [ -r "$f" ] && { awk '{printf "%.2f", $1 / 1e9}' "$f"; return; }
  done
  for f in "/sys/fs/cgroup/docker/$id/cpu.stat" "/sys/fs/cgroup/system.slice/docker-$id.scope/cpu.stat"; do
    [ -r "$f" ] && { awk '$1 == "usage_usec" {printf "%.2f", $2 / 1e6}' "$f"; return; }
  done
  echo "?"
}

perf_analyzer_env() {
  local site
  site="$(ls -d "$venv"/lib/python3*/site-packages 2>/dev/null | head -1)"
  pa="$venv/bin/perf_analyzer"
  [ -x "$pa" ] || fail "no perf_analyzer in $venv (tools/setup.sh installs tritonclient[all]==2.41.1)"
  export LD_LIBRARY_PATH="$site/nvidia/cuda_runtime/lib:${LD_LIBRARY_PATH:-}"
}

# ---- images --------------------------------------------------------------------------------------------------------
prepare_images() {
  ensure_docker
  ensure_base_images
  if [ -z "$image" ]; then
    prebuilt_context
    # A tag of this run's own: another checkout's test may retag convoy:prebuilt meanwhile.
    image="convoy:scale-out-$$"
    build_image "$image" prebuilt "$work/context"
    built_tags+=("$image")
  else
    have_image "$image" || fail "no image $image (build it, or leave out --image)"
    results+=("image $image (given)")
  fi
  local t0=$(date +%s)
  say "docker build -t $balancer_image deploy/compose/balancer (HAProxy from Debian 12; the build runs haproxy -c)"
  docker build --network=host -q -t "$balancer_image" deploy/compose/balancer >"$work/build-balancer.log" 2>&1 \
    || { tail -30 "$work/build-balancer.log"; fail "docker build of the balancer image"; }
  say "built $balancer_image in $(elapsed "$t0") s: $(image_mb "$balancer_image") MB," \
      "$(docker run --rm --entrypoint haproxy "$balancer_image" -v 2>/dev/null | sed -n 1p)"
  results+=("balancer image $balancer_image: $(image_mb "$balancer_image") MB")
  docker network create "$network" >/dev/null || fail "docker network create $network"
  make_repository
  perf_analyzer_env
  [ -x "$python" ] || fail "no virtualenv at $venv"
}

# ---- rolling restart -----------------------------------------------------------------------------------------------
rolling_restart() {
  local replicas=("convoy-scale-$$-1" "convoy-scale-$$-2") r address
  balancer="convoy-scale-$$-balancer"
  declare -A served failed
  for r in "${replicas[@]}"; do start_replica "$r"; served[$r]=0; failed[$r]=0; done
  start_balancer
  for r in "${replicas[@]}"; do
    wait_up "$(ip_of "$r")" 180 1 || { docker logs "$r" 2>&1 | tail -20; fail "$r never came UP in the balancer"; }
  done
  say "2 replicas UP behind the balancer (gRPC $balancer_ip:8001: $(balancer_servers | tr '\n' ';')" \
      "HTTP $balancer_ip:8000: $(balancer_servers convoy_http | tr '\n' ';'))"

  # Long enough windows that the run outlasts both restarts (perf_analyzer needs at least 3 windows); the version
  # is given (-x 1) because the server-side statistics come from whichever replica answers, and a restarted one
  # starts from zero (perf_analyzer otherwise looks for the version whose counts grew).
  local pa_log="$work/perf_analyzer.log"
  say "perf_analyzer -m $model -x 1 -i grpc -u $balancer_ip:8001 --concurrency-range 4 -p 20000 (through the balancer)"
  "$pa" -m "$model" -x 1 -i grpc -u "$balancer_ip:8001" --concurrency-range 4 -p 20000 --max-trials 6 \
    --stability-percentage 100 -f "$work/perf_analyzer.csv" >"$pa_log" 2>&1 &
  pa_pid=$!
  # HTTP/REST clients through the same balancer at the same time (KServe v2 JSON+binary on port 8000).
  local pa_http_log="$work/perf_analyzer_http.log"
  say "perf_analyzer -m $model -x 1 -i http -u $balancer_ip:8000 --concurrency-range 2 -p 20000 (through the balancer)"
  "$pa" -m "$model" -x 1 -i http -u "$balancer_ip:8000" --concurrency-range 2 -p 20000 --max-trials 6 \
    --stability-percentage 100 >"$pa_http_log" 2>&1 &
  pa_http_pid=$!
  sleep 8
  kill -0 "$pa_pid" 2>/dev/null || { cat "$pa_log"; fail "perf_analyzer ended before the first restart"; }
  kill -0 "$pa_http_pid" 2>/dev/null || { cat "$pa_http_log"; fail "perf_analyzer (HTTP) ended before the first restart"; }

  for r in "${replicas[@]}"; do
    address="$(ip_of "$r")"
    served[$r]=$(( served[$r] + $(replica_metric "$address" nv_inference_request_success) ))
    failed[$r]=$(( failed[$r] + $(replica_metric "$address" nv_inference_request_failure) ))
    local t0=$(date +%s) code
    say "docker stop -t 45 $r ($address; it had served ${served[$r]} requests)"
    docker stop -t 45 "$r" >/dev/null
    code="$(docker inspect --format '{{.State.ExitCode}}' "$r")"
    docker logs "$r" >"$work/$r.log" 2>&1  # grep a file: `docker logs | grep -q` can die of SIGPIPE (pipefail)
    grep -E 'event=(readiness_withdrawn|shutdown|drain)' "$work/$r.log" | sed 's/^/    /'
    if [ "$code" != 0 ] || { [ "$exit_delay" -gt 0 ] && ! grep -q 'event=readiness_withdrawn' "$work/$r.log"; } \
       || ! grep -q 'event=shutdown_complete' "$work/$r.log" || grep -q 'event=drain_incomplete' "$work/$r.log"; then
      tail -20 "$work/$r.log"
      fail "$r did not leave cleanly (exit code $code)"
    fi
    : >"$work/$r.log"
    local stopped=$(elapsed "$t0")
    docker start "$r" >/dev/null || fail "docker start $r"
    address="$(ip_of "$r")"
    wait_up "$address" 180 1 || { docker logs "$r" 2>&1 | tail -20; fail "$r did not come back UP"; }
    say "$r stopped in $stopped s (exit 0, drained), started, UP again at $address after $(elapsed "$t0") s"
    results+=("restart $r: stop ${stopped} s, back UP after $(elapsed "$t0") s")
    kill -0 "$pa_pid" 2>/dev/null || { cat "$pa_log"; fail "perf_analyzer ended during the restarts (or failed)"; }
    kill -0 "$pa_http_pid" 2>/dev/null || { cat "$pa_http_log"; fail "perf_analyzer (HTTP) ended during the restarts"; }
    sleep 3
  done
  say "both replicas restarted; both perf_analyzers still running; waiting for them to finish"
  local protocol log pid pa_rc
  for protocol in grpc http; do
    if [ "$protocol" = grpc ]; then log="$pa_log" pid="$pa_pid"; else log="$pa_http_log" pid="$pa_http_pid"; fi
    wait "$pid"
    pa_rc=$?
    say "perf_analyzer over $protocol:"
    sed 's/^/    /' "$log" | grep -vE '^\s*$' | tail -25
    # A failed request makes perf_analyzer print the error ("Thread [n] had error: ...") and exit non-zero. Not
    # reaching its stability criterion is no failed request: noted, not failed.
    if grep -qiE 'error|failed to maintain' "$log"; then
      fail "perf_analyzer over $protocol reported failed requests (exit $pa_rc)"
    fi
    if [ "$pa_rc" != 0 ]; then
      grep -qi 'stable' "$log" || fail "perf_analyzer over $protocol exited $pa_rc"
      results+=("perf_analyzer over $protocol: no stable measurement (exit $pa_rc), no request failed")
    fi
  done
  pa_pid="" pa_http_pid=""

  for r in "${replicas[@]}"; do
    address="$(ip_of "$r")"
    local now_served now_failed
    now_served=$(replica_metric "$address" nv_inference_request_success)
    now_failed=$(replica_metric "$address" nv_inference_request_failure)
    [ "$now_served" -gt 0 ] || fail "$r served nothing after its restart"
    served[$r]=$(( served[$r] + now_served ))
    failed[$r]=$(( failed[$r] + now_failed ))
    say "$r: nv_inference_request_success $model = ${served[$r]} (${now_served} since its restart), failures ${failed[$r]}"
    results+=("$r served ${served[$r]} requests (${now_served} after its restart), ${failed[$r]} failed")
    [ "${failed[$r]}" = 0 ] || fail "$r counted ${failed[$r]} failed requests"
  done

  # Every inference request the balancer logged (gRPC ModelInfer, HTTP POST .../infer) was answered by a replica
  # (HTTP 200, termination flags ----); gRPC's own status rides in the trailers, which perf_analyzer checked above.
  local logged bad stats retries redispatches http_logged infer='ModelInfer|POST /v2/models/[^ ]*/infer'
  docker logs "$balancer" >"$work/balancer.log" 2>&1
  logged=$(grep -cE "$infer" "$work/balancer.log")
  http_logged=$(grep -cE 'POST /v2/models/[^ ]*/infer' "$work/balancer.log")
  [ "$http_logged" -gt 0 ] || fail "the balancer logged no HTTP inference request"
  bad=$(grep -E "$infer" "$work/balancer.log" | grep -vc ' 200 .* ---- ')
  stats="$(http_get "http://$balancer_ip:8404/stats;csv" | awk -F, '$1 == "convoy_grpc" && $2 == "BACKEND"')"
  retries=$(echo "$stats" | cut -d, -f16)
  redispatches=$(echo "$stats" | cut -d, -f17)
  say "balancer: $logged inference requests logged ($http_logged over HTTP), $bad not answered with 200;" \
      "gRPC retries $retries, redispatches $redispatches"
  grep -E '^Server convoy_(grpc|http)' "$work/balancer.log" | sed 's/^/    /' | tail -12
  results+=("balancer: $logged inference requests ($http_logged HTTP), $bad unanswered, $retries retries, $redispatches redispatches")
  [ "$bad" = 0 ] || { grep -E "$infer" "$work/balancer.log" | grep -v ' 200 .* ---- ' | head; \
                      fail "the balancer logged $bad requests not answered"; }
  local throughput
  throughput="$(awk -F, 'NR == 2 {print $2}' "$work/perf_analyzer.csv" 2>/dev/null)"
  results+=("perf_analyzer: 0 failed requests through 2 rolling restarts; last window ${throughput:-?} infer/s")
  finish PASSED "rolling restart of 2 replicas under gRPC and HTTP load, 0 failed requests"
}

# ---- throughput ----------------------------------------------------------------------------------------------------
measure() {  # label, replicas...
  local label="$1" r
  shift
  local cpu_before=() count_before=0 b_before pa_cpu t0 t1 line
  for r in "$@"; do
    cpu_before+=("$(container_cpu_seconds "$r")")
    count_before=$(( count_before + $(replica_metric "$(ip_of "$r")" nv_inference_count) ))
  done
  b_before="$(container_cpu_seconds "$balancer")"
  t0=$(date +%s.%N)
  local TIMEFORMAT='%U %S'
  say "$label: perf_analyzer -m $model -x 1 -i grpc -u $balancer_ip:8001 --concurrency-range 8 -p 15000"
  pa_cpu="$( { time "$pa" -m "$model" -x 1 -i grpc -u "$balancer_ip:8001" --concurrency-range 8 -p 15000 \
                 --max-trials 6 --stability-percentage 100 -f "$work/$label.csv" >"$work/$label.log" 2>&1; } 2>&1 )"
  t1=$(date +%s.%N)
  grep -q 'Throughput' "$work/$label.log" || { cat "$work/$label.log"; fail "perf_analyzer ($label)"; }
  grep -qiE 'error' "$work/$label.log" && { cat "$work/$label.log"; fail "perf_analyzer ($label) saw errors"; }
  local pa_ips counted=0 cpus="" replicas_s=0 i=0 used
  pa_ips="$(awk -F, 'NR == 2 {printf "%.1f", $2}' "$work/$label.csv" 2>/dev/null)"
  for r in "$@"; do
    counted=$(( counted + $(replica_metric "$(ip_of "$r")" nv_inference_count) ))
    used=$(awk -v a="$(container_cpu_seconds "$r")" -v b="${cpu_before[$i]}" 'BEGIN {printf "%.1f", a - b}')
    cpus+=", $r $used"
    replicas_s=$(awk -v a="$replicas_s" -v b="$used" 'BEGIN {print a + b}')
    i=$((i + 1))
  done
  # Over the whole run (warm-up and every window): the replicas' own count of inferences / wall time.
  local wall n counted_ips balancer_s client_s per_request
  wall=$(awk -v a="$t1" -v b="$t0" 'BEGIN {printf "%.1f", a - b}')
  n=$(( counted - count_before ))
  counted_ips=$(awk -v n="$n" -v w="$wall" 'BEGIN {printf "%.1f", n / w}')
  balancer_s=$(awk -v a="$(container_cpu_seconds "$balancer")" -v b="$b_before" 'BEGIN {printf "%.1f", a - b}')
  client_s=$(echo "$pa_cpu" | tail -1 | awk '{printf "%.1f", $1 + $2}')
  # CPU per inference: what each part costs, whatever share of the machine it got.
  per_request=$(awk -v n="$n" -v r="$replicas_s" -v b="$balancer_s" -v c="$client_s" \
    'BEGIN {printf "replicas %.2f ms, balancer %.2f ms, perf_analyzer %.2f ms", 1e3 * r / n, 1e3 * b / n, 1e3 * c / n}')
  line="$label replica(s): perf_analyzer ${pa_ips:-?} infer/s (last window), replicas counted ${counted_ips} infer/s over"
  line+=" ${wall} s; CPU seconds in that time: balancer ${balancer_s}, perf_analyzer ${client_s}${cpus};"
  line+=" CPU per inference: $per_request"
  say "$line"
  results+=("$line")
  eval "throughput_$label=$counted_ips"
}

throughput() {
  balancer="convoy-scale-$$-balancer"
  say "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  results+=("CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores")
  start_replica "convoy-scale-$$-1" --cpuset-cpus=0
  start_balancer
  wait_up "$(ip_of "convoy-scale-$$-1")" 180 || fail "replica 1 never came UP"
  measure one "convoy-scale-$$-1"
  start_replica "convoy-scale-$$-2" --cpuset-cpus=1
  wait_up "$(ip_of "convoy-scale-$$-2")" 180 || fail "replica 2 never came UP"
  measure two "convoy-scale-$$-1" "convoy-scale-$$-2"
  local ratio
  ratio=$(awk -v a="$throughput_two" -v b="$throughput_one" 'BEGIN {printf "%.2f", a / b}')
  results+=("2 replicas / 1 replica (counted): ${ratio}x (load average now $(cut -d' ' -f1-3 /proc/loadavg))")
  finish PASSED "throughput measured: 2 replicas = ${ratio}x 1 replica"
}

# ---- main ----------------------------------------------------------------------------------------------------------
say "scenario: $scenario; model $model; repo $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
prepare_images
case "$scenario" in
  restart) rolling_restart ;;
  throughput) throughput ;;
esac
