"""Detects the CUDA toolkit and writes the @local_cuda repository.

CUDA is found at $CUDA_PATH or /usr/local/cuda. Setting CONVOY_DISABLE_CUDA=1 pretends it is absent (CI builds both
ways). The repository always exists; its defs.bzl says whether CUDA is usable:

    load("@local_cuda//:defs.bzl", "CUDA_ENABLED", "NVCC", "CUDA_ROOT")

and its BUILD has :cudart (the CUDA runtime, empty where CUDA is absent) and :cudnn (for the GPU check only).
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
    if enabled:
        ctx.symlink(root + "/include", "cuda_include")
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
    hdrs = glob(["cuda_include/**/*.h", "cuda_include/**/*.hpp", "cuda_include/**/*.cuh", "cuda_include/**/*.inl"], allow_empty = True),
    includes = ["cuda_include"],
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
""".format(root = root)
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
