#!/usr/bin/env bash
# Builds and starts the Convoy server on the sample models in model_repo/ (on the CPU where there is no GPU).
# Extra arguments go to the server: tools/run_server.sh --grpc_port=9001
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"
bazel build --color=no //server:convoy_server
exec bazel-bin/server/convoy_server --model_repository="$repo_root/model_repo" "$@"
