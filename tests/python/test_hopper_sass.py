"""The sm_90a conv2d/GEMM kernels compile to the Hopper path (docs/cuda_kernels.md, "The Hopper main loop").

Reads the SASS of the nvcc-built objects of //kernels/cuda:hopper_conv2d_gemm_cuda with cuobjdump (the
nvidia-cuda-cuobjdump wheel of tools/setup.sh; the toolkit here ships none) and checks, for every instance of the
Hopper kernel: it is sm_90a code, it multiplies with HGMMA (warpgroup MMA, not HMMA), it loads with bulk tensor
copies (UTMALDG: 4D im2col for the implicit GEMM, 2D/3D tiles otherwise), it waits on mbarriers (SYNCS), and it uses
no local memory (no LDL/STL in the SASS, stack 0 in the resource usage: no register spills).
Skipped where the build has no CUDA toolkit (no nvcc objects).
"""
import glob
import os
import re
import subprocess
import sys

import pytest

from conftest import REPO_ROOT


def objects():
    folder = os.environ.get("CONVOY_BAZEL_BIN") or str(REPO_ROOT / "bazel-out" / "k8-opt" / "bin")
    found = sorted(glob.glob(f"{folder}/kernels/cuda/hopper_conv2d_gemm_cuda_conv2d_hopper_instances_*.pic.o"))
    if not found:
        if not os.path.exists("/usr/local/cuda/bin/nvcc") or os.environ.get("CONVOY_DISABLE_CUDA") == "1":
            pytest.skip("no CUDA toolkit in this build: the sm_90a objects are not built")
        pytest.fail(f"no Hopper kernel objects under {folder}/kernels/cuda: bazel build "
                    "//kernels/cuda:hopper_conv2d_gemm_cuda", pytrace=False)
    return found


def cuobjdump():
    for candidate in glob.glob(f"{sys.prefix}/lib/python3*/site-packages/nvidia/cu*/bin/cuobjdump"):
        return candidate
    pytest.fail("cuobjdump not found in the venv: tools/setup.sh installs nvidia-cuda-cuobjdump", pytrace=False)


def functions(sass):
    """{mangled name: SASS text} of every kernel in a cuobjdump --dump-sass listing."""
    out, name = {}, None
    for line in sass.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            name = m.group(1)
            out[name] = []
        elif name:
            out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


@pytest.mark.parametrize("dtype", ["f16", "bf16", "tf32"])
def test_hopper_kernels_use_wgmma_and_bulk_copies_without_spills(dtype):
    obj = [o for o in objects() if o.endswith(f"_instances_{dtype}.pic.o")]
    assert obj, f"no object for {dtype}"
    tool = cuobjdump()
    sass = subprocess.run([tool, "--dump-sass", obj[0]], check=True, capture_output=True, text=True).stdout
    assert "arch = sm_90a" in sass, "not built for sm_90a"
    kernels = {k: v for k, v in functions(sass).items() if "HopperGemmKernel" in k}
    assert len(kernels) == 6, f"expected 6 kernel instances (3 tiles x im2col/tiled), found {sorted(kernels)}"
    for name, text in kernels.items():
        assert "HGMMA." in text, f"{name}: no HGMMA (warpgroup MMA)"
        assert re.search(r"\bHMMA\b", text) is None, f"{name}: HMMA (mma.sync) in the Hopper kernel"
        copy = "UTMALDG.4D.IM2COL" if name.endswith("ELb1EEEvNS0_16HopperGemmParamsIT_EE") else "UTMALDG.2D"
        assert copy in text, f"{name}: no {copy} bulk tensor copy"
        assert "SYNCS" in text, f"{name}: no mbarrier wait"
        assert re.search(r"\b(LDL|STL)\b", text) is None, f"{name}: local memory (spills or a stack array)"
    usage = subprocess.run([tool, "--dump-resource-usage", obj[0]], check=True, capture_output=True,
                           text=True).stdout
    blocks = [b for b in usage.split("Function ") if "HopperGemmKernel" in b]
    assert len(blocks) == 6, usage[:2000]
    for block in blocks:
        stack = re.search(r"STACK:(\d+)", block)
        assert stack and int(stack.group(1)) == 0, f"stack frame in {block[:300]}"
        local = re.search(r"LOCAL:(\d+)", block)
        assert local is None or int(local.group(1)) == 0, f"local memory in {block[:300]}"
