#!/bin/bash
# Runs the GPU check driver on the emulated CUDA device: the --quick subset of the correctness cases (every op, run
# directly and recorded into a CUDA graph) and a tiny
# benchmark (cuDNN skipped, clearly labeled). Fails when the driver reports any failure or its closing line is off.
set -euo pipefail
binary="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-convoy}/tests/gpu/gpu_check_emulated"
[[ -x "$binary" ]] || binary="$(dirname "$0")/gpu_check_emulated"
out="${TEST_TMPDIR:-/tmp}/gpu_check_emulated.txt"
"$binary" --quick --out="$out"
grep -q "cuDNN: SKIPPED" "$out"
grep -q "^PASS cuda.pool2d" "$out"                      # every op, not only conv2d and GEMM
grep -q "^PASS cuda.conv2d.* \[graph\] " "$out"          # recorded into a CUDA graph and replayed
grep -q "^PASS cuda.preprocess.* \[graph\] " "$out"
grep -q "^PASS plan every_op fp16 NHWC batch 2 \[graph\]" "$out"  # whole plans, CUDA graphs per batch size
grep -q "^conv chain of .* as a CUDA graph" "$out"
grep -q "^gpu_check: [1-9][0-9]* passed, 0 failed$" "$out"
if grep -q "^FAIL" "$out"; then exit 1; fi
echo "emulated GPU check OK: $(tail -1 "$out")"
