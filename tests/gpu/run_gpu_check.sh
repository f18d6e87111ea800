#!/bin/bash
# The GPU check, for a machine with an NVIDIA GPU (CUDA 13 driver, cuDNN 9, PyTorch) but no Bazel and no internet.
# Carry tests/gpu/out/ there (made here by tests/gpu/prepare.sh), then run this script; it stays under its budget
# (CONVOY_GPU_CHECK_BUDGET_S, default 270 s) whatever happens, each step with a time cap of its own:
#   1. cuDNN: CONVOY_CUDNN_LIBRARY, the CUDA toolkit, ldconfig, or the nvidia-cudnn / torch Python packages;
#   2. the carried binary out/gpu_check with out/lib on the library path (or through out/loader where this machine's
#      glibc is older than the build machine's);
#   3. in the background, resnet50_torch.py writes the ResNet-50 (random weights) and PyTorch's FP32 reference logits;
#   4. gpu_check: every CUDA algorithm of every op against the CPU reference (direct and as CUDA graphs), whole plans,
#      and the conv-layer benchmark against cuDNN's best (legacy Find and backend heuristics A/B), each phase in a
#      process of its own (a fault costs its case);
#   5. gpu_check --phases=model: the ResNet-50 through ModelRuntime (FP16, CUDA graphs) vs PyTorch's logits, images/s;
#   6. resnet50_torch.py bench: PyTorch eager channels_last FP16 (cudnn.benchmark) and torch.compile, same batches;
#   7. compute-sanitizer --tool memcheck on the --quick correctness subset, when at least 40 s are left.
# Output: $OUT/gpu_check.txt when $OUT is set, else tests/gpu/out/gpu_check.txt (its log beside it); the last line is
# "run_gpu_check: N passed, M failed, K skipped". Exit status 1 on any failure.
set -uo pipefail
case "${1:-}" in -h|--help) echo "usage: tests/gpu/run_gpu_check.sh   (no arguments; CONVOY_CUDNN_LIBRARY, OUT)"; sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out_dir="${OUT:-$here/out}"
mkdir -p "$out_dir"
log="$out_dir/run_gpu_check.log"
report="$out_dir/gpu_check.txt"
work="$(mktemp -d /tmp/convoy_gpu_check.XXXXXX)"
budget_s="${CONVOY_GPU_CHECK_BUDGET_S:-270}"
# The INT8 wgmma kernels are candidates on a real GPU only when asked for (kernels/cuda/quantized_conv2d_hopper.cu):
# the check is what verifies them there.
export CONVOY_CUDA_HOPPER_INT8=1
start_s=$SECONDS
exec > >(tee "$log") 2>&1
say() { echo "[run_gpu_check $(date +%H:%M:%S) +$((SECONDS - start_s))s] $*"; }
left() { echo $((budget_s - (SECONDS - start_s))); }
: > "$report"
append() { cat "$1" >> "$report"; }

say "repo: $(cd "$here/../.." && git rev-parse --short HEAD 2>/dev/null || echo unknown); carried: $(head -2 "$here/out/manifest.txt" 2>/dev/null | tr '\n' ' ')"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv 2>&1 | head -3 | tee -a "$report"

# ---- cuDNN (dlopen'ed by the driver) ------------------------------------------------------------------------------
cuda_root="${CUDA_PATH:-/usr/local/cuda}"
python="$(command -v python3 || echo python3)"
if [[ -z "${CONVOY_CUDNN_LIBRARY:-}" ]]; then
  candidates=("$cuda_root"/lib64/libcudnn.so.9 "$cuda_root"/lib/libcudnn.so.9 /usr/local/cuda-13.0/lib/libcudnn.so.9)
  candidates+=($(ldconfig -p 2>/dev/null | awk '/libcudnn\.so\.9 /{print $NF}'))
  py_dirs="$("$python" - 2>/dev/null <<'PY'
