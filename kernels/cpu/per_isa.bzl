"""The libraries compiled once per instruction set (kernels/cpu/cpu_isa.h, docs/kernels.md)."""

CPU_ISAS = ["baseline", "avx2", "avx512"]

# -mprefer-vector-width=512: GCC's default for AVX-512 code is 256-bit vectors where it chooses the width.
ISA_COPTS = {
    "baseline": [],
    "avx2": ["-mavx2", "-mfma"],
    "avx512": ["-mavx512f", "-mavx512bw", "-mavx512dq", "-mavx512vl", "-mprefer-vector-width=512"],
}

def per_isa_libraries(name, copts = [], extra_copts = []):
    """NAME_baseline, NAME_avx2, NAME_avx512: NAME_<isa>.cc compiled with copts, the instruction set's flags and
    extra_copts, each depending on :NAME (the table's header and the body it includes)."""
    for isa in CPU_ISAS:
        native.cc_library(
            name = name + "_" + isa,
            srcs = [name + "_" + isa + ".cc"],
            copts = copts + ISA_COPTS[isa] + extra_copts,
            deps = [":" + name],
        )

def per_isa_deps(name):
    """The labels of NAME's per-instruction-set libraries."""
    return [":" + name + "_" + isa for isa in CPU_ISAS]
