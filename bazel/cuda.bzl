"""Rules for Convoy's CUDA sources.

cuda_library: compiles .cu files with nvcc into real SASS for sm_80 and sm_90 plus PTX for compute_90, and wraps the
objects in a cc_library that links the static CUDA runtime. Where CUDA is absent (or CONVOY_DISABLE_CUDA=1) the
macro creates no targets: use `if CUDA_ENABLED` (from @local_cuda//:defs.bzl) around anything that depends on it.

cuda_emulated_library: compiles the very same .cu files as ordinary C++ against the CUDA emulation layer, so kernel
tests run on any CPU. Each x.cu becomes x.emu.cc = a prelude include + `#line` + the file's text.
"""

load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC")

CUDA_ARCH_FLAGS = [
    "-gencode=arch=compute_80,code=sm_80",
    "-gencode=arch=compute_90,code=sm_90",
    "-gencode=arch=compute_90,code=compute_90",
]

# Hopper-only kernels (wgmma, setmaxnreg: sm_90a features). The -gencode form: the -arch=sm_90a shorthand also runs a
# plain sm_90 pass, which rejects them. sm_90a code runs only on compute capability 9.0 devices.
HOPPER_ARCH_FLAGS = [
    "-gencode=arch=compute_90a,code=sm_90a",
]

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "-I.",
    "-I$(GENDIR)",
    "-Xcompiler=-fPIC",
    "-Xcompiler=-Wall",
    "-Werror=all-warnings",
    "--expt-relaxed-constexpr",
    "-DCONVOY_CUDA_DEVICE=1",
]

# Besides the object, each nvcc action keeps what the kernel resource report (kernels/cuda/kernel_resources.py)
# reads: <obj>.ptxas.txt (ptxas -v for every kernel and arch: registers, spills, stack, shared memory, then the
# .entry/.maxntid lines of the compute_90 (or compute_90a) PTX: launch bounds) and <obj>.sm_90.cubin (the sm_90 or,
# for Hopper-only sources, the sm_90a SASS, for disassembly).
# ptxas's report goes to the file; the compiler's stderr is shown only when the compile fails.
# nvcc names the kept files <stem>.compute_XX.ptx / <stem>.compute_XX.sm_XX.cubin when it has several -gencode
# targets, and <stem>.ptx / <stem>.cubin when it has one (the sm_90a-only Hopper sources).
def _nvcc_command(src, flags, obj, ptxas, cubin, single_target):
    ptx_files = "$$keep/*.ptx" if single_target else "$$keep/*.compute_90*.ptx"
    cubin_file = "$$keep/*.cubin" if single_target else "$$(ls $$keep/*.sm_90.cubin $$keep/*.sm_90a.cubin 2>/dev/null | head -1)"
    return " ".join([
        "keep=$$(mktemp -d) &&",
        "{ " + " ".join([NVCC] + flags + ["-Xptxas=-v", "--keep", "--keep-dir", "$$keep", "-c", "$(location %s)" % src,
                                          "-o", "$(location %s)" % obj, "2>", "$$keep/ptxas.log"]),
        "|| { cat $$keep/ptxas.log >&2; rm -rf $$keep; exit 1; }; } &&",
        "{ cat $$keep/ptxas.log; echo '== PTX entries and launch bounds (compute_90) ==';",
        "grep -h -E '^([.](visible|weak) )?[.]entry |^[.](maxntid|reqntid) ' " + ptx_files + " || true; }",
        "> $(location %s) &&" % ptxas,
        "cp " + cubin_file + " $(location %s) && rm -rf $$keep" % cubin,
    ])

def cuda_library(name, srcs, hdrs = [], compile_deps = [], deps = [], nvcc_flags = [], arch_flags = CUDA_ARCH_FLAGS, visibility = None, **kwargs):
    """srcs: .cu files; hdrs: headers they include; compile_deps: other files (filegroups) nvcc must see;
    arch_flags: the -gencode targets (HOPPER_ARCH_FLAGS for sm_90a-only sources).

    Also defines <name>_resource_files: every source's ptxas report and sm_90 cubin (see _nvcc_command)."""
    if not CUDA_ENABLED:
        return
    objs = []
    resource_files = []
    for src in srcs:
        obj = name + "_" + src.replace("/", "_")[:-len(".cu")] + ".pic.o"
        ptxas = obj + ".ptxas.txt"
        cubin = obj + ".sm_90.cubin"
        native.genrule(
            name = obj.replace(".", "_") + "_nvcc",
            srcs = [src] + hdrs + compile_deps,
            outs = [obj, ptxas, cubin],
            cmd = _nvcc_command(src, arch_flags + NVCC_FLAGS + nvcc_flags, obj, ptxas, cubin, len(arch_flags) == 1),
            message = "nvcc " + src,
        )
        objs.append(obj)
        resource_files += [ptxas, cubin]
    native.filegroup(
        name = name + "_resource_files",
        srcs = resource_files,
        visibility = visibility,
        testonly = kwargs.get("testonly", False),
    )
    native.cc_library(
        name = name,
        srcs = objs,
        hdrs = hdrs,
        deps = deps + ["@local_cuda//:cudart"],
        alwayslink = True,
        visibility = visibility,
        **kwargs
    )

CUDA_EMULATION_PRELUDE = "kernels/cuda_emulation/cuda_emulation.h"
CUDA_EMULATION_LIBRARY = "//kernels/cuda_emulation"

def cuda_emulated_library(name, srcs, prelude = CUDA_EMULATION_PRELUDE, hdrs = [], deps = [], copts = [], visibility = None, **kwargs):
    """srcs: .cu files; prelude: the emulation header to include first (a workspace-relative path).

    Defines CONVOY_CUDA_EMULATION=1 for the sources and for every target that depends on the library (host code
    uses it to pick the emulated runtime, see kernels/cuda_emulation/cuda_host_api.h), and links the emulation."""
    gen = []
    for src in srcs:
        out = name + "_" + src.replace("/", "_")[:-len(".cu")] + ".emu.cc"
        native.genrule(
            name = out.replace(".", "_") + "_gen",
            srcs = [src],
            outs = [out],
            cmd = "(echo '#include \"%s\"'; echo '#line 1 \"%s/%s\"'; cat $(location %s)) > $@" % (
                prelude,
                native.package_name(),
                src,
                src,
            ),
        )
        gen.append(out)
    native.cc_library(
        name = name,
        srcs = gen,
        hdrs = hdrs,
        copts = copts,
        defines = ["CONVOY_CUDA_EMULATION=1"],
        deps = deps + ([] if [d for d in deps if d in [CUDA_EMULATION_LIBRARY, CUDA_EMULATION_LIBRARY + ":cuda_emulation"]] else [CUDA_EMULATION_LIBRARY]),
        alwayslink = True,
        visibility = visibility,
        **kwargs
    )