import importlib.util, os
for name in ("nvidia.cudnn", "torch"):
    try:
        spec = importlib.util.find_spec(name)
    except Exception:
        spec = None
    if spec and spec.submodule_search_locations:
        print(os.path.join(list(spec.submodule_search_locations)[0], "lib"))
PY
)"
  for d in $py_dirs; do candidates+=("$d/libcudnn.so.9"); done
  for c in "${candidates[@]}"; do
    if [[ -f "$c" ]]; then export CONVOY_CUDNN_LIBRARY="$c"; break; fi
  done
fi
extra_libs=""
if [[ -n "${CONVOY_CUDNN_LIBRARY:-}" ]]; then
  extra_libs="$(dirname "$CONVOY_CUDNN_LIBRARY")"  # cuDNN loads its engine libraries from beside itself
  say "cuDNN: $CONVOY_CUDNN_LIBRARY"
else
  say "cuDNN: not found (the check runs; the comparison columns say skipped)"
fi

# ---- the carried binary -------------------------------------------------------------------------------------------
binary="$here/out/gpu_check"
if [[ ! -x "$binary" ]]; then
  say "FAIL: no carried binary at $binary: run tests/gpu/prepare.sh on a machine with Bazel and carry tests/gpu/out"
  echo "run_gpu_check: 0 passed, 1 failed, 0 skipped" | tee -a "$report"
  exit 1
fi
# prepare.sh packs lib/ and loader/ into libraries.tar.gz (the bundle stays under 64 MiB; oneDNN alone is 38 MB
# unpacked): unpacked here into the work folder.
bundle="$here/out"
if [[ -f "$here/out/libraries.tar.gz" && ! -d "$here/out/lib" ]]; then
  tar -xzf "$here/out/libraries.tar.gz" -C "$work" && bundle="$work"
fi
libs="$bundle/lib${extra_libs:+:$extra_libs}"
run_check=()
if LD_LIBRARY_PATH="$libs:${LD_LIBRARY_PATH:-}" "$binary" --probe > "$work/probe.txt" 2>&1; then
  run_check=(env "LD_LIBRARY_PATH=$libs:${LD_LIBRARY_PATH:-}" "$binary")
  say "using $binary with $bundle/lib"
elif "$bundle/loader/ld-linux-x86-64.so.2" --library-path "$libs:$bundle/loader" "$binary" --probe \
       > "$work/probe_loader.txt" 2>&1; then
  run_check=("$bundle/loader/ld-linux-x86-64.so.2" --library-path "$libs:$bundle/loader" "$binary")
  say "using $binary through the carried glibc loader (the system's does not run it: $(head -2 "$work/probe.txt"))"
else
  say "FAIL: the carried binary does not start here:"; cat "$work/probe.txt" "$work/probe_loader.txt"
  echo "run_gpu_check: 0 passed, 1 failed, 0 skipped" | tee -a "$report"
  exit 1
fi

# ---- 3. the model, written in the background while the kernels are checked ------------------------------------------
model_dir="$work/resnet50"
( timeout 120 "$python" "$here/resnet50_torch.py" write --dir "$model_dir" > "$work/model_write.txt" 2>&1 ) &
writer=$!

# ---- 4. correctness, plans, benchmark -------------------------------------------------------------------------------
check_budget=$(( $(left) - 140 ))  # keeps ~140 s for the model, PyTorch and the sanitizer
(( check_budget < $(left) / 2 )) && check_budget=$(( $(left) / 2 ))
(( check_budget > 200 )) && check_budget=200
say "gpu_check: correctness, plans, benchmark (budget ${check_budget}s)"
timeout $((check_budget + 20)) "${run_check[@]}" --budget_s="$check_budget" --out="$work/check.txt" "$@" > /dev/null
say "gpu_check exit status $?"
append "$work/check.txt"

