#!/usr/bin/env bash
# Builds and starts the Convoy server on the sample models in model_repo/ (on the CPU where there is no GPU). It first
# installs whatever serving still needs (tools/setup.sh --serve: the build's Debian packages, Bazel, the generated
# sample models; about a second when nothing is missing; CONVOY_SKIP_SETUP=1 skips it).
# Extra arguments go to the server: tools/run_server.sh --grpc_port=9001 (the server's flags: convoy_server --help,
# docs/server.md).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
if [ "${CONVOY_SKIP_SETUP:-0}" != 1 ]; then bash tools/setup.sh --serve; fi
bazel build --color=no //server:convoy_server
# The generated sample models' files come from tools/setup.sh, not git: without them (setup skipped, or
# CONVOY_SKIP_SAMPLE_MODEL=1) the server still serves the other models and lists the missing ones as UNAVAILABLE
# (readiness then says not ready).
for model in efficientnet_lite0 lraspp_mobilenet_v3; do
  if [ ! -f "$repo_root/model_repo/$model/1/model.onnx" ]; then
    echo "run_server: model_repo/$model has no 1/model.onnx: run tools/setup.sh to generate it; serving the other" \
         "models meanwhile" >&2
  fi
done
exec bazel-bin/server/convoy_server --model_repository="$repo_root/model_repo" "$@"
