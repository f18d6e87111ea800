#!/bin/bash
# Runs `kernels_benchmark --quick` and checks it measured its layers and printed the summary. Speed is not judged
# here (machines under test are noisy); the full benchmark reports the ratios.
set -euo pipefail
out="$("kernels/benchmarks/kernels_benchmark" --quick)"
echo "$out"
grep -q "^SUMMARY chosen within 5% of the fastest on [0-9]* of 4 layer runs; 0 failed" <<<"$out"
[ "$(grep -c "| chosen " <<<"$out")" -eq 4 ]
