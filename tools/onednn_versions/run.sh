#!/bin/bash
# Builds int8_conv_versions.cc against Debian's oneDNN 2.6 (libdnnl-dev, installed by tools/setup.sh) and PyPI's
# CPU-only oneDNN 3.2 (onednn-cpu-gomp + onednn-devel-cpu-gomp 2023.2.0, downloaded into a temporary folder, not
# installed), then runs both in alternation: 3 rounds per batch size, each build and mode once per round.
#   [ZP=0] [PER_LAYER=1] [ONLY_1X1=1] [ROUNDS=3] tools/onednn_versions/run.sh [THREADS=1] [BATCHES="1 8"]
# (int8_conv_versions.cc; onednn3_probes.cc first; summarize.py reads a PER_LAYER=1 log)
set -euo pipefail
if [[ "${1:-}" == "--help" || "${1:-}" == "-h" ]]; then
  echo "usage: tools/onednn_versions/run.sh [THREADS=1] [BATCHES=\"1 8\"]"
  echo "Times ResNet-50's INT8 conv layers through Debian's oneDNN 2.6 and PyPI's oneDNN 3.2 in alternation."
  exit 0
fi
here=$(cd "$(dirname "$0")" && pwd)
threads=${1:-1}
batches=${2:-"1 8"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip=${CONVOY_VENV:-$here/../../.venv}/bin/pip
"$pip" download -q --no-deps onednn-cpu-gomp==2023.2.0 onednn-devel-cpu-gomp==2023.2.0 -d "$work"
for wheel in "$work"/*.whl; do python3 -m zipfile -e "$wheel" "$work/x"; done
inc=$(dirname "$(find "$work/x" -path '*include/dnnl.hpp' | head -1)")
lib=$(dirname "$(find "$work/x" -name 'libdnnl.so.3' | head -1)")
g++ -O2 -std=c++17 "$here/int8_conv_versions.cc" -o "$work/v26" -ldnnl
g++ -O2 -std=c++17 "$here/int8_conv_versions.cc" -o "$work/v32" -I"$inc" -L"$lib" -l:libdnnl.so.3 -Wl,-rpath,"$lib"
g++ -O2 -std=c++17 "$here/onednn3_probes.cc" -o "$work/probes32" -I"$inc" -L"$lib" -l:libdnnl.so.3 -Wl,-rpath,"$lib"
grep -m1 'model name' /proc/cpuinfo
"$work/probes32"
for batch in $batches; do
  for round in $(seq "${ROUNDS:-3}"); do
    OMP_NUM_THREADS=$threads "$work/v26" "$batch" convoy
    OMP_NUM_THREADS=$threads "$work/v26" "$batch" ideal
    OMP_NUM_THREADS=$threads "$work/v32" "$batch"
  done
done
