#!/bin/bash
# Runs conv_launch_table and checks it printed every ResNet-50 layer at batch 1, 8 and 32 with a chosen tensor-core
# algorithm, and that the split-K candidates are what the heuristic takes for res5's 3x3 at batch 1 (8 tiles of 64x64
# on 132 SMs without a split). The numbers are a model's; their values are not judged here.
set -euo pipefail
out="$("kernels/benchmarks/conv_launch_table")"
echo "$out"
[ "$(grep -c " | after " <<<"$out")" -eq 57 ]  # 19 layers x 3 batch sizes
! grep -q "(none)" <<<"$out"
grep -E "^res5_3x3_512 +b1 " <<<"$out" | grep -q "_splitk"
grep -q "^TOTAL estimated" <<<"$out"
