#!/bin/bash
# Runs the GPU check driver on the emulated CUDA device with --quick: every op directly and recorded into a CUDA graph
# (each op family in a process of its own), whole plans, the tiny benchmark (cuDNN skipped, clearly labeled), a tiny
# ResNet through ModelRuntime against PyTorch's logits. Fails
# when the driver reports any failure or skipped case, or its closing line is off.
set -euo pipefail
binary="${TEST_SRCDIR:-.}/${TEST_WORKSPACE:-convoy}/tests/gpu/gpu_check_emulated"
[[ -x "$binary" ]] || binary="$(dirname "$0")/gpu_check_emulated"
out="${TEST_TMPDIR:-/tmp}/gpu_check_emulated.txt"
# A tiny ResNet (ResNet-50's topology at width 4, one block per stage, 32x32) and PyTorch's FP32 logits, written with
# Debian's torch (tools/setup.sh) as on the GPU machine: the model phase loads it through ModelRuntime.
model="${TEST_TMPDIR:-/tmp}/tiny_resnet"
script="$(dirname "$binary")/resnet50_torch.py"
/usr/bin/python3 "$script" write --dir "$model" --width 4 --image 32 --blocks 1,1,1,1 --classes 10 > /dev/null
"$binary" --quick --model_dir="$model" --model_batches=1,2 --out="$out" > /dev/null
grep -q "cuDNN: SKIPPED" "$out"
grep -q "^PASS cuda.pool2d" "$out"                      # every op, not only conv2d and GEMM
grep -q "^PASS cuda.conv2d.* \[graph\] " "$out"          # recorded into a CUDA graph and replayed
grep -q "^PASS cuda.preprocess.* \[graph\] " "$out"
# The split-K and 8-warp-tile kernels are in the op list (the registry's): split-K (conv, 1x1, GEMM) and the 8-warp tiles.
for name in conv2d.implicit_gemm_64x64_splitk16 conv2d.gemm_1x1_64x64_splitk2 gemm.tensor_core_64x64_splitk8 \
            conv2d.implicit_gemm_128x256 conv2d.gemm_1x1_256x128; do
  grep -q "^PASS cuda.${name} " "$out"
  grep -q "^PASS cuda.${name} \[graph\] " "$out"
done
grep -q "^PASS plan every_op fp16 NHWC batch 2 \[graph\]" "$out"  # whole plans, CUDA graphs per batch size
grep -q "^conv chain of .* as a CUDA graph" "$out"
grep -q "^PASS bench res5_3x3_512_b1" "$out"           # the benchmark rows ran (timed the same way as cuDNN would be)
grep -q "^PASS bench_int8 res5_3x3_512_b1" "$out"      # and the INT8 rows
grep -q "^-- phase ops.transpose: " "$out"               # one process per op family
# The INT8 convolutions, both gathers, bit-exact against the integer reference.
grep -q "^PASS cuda.quantized_conv2d.implicit_gemm_128x64 " "$out"
grep -q "^PASS cuda.quantized_conv2d.implicit_gemm_bytewise_64x64 " "$out"
grep -q "^PASS cuda.quantized_conv2d.implicit_gemm_64x64 fixed multipliers " "$out"
grep -q "^PASS cuda.quantized_conv2d.implicit_gemm_bytewise_64x64 fused add " "$out"
# The direct INT8 kernel (verification's trusted one), with fixed multipliers and a fused add too.
grep -q "^PASS cuda.quantized_conv2d.simt " "$out"
grep -q "^PASS cuda.quantized_conv2d.simt fixed multipliers " "$out"
grep -q "^PASS cuda.quantized_conv2d.simt fused add " "$out"
# The Hopper INT8 kernels (wgmma s8), repeated on small tensors (x2 under --quick), fixed multipliers, fused add.
grep -q "^PASS cuda.quantized_conv2d.hopper_gemm_1x1_128x64 x2 " "$out"
grep -q "^PASS cuda.quantized_conv2d.hopper_implicit_gemm_64x64 x2 " "$out"
grep -q "^PASS cuda.quantized_conv2d.hopper_gemm_1x1_64x64 fixed multipliers " "$out"
grep -q "^PASS cuda.quantized_conv2d.hopper_implicit_gemm_128x128 fused add " "$out"
# The element steps of INT8 plans: quantize / dequantize in both convert kernels, the quantized add; and an INT8 plan.
grep -q "^PASS cuda.convert.transpose_tiles quantize/dequantize INT8 NCHW -> NHWC " "$out"
grep -q "^PASS cuda.convert.elementwise quantize/dequantize UINT8 NHWC -> NHWC " "$out"
grep -q "^PASS cuda.quantized_add.elementwise UINT8 + INT8 -> UINT8 unaligned " "$out"
grep -q "^PASS plan qdq_block int8 NHWC batch 3 \[graph\]" "$out"
grep -q "^PASS model resnet50 fp16 vs PyTorch fp32 logits" "$out"  # the whole model through ModelRuntime
grep -q "^PASS model time batch 2" "$out"
grep -q "^gpu_check: [1-9][0-9]* passed, 0 failed, 0 skipped$" "$out"
if grep -q "^FAIL\|^SKIP" "$out"; then exit 1; fi
echo "emulated GPU check OK: $(tail -1 "$out")"
