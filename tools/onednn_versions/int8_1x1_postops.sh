#!/bin/bash
# Builds int8_1x1_postops.cc against Debian's oneDNN 2.6 (libdnnl-dev, installed by tools/setup.sh) and runs it:
# ResNet-50's stride-1 1x1 INT8 layers as oneDNN's convolution and as its matmul, with each post-op chain of
# Convoy's INT8 plans. [PER_LAYER=1] tools/onednn_versions/int8_1x1_postops.sh [BATCH=1] [THREADS=2]
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  echo "usage: [PER_LAYER=1] tools/onednn_versions/int8_1x1_postops.sh [BATCH=1] [THREADS=2]"
  echo "Times ResNet-50's 1x1 INT8 layers as oneDNN 2.6's convolution and matmul with Convoy's post-op chains."
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
g++ -O2 -std=c++17 "$here/int8_1x1_postops.cc" -o "$work/postops" -ldnnl
grep -m1 'model name' /proc/cpuinfo
OMP_NUM_THREADS=${2:-2} "$work/postops" "${1:-1}"
