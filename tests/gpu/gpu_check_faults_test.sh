#!/bin/bash
# Fault isolation: the check built with two kernels that fault on purpose (tests/gpu/fault_injection.cu: a __trap,
# sticky as on a GPU, and a store to address 16, a SIGSEGV in the emulation) must report exactly those four cases
# (each run directly and as a replayed graph) FAIL with the CUDA error or the signal, run every case after them, and
# finish the report (later phases and the closing line).
set -euo pipefail
binary="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-convoy}/tests/gpu/gpu_check_emulated_with_faults"
[[ -x "$binary" ]] || binary="$(dirname "$0")/gpu_check_emulated_with_faults"
out="${TEST_TMPDIR:-/tmp}/gpu_check_faults.txt"
set +e
"$binary" --quick --no_bench --phases=ops.activation,ops.pool2d,plans --out="$out" > /dev/null 2>&1
status=$?
set -e
fail() { echo "gpu_check_faults_test: $*"; cat "$out"; exit 1; }
[[ $status -eq 1 ]] || fail "expected exit status 1, got $status"
trap_direct='^FAIL cuda.activation.fault_trap activation relu count=37 FP32 .*cudaErrorLaunchFailure.*__trap'
oob_direct='^FAIL cuda.activation.fault_out_of_bounds activation relu count=37 FP32 .*signal 11'
grep -q "$trap_direct" "$out" || fail "the trapping case is not reported FAIL with its CUDA error"
grep -q "$oob_direct" "$out" || fail "the out-of-bounds case is not reported FAIL with its signal"
grep -q '^FAIL cuda.activation.fault_trap \[graph\] .*cudaErrorLaunchFailure' "$out" || fail "recorded trap case"
grep -q '^FAIL cuda.activation.fault_out_of_bounds \[graph\] .*signal 11' "$out" || fail "recorded out-of-bounds case"
[[ $(grep -c '^FAIL' "$out") -eq 4 ]] || fail "expected exactly 4 FAIL lines"
# The cases after the faults ran: the ReLU problems after the faulting one, the whole recorded section, later phases.
oob_line=$(grep -n "$oob_direct" "$out" | cut -d: -f1)
tail -n +"$oob_line" "$out" > "$out.after"
grep -q '^PASS cuda.activation.elementwise activation relu count=1031 FP32' "$out.after" ||
  fail "no case after the faulting one ran"
grep -q '^PASS cuda.activation.elementwise \[graph\] ' "$out" || fail "the recorded section did not run"
grep -q '^PASS plan every_op fp16 NHWC batch 2 \[graph\]' "$out" || fail "the phases after it did not run"
grep -q '^-- phase plans: ' "$out" || fail "the plans phase did not finish"
grep -Eq '^gpu_check: [1-9][0-9]* passed, 4 failed, 0 skipped$' "$out" || fail "closing line"
echo "fault isolation OK: $(tail -1 "$out")"
