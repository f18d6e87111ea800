#!/bin/bash
# The setmaxnreg split of every sm_90a Hopper kernel fits the register count ptxas compiled it to
# (kernel_resources.py --check_setmaxnreg over the ptxas reports of //kernels/cuda:hopper_conv2d_gemm_cuda and
# :hopper_quantized_conv2d_cuda): the producer's setmaxnreg.dec and the consumers' setmaxnreg.inc must not ask the
# block for more registers than it holds at entry, or setmaxnreg.inc waits forever on the GPU. Then the check itself is checked: the same reports with the
# register count lowered to 160 (a compiler or code change that shrinks the kernel) must fail it.
set -euo pipefail
here="$(dirname "$0")"
tool="$here/kernel_resources.py"
files=$(find -L "$here" -name 'hopper_conv2d_gemm_cuda_*.ptxas.txt' -o -name 'hopper_quantized_conv2d_cuda_*.ptxas.txt' |
  sort)
if [[ -z "$files" ]]; then
  echo "no ptxas report of the Hopper kernels found" >&2
  exit 1
fi
python3 "$tool" --check_setmaxnreg $files | tail -n 4

planted="$(mktemp -d)"
trap 'rm -rf "$planted"' EXIT
for f in $files; do
  sed -E 's/Used [0-9]+ registers/Used 160 registers/' "$f" > "$planted/$(basename "$f")"
done
if python3 "$tool" --check_setmaxnreg "$planted"/*.ptxas.txt > "$planted/out.txt" 2>&1; then
  echo "FAIL: the check passed kernels compiled to 160 registers with a 40/232 split" >&2
  cat "$planted/out.txt" >&2
  exit 1
fi
grep -q "would wait forever" "$planted/out.txt" || { cat "$planted/out.txt" >&2; exit 1; }
echo "planted 160-register count: caught ($(grep -c '^SETMAXNREG' "$planted/out.txt") kernels reported)"
