#!/usr/bin/env bash
# The own INT8 convolution as a CPU without VNNI runs it, timed on any AVX-512 machine: oneDNN and Convoy's own kernels
# capped at AVX2 (ONEDNN_MAX_CPU_ISA=AVX2 CONVOY_MAX_CPU_ISA=avx2), the QDQ file's INT8 plan against the same file with
# --int8=false (the FP32-simulated plan) and the FP32 export, alternating in ROUNDS rounds; one `convoy run --repeat`
# median per configuration and round. Prints every median and, per row, the median over the rounds of each ratio.
#   bench/own_int8_avx2_rounds.sh MODEL_DIR [ROUNDS] [BATCHES]     (MODEL_DIR: resnet50.onnx, resnet50_qdq.onnx, ...)
set -euo pipefail
if [[ $# -lt 1 || $1 == -h || $1 == --help ]]; then
  echo "usage: bench/own_int8_avx2_rounds.sh MODEL_DIR [ROUNDS=5] [BATCHES=\"1 8\"]"
  echo "  MODEL_DIR holds resnet50.onnx, resnet50_qdq.onnx, mobilenetv2.onnx and mobilenetv2_qdq.onnx (224x224; the"
  echo "  QDQ files from tools/models/quantize_qdq.py). CONVOY_CLI (default bazel-bin/server/tools/convoy) and PYTHON"
  echo "  (default .venv/bin/python) choose the binaries."
  [[ $# -lt 1 ]] && exit 2 || exit 0
fi
dir=$1; rounds=${2:-5}; batches=${3:-"1 8"}
cli=${CONVOY_CLI:-bazel-bin/server/tools/convoy}
py=${PYTHON:-.venv/bin/python}
caps=(env ONEDNN_MAX_CPU_ISA=AVX2 CONVOY_MAX_CPU_ISA=avx2)
out=$(mktemp)
grep -m1 "model name" /proc/cpuinfo
for b in $batches; do
  "$py" -c "import numpy as np; np.save('/tmp/own_int8_x$b.npy', np.random.default_rng(0).uniform(-1, 1, size=($b, 3, 224, 224)).astype(np.float32))"
done
time_one() {  # model batch flags... -> median ms
  "${caps[@]}" "$cli" run --model="$dir/$1.onnx" --input="/tmp/own_int8_x$2.npy" --output=/tmp/own_int8_y.npy \
    --max_batch_size="$2" --repeat=$(( $2 == 1 ? 20 : 8 )) "${@:3}" 2>&1 | sed -n 's/.*median \([0-9.]*\) ms.*/\1/p'
}
for r in $(seq "$rounds"); do
  for model in resnet50 mobilenetv2; do
    for b in $batches; do
      int8=$(time_one "${model}_qdq" "$b"); sim=$(time_one "${model}_qdq" "$b" --int8=false); fp32=$(time_one "$model" "$b")
      echo "round $r $model b$b own_int8 $int8 fp32_simulated $sim fp32 $fp32" | tee -a "$out"
    done
  done
done
"$py" - "$out" <<'PY'
import statistics, sys, collections
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    f = line.split()
    rows[(f[2], f[3])].append((float(f[5]), float(f[7]), float(f[9])))
print("| model, batch | own INT8 / FP32-simulated | own INT8 / FP32 | rounds |")
print("| --- | ---: | ---: | ---: |")
for (model, b), v in rows.items():
    print(f"| {model}, {b[1:]} | {statistics.median(i / s for i, s, _ in v):.2f} | "
          f"{statistics.median(i / f for i, _, f in v):.2f} | {len(v)} |")
PY
