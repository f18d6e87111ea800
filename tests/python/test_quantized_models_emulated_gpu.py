"""QDQ models on the GPU path without a GPU: torchvision ResNet-18 and MobileNetV2 (64x64, random weights) quantized by
onnxruntime's quantize_static (tools/models/quantize_qdq.py, as test_quantized_models.py makes them), run by
//server/tools:convoy_emulated_gpu with --device=cuda: the CUDA kernels compiled against the emulation, every GPU
thread a fiber. Every quantized convolution, residual add, global average pool and Gemm folds into a CUDA INT8 step
(cuda.quantized_conv2d.*: the emulated device reports compute capability 9.0, so the planner takes the wgmma
hopper_implicit_gemm_* kernels where estimated faster, 19 of ResNet-18's 22 INT8 convolutions at batch 1, and the
mma.sync implicit_gemm_* ones for the rest (the 3-channel stem among them); each residual add fused into the
convolution computing one of its operands, the cuda.convert.* quantize / dequantize at the edges): the load log says
so, and `convoy inspect` names the algorithms.

Asserted on fresh random images: the logits equal the CPU's INT8 plan (`convoy run`, oneDNN) element for element
(both compute the exact integer sums, onnxruntime's requantization and its QLinearAdd arithmetic bit for bit), and
keep test_quantized_models.py's INT8 bounds against onnxruntime's INT8 run of the same file (at least 99.9 % within
one quantization step, 99 % identical, none more than one step off). Measured when written: every logit identical to
both, for ResNet-18 (NHWC and NCHW plans) and MobileNetV2. Emulated time: ResNet-18 at batch 8 about 7 s, MobileNetV2
at batch 2 about 12 s (its depthwise layers run as grouped convolutions of one channel, a 64-channel tile holding one).
The load verifies every INT8 convolution on the emulated device at every planned batch size (verification.h); on a
shared 2-core machine (load average 6) the ResNet-18 batch-8 case then took 84 s (14 s before), MobileNetV2 107 s (46).
So the runs that compare outputs turn it off (`--verify_algorithms=false`: what they check is the plan's arithmetic),
and test_inspect_names_the_cuda_int8_steps checks, with it on, that every INT8 convolution was verified.
"""
import re
import subprocess

import numpy as np
import pytest

from conftest import built_binary, requires_vnni_cpu
from test_quantized_models import (compare_int8_with_onnxruntime, onnxruntime_int8, quantize_exported,
                                   quantized_file, run_convoy)


@pytest.fixture(scope="module")
def quantized(tmp_path_factory):
    return quantize_exported(tmp_path_factory, ["resnet18", "mobilenet_v2"])


def emulated_gpu(*args):
    proc = subprocess.run([built_binary("server/tools/convoy_emulated_gpu"), *map(str, args)], capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, f"convoy {' '.join(map(str, args))} failed ({proc.returncode}):\n{proc.stderr}"
    return proc


@pytest.mark.parametrize("name,layout,batch", [("resnet18", "nhwc", 8), ("resnet18", "nchw", 3),
                                               ("mobilenet_v2", "nhwc", 2)])
@requires_vnni_cpu
def test_qdq_model_runs_int8_on_the_emulated_gpu_like_the_cpu_plan(quantized, tmp_path, name, layout, batch):
    model = quantized_file(quantized, name)
    x = np.random.default_rng().uniform(-1, 1, size=(batch, 3, 64, 64)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = emulated_gpu("run", f"--model={model}", f"--input={tmp_path / 'x.npy'}", f"--output={tmp_path / 'gpu.npy'}",
                        f"--max_batch_size={batch}", "--device=cuda", f"--layout={layout}", "--verify_algorithms=false")
    log = proc.stderr
    assert "device: cuda-emulated:" in log, log
    assert f"(fp32, {layout.upper()})" in log, log
    folded = re.search(r"(\d+) of (\d+) quantized convolutions and (\d+) of (\d+) quantized adds run INT8, and "
                       r"(\d+) of (\d+) quantized pooling and Gemm layers", log)
    assert folded, log[-3000:]
    convs, all_convs, adds, all_adds, tail, all_tail = map(int, folded.groups())
    assert convs == all_convs > 0 and adds == all_adds > 0 and tail == all_tail == 2, log[-3000:]
    gpu = np.load(tmp_path / "gpu.npy")

    cpu, _ = run_convoy(model, x, tmp_path)
    different = int(np.count_nonzero(gpu != cpu))
    print(f"{name} emulated GPU {layout} batch {batch}: {different} of {gpu.size} logits differ from the CPU INT8 plan")
    assert different == 0, f"{name}: {different} of {gpu.size} logits differ from the CPU INT8 plan"
    compare_int8_with_onnxruntime(name, f"emulated GPU {layout}", gpu, onnxruntime_int8(model, x))


def test_inspect_names_the_cuda_int8_steps(quantized):
    out = emulated_gpu("inspect", f"--model={quantized_file(quantized, 'resnet18')}", "--device=cuda",
                       "--max_batch_size=1").stdout
    for algorithm in ["cuda.quantized_conv2d.implicit_gemm_", "cuda.convert.transpose_tiles",
                      "cuda.convert.elementwise"]:
        assert algorithm in out, out[-3000:]
    # Every residual add is fused into the INT8 convolution computing one of its operands (8 in ResNet-18).
    assert len(re.findall(r" \+add\(conv=[ab]: quantized_add ", out)) == 8, out[-3000:]
    # The input's quantize goes straight from the caller's NCHW FP32 into the plan's 8-bit NHWC.
    assert re.search(r"FP32 NCHW -> UINT8 NHWC scale \S+ zero_point \d+\n\s+algorithm cuda\.convert\.transpose_tiles",
                     out), out[:6000]
    # No FP32 convolution or Gemm step is left (the stem's max pool is the one FP32 layer between them).
    plan = out[out.index("== plan"):]
    assert "(conv2d):" not in plan and "(gemm):" not in plan, plan[:6000]
    # Every INT8 convolution's algorithm was verified on the (emulated) device before use.
    int8_algorithms = re.findall(r"algorithm (cuda\.quantized_conv2d\.\S+?)(, verified)?\n", plan)
    assert len(int8_algorithms) == 22, plan[:6000]
    assert all(verified for _, verified in int8_algorithms), plan[:6000]
