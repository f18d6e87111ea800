#!/usr/bin/env bash
# Builds and starts the Convoy server on the sample models in model_repo/ (on the CPU where there is no GPU).
# Extra arguments go to the server: tools/run_server.sh --grpc_port=9001 (the server's flags: convoy_server --help,
# docs/server.md).
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bazel build --color=no //server:convoy_server
exec bazel-bin/server/convoy_server --model_repository="$repo_root/model_repo" "$@"
