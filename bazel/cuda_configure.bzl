"""Detects the CUDA toolkit and writes the @local_cuda repository.

CUDA is found at $CUDA_PATH or /usr/local/cuda. Setting CONVOY_DISABLE_CUDA=1 pretends it is absent (CI builds both
ways). The repository always exists; its defs.bzl says whether CUDA is usable:

    load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC", "CUDA_ROOT")

and its BUILD has :cudart (the CUDA runtime, empty where CUDA is absent) and :cudnn (for the GPU check only).

The toolkit's whole include folder is exposed (every file: CUDA's own headers include extensionless ones such as
nv/target and cuda/std/...), on the same search path nvcc uses (include/, then include/cccl where CCCL lives), and
nothing else from /usr/local: a build must not find a CUDA header through a copy or link of it elsewhere on the
host (some machines link the toolkit's headers into /usr/local/include, which gcc searches by default).
tests/python/test_build_hygiene.py checks the compiler's dependency files for such leaks.
"""

def _cuda_configure_impl(ctx):
    root = ctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    disabled = ctx.os.environ.get("CONVOY_DISABLE_CUDA", "0") not in ["", "0", "false", "no"]
    nvcc = root + "/bin/nvcc"
    found = ctx.path(nvcc).exists and ctx.path(root + "/include/cuda_runtime.h").exists
    enabled = found and not disabled
    if not enabled:
        reason = "disabled by CONVOY_DISABLE_CUDA" if disabled else "no nvcc at " + nvcc
        print("Convoy: CUDA targets left out (%s); CPU targets build and test as usual." % reason)
    includes = ["cuda_include"]
    if enabled:
        ctx.symlink(root + "/include", "cuda_include")
        if ctx.path(root + "/include/cccl").exists:
            includes.append("cuda_include/cccl")
    ctx.file("defs.bzl", "\n".join([
        "CUDA_ENABLED = %s" % enabled,
        "CUDA_ROOT = %r" % root,
        "NVCC = %r" % nvcc,
        "",
    ]))
    if enabled:
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(
    name = "cuda_headers",
    hdrs = glob(["cuda_include/**"]),
    includes = {includes},
)

cc_library(
    name = "cudart",
    linkopts = ["-L{root}/lib64", "-lcudart_static", "-ldl", "-lrt", "-lpthread"],
    deps = [":cuda_headers"],
)

cc_library(
    name = "cudnn",
    linkopts = ["-L{root}/lib64", "-L/usr/lib/x86_64-linux-gnu", "-lcudnn", "-Wl,-rpath,{root}/lib64"],
)
""".format(root = root, includes = includes)
    else:
        build = """
package(default_visibility = ["//visibility:public"])

cc_library(name = "cuda_headers")

cc_library(name = "cudart")

cc_library(name = "cudnn")
"""
    ctx.file("BUILD", build)

cuda_configure = repository_rule(
    implementation = _cuda_configure_impl,
    environ = ["CUDA_PATH", "CONVOY_DISABLE_CUDA"],
    local = True,
)
