#!/bin/bash
# The kernel resource report (kernel_resources.py) over every nvcc-built kernel: registers, spills, stack, shared
# memory, launch bounds, sm_90 occupancy and SASS classes; fails when a hot kernel spills. The table is printed to the
# test log and written to $TEST_UNDECLARED_OUTPUTS_DIR/kernel_resources.md (docs/cuda_kernels.md shows it).
set -euo pipefail
here="$(dirname "$0")"
tool="$here/kernel_resources.py"
files=$(find -L "$here" -name '*.ptxas.txt' -o -name '*.sm_90.cubin' | sort)
# cuobjdump + nvdisasm come from the project's virtualenv (tools/setup.sh): the workspace's .venv unless CONVOY_VENV.
if [[ -z "${CONVOY_VENV:-}" ]]; then
  workspace="$(cd "$(dirname "$(readlink -f "$tool")")/../.." && pwd)"
  [[ -d "$workspace/.venv" ]] && export CONVOY_VENV="$workspace/.venv"
fi
python3 "$tool" --fail_on_hot_spills --markdown_out="${TEST_UNDECLARED_OUTPUTS_DIR:-/tmp}/kernel_resources.md" $files
