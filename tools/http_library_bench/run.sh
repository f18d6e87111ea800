#!/usr/bin/env bash
# Measures the two HTTP server libraries docs/server.md compares (libevent's evhttp, cpp-httplib) with wrk on one
# trivial GET and one 588 KiB POST (the sample ResNet's FP32 request size), keep-alive, 8 connections. Servers on
# core 0, wrk on core 1 when there are two cores.
#   tools/http_library_bench/run.sh [seconds]
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
secs="${1:-5}"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
out="$(mktemp -d)"
g++ -O2 -std=c++17 -o "$out/evhttp_hello" "$here/evhttp_hello.cc" -levent
g++ -O2 -std=c++17 -o "$out/httplib_hello" "$here/httplib_hello.cc" -lcpp-httplib -lpthread
cat > "$out/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = string.rep("x", 602112)
wrk.headers["Content-Type"] = "application/octet-stream"
LUA
lscpu | grep 'Model name'
for lib in evhttp httplib; do
  port=$([ "$lib" = evhttp ] && echo 18080 || echo 18081)
  taskset -c 0 "$out/${lib}_hello" "$port" & pid=$!
  sleep 0.5
  get=$(taskset -c 1 wrk -t1 -c8 -d"${secs}s" "http://127.0.0.1:$port/v2/health/live" | grep -E 'Requests/sec|Latency')
  post=$(taskset -c 1 wrk -t1 -c8 -d"${secs}s" -s "$out/post.lua" "http://127.0.0.1:$port/echo_size" | grep -E 'Requests/sec|Latency')
  kill "$pid"; wait "$pid" 2>/dev/null || true
  echo "$lib GET  : $(echo $get)"
  echo "$lib POST : $(echo $post)"
done
rm -rf "$out"