# ---- 5. the whole model ------------------------------------------------------------------------------------------
wait "$writer"; writer_status=$?
cat "$work/model_write.txt" | tee -a "$report"
if [[ $writer_status -eq 0 && -f "$model_dir/model.yaml" ]] && (( $(left) > 70 )); then
  model_budget=$(( $(left) - 70 )); (( model_budget > 80 )) && model_budget=80
  say "gpu_check --phases=model (budget ${model_budget}s)"
  timeout $((model_budget + 15)) "${run_check[@]}" --phases=model --model_dir="$model_dir" --no_bench \
    --budget_s="$model_budget" --out="$work/model.txt" > /dev/null
  append "$work/model.txt"
else
  echo "SKIP model: the ResNet-50 was not written (status $writer_status) or too little time is left ($(left) s)" |
    tee -a "$report"
fi

# ---- 6. PyTorch on the same model ---------------------------------------------------------------------------------
if (( $(left) > 30 )); then
  torch_cap=$(( $(left) - 25 )); (( torch_cap > 90 )) && torch_cap=90
  say "PyTorch eager + torch.compile (cap ${torch_cap}s)"
  timeout "$torch_cap" "$python" "$here/resnet50_torch.py" bench --dir "$model_dir" \
    --compile_budget_s $((torch_cap - 35 > 0 ? torch_cap - 35 : 0)) > "$work/torch.txt" 2>&1
  status=$?
  grep -v "^\s*$" "$work/torch.txt" | tail -40 | tee -a "$report"
  if [[ $status -eq 124 ]]; then
    echo "SKIP torch: stopped at its ${torch_cap}s cap" | tee -a "$report"
  elif [[ $status -ne 0 ]]; then
    echo "SKIP torch: resnet50_torch.py bench exited with status $status" | tee -a "$report"
  fi
else
  echo "SKIP torch: too little time left ($(left) s)" | tee -a "$report"
fi

# ---- 7. compute-sanitizer on the quick subset ---------------------------------------------------------------------
sanitizer="$(command -v compute-sanitizer || ls "$cuda_root"/bin/compute-sanitizer 2>/dev/null || true)"
if [[ -z "$sanitizer" ]]; then
  echo "SKIP memcheck: compute-sanitizer not found" | tee -a "$report"
elif (( $(left) < 40 )); then
  echo "SKIP memcheck: too little time left ($(left) s)" | tee -a "$report"
else
  cap=$(( $(left) - 10 ))
  say "compute-sanitizer --tool memcheck on the --quick correctness subset (cap ${cap}s)"
  timeout "$cap" "$sanitizer" --tool memcheck --target-processes all --error-exitcode 9 \
    "${run_check[@]}" --quick --no_bench --budget_s=$((cap - 10)) --out="$work/memcheck_report.txt" \
    > "$work/memcheck.txt" 2>&1
  status=$?
  summary="$(grep -h "ERROR SUMMARY" "$work/memcheck.txt" | sort | uniq -c | tr '\n' ';')"
  if [[ $status -eq 124 ]]; then
    echo "SKIP memcheck: stopped at its ${cap}s cap ($summary)" | tee -a "$report"
  elif grep -q "ERROR SUMMARY: [1-9]" "$work/memcheck.txt" || [[ $status -eq 9 ]]; then
    echo "FAIL memcheck: $summary" | tee -a "$report"
    grep -m 40 -E "^=========" "$work/memcheck.txt" | tee -a "$report"
  else
    echo "PASS memcheck --quick subset: $summary ($(tail -1 "$work/memcheck_report.txt" 2>/dev/null))" |
      tee -a "$report"
  fi
fi

# ---- summary -----------------------------------------------------------------------------------------------------
passed=$(grep -c "^PASS " "$report"); failed=$(grep -c "^FAIL " "$report"); skipped=$(grep -c "^SKIP " "$report")
say "done in $((SECONDS - start_s)) s; report $report"
echo "run_gpu_check: $passed passed, $failed failed, $skipped skipped" | tee -a "$report"
[[ $failed -eq 0 && $passed -gt 0 ]]  # nothing passed (no device) is no verdict
