#!/usr/bin/env python3
"""Static GPU truth for every CUDA kernel instance, measured at build time without a GPU.

Reads what bazel/cuda.bzl's nvcc actions keep beside each object (<obj>.ptxas.txt: `ptxas -v` for every kernel and
arch, then the compute_90 PTX .entry/.maxntid lines; <obj>.sm_90.cubin) and prints, per kernel instance on sm_90:
registers, spill stores/loads, stack frame, static and dynamic shared memory, threads per block (launch bounds),
theoretical occupancy on sm_90 (H100/H200: 64K registers, 64 warps, 32 blocks and 228 KiB shared memory per SM, 1 KiB
reserved per block, registers allocated per warp in units of 256), the limiting resource, and, where a cuobjdump is
found (the toolkit's, $CUOBJDUMP, or the nvidia-cuda-cuobjdump + nvidia-cuda-nvdisasm wheels in $CONVOY_VENV or
the running Python's environment), SASS instruction
counts by class (tensor-core mma, async copies, ldmatrix, shared/global/local memory, barriers).

  kernel_resources.py [--markdown] [--fail_on_hot_spills] [--check_setmaxnreg] FILES...

--fail_on_hot_spills exits 1 when a hot kernel (every kernel but the SIMT fallbacks, see COLD_KERNELS) spills more than CALL_SAVE_SPILL_BYTES allows
registers on sm_90; a stack frame without spills (a local array) is listed, not failed.
--check_setmaxnreg exits 1 when a kernel that uses setmaxnreg (SETMAXNREG_RULES: the split read from its name) does
not fit its split with the register count ptxas compiled: the producer warpgroup's setmaxnreg.dec must not be above
the entry count, the consumers' setmaxnreg.inc not below it, and the registers the split asks for must not exceed
what the block holds at entry (entry count, allocated in units of 8 per thread, times the threads), or
setmaxnreg.inc waits forever on the GPU. New kernels need nothing here unless they use dynamic shared memory: add a
rule to DYNAMIC_SHARED_RULES so their occupancy counts it (without one the table marks the kernel "dyn?").
"""
import argparse
import collections
import concurrent.futures
import glob
import os
import re
import shutil
import subprocess
import sys

# sm_90 (H100 / H200) per-SM limits.
SM90 = dict(regs=65536, reg_unit=256, max_regs_per_thread=255, warps=64, blocks=32, smem=228 * 1024,
            smem_per_block_reserved=1024, smem_unit=128)

# Kernels allowed to spill (fallbacks that exist for coverage, not speed): matched against the demangled name.
COLD_KERNELS = [r"DirectConv", r"Simt", r"SimtGemm", r"TransposeStrided"]

# Hot kernels allowed a few bytes of spill, and how many at most: the register ptxas saves around the IEEE-exact float
# division's slow-path subroutine (CALL.REL into the division's denormal / overflow path). SplitKReduceKernel<float>
# applies the epilogue's activation by kind at run time, and ApplyActivation's quantize-dequantize case divides by the
# scale (QDQ models; kernels/common/epilogue.h): 4 bytes are saved around that division. Anything above a bound fails.
CALL_SAVE_SPILL_BYTES = {r"SplitKReduceKernel<float>": 4}

# Dynamic shared memory per launch, by demangled name: (regex, bytes from the match). Keep in step with the launchers.
DYNAMIC_SHARED_RULES = [
    # conv2d_implicit_gemm_kernel.cuh (ImplicitGemmSharedBytes): ImplicitGemmTile<kM, kN, kWarpsM, kWarpsN,
    # kStepBytes, kStages, kMinBlocks> uses kStages * (kM + kN) rows of kStepBytes + 16 bytes of padding.
    (r"ImplicitGemmTile<(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)>",
     lambda m: int(m[6]) * (int(m[1]) + int(m[2])) * (int(m[5]) + 16)),
    # conv2d_hopper_kernel.cuh (HopperTile::kSharedBytes): HopperTile<kM, kN, kStages, ...> uses kStages * (kM + kN)
    # rows of 128 bytes plus 1024 bytes to align the stages to 1024.
    (r"HopperTile<(\d+), (\d+), (\d+)", lambda m: int(m[3]) * (int(m[1]) + int(m[2])) * 128 + 1024),
]

# Kernels that use setmaxnreg, by demangled name: (regex, lambda match -> (producer registers, consumer registers,
# consumer warpgroups)). conv2d_hopper_kernel.cuh: HopperTile<kM, kN, kStages, kProducerRegs, kConsumerRegs>, kM / 64
# consumer warpgroups, one producer warpgroup; 0 registers: no setmaxnreg.
SETMAXNREG_RULES = [
    (r"HopperTile<(\d+), (\d+), (\d+), (\d+), (\d+)>", lambda m: (int(m[4]), int(m[5]), int(m[1]) // 64)),
]


def setmaxnreg_misfit(k):
    """Why kernel k's setmaxnreg split does not fit its compiled register count, or None."""
    for pattern, split in SETMAXNREG_RULES:
        m = re.search(pattern, k["demangled"])
        if not m:
            continue
        producer, consumer, consumers = split(m)
        if producer == 0 and consumer == 0:
            return None
        threads = 128 * (1 + consumers)
        entry = -(-k["registers"] // 8) * 8  # allocated per warp in units of 256 registers: 8 per thread
        need = 128 * producer + 128 * consumers * consumer
        problems = []
        if producer > entry:
            problems.append(f"setmaxnreg.dec {producer} is above the entry count {entry}")
        if consumer < entry:
            problems.append(f"setmaxnreg.inc {consumer} is below the entry count {entry}")
        if need > entry * threads:
            problems.append(f"the split needs 128 x {producer} + {consumers} x 128 x {consumer} = {need} registers but "
                            f"the block holds {entry} x {threads} = {entry * threads} at entry: setmaxnreg.inc would "
                            f"wait forever")
        return "; ".join(problems) or None
    return None


SASS_CLASSES = collections.OrderedDict([
    ("mma", r"^(HMMA|IMMA|HGMMA|DMMA)"),
    ("cp.async", r"^LDGSTS"),
    ("ldmatrix", r"^LDSM"),
    ("shared", r"^(LDS|STS)(\.|$)"),
    ("global", r"^(LDG|STG|LD|ST)(\.|$)"),
    ("local", r"^(LDL|STL)"),
    ("barrier", r"^(BAR|BSYNC|WARPSYNC)"),
    ("fp32", r"^(FFMA|FADD|FMUL|FMNMX)"),
])


def parse_ptxas(text, kernels, source):
    current = None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)' for '(sm_\d+a?)'", line)
        if m:
            current = kernels.setdefault((m[1], m[2]), {"source": source})
            continue
        if current is None:
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m:
            current.update(stack=int(m[1]), spill_stores=int(m[2]), spill_loads=int(m[3]))
            continue
        m = re.search(r"Used (\d+) registers", line)
        if m:
            current["registers"] = int(m[1])
            s = re.search(r"(\d+) bytes smem", line)
            current["static_smem"] = int(s[1]) if s else 0
            current = None


def parse_launch_bounds(text, bounds):
    entry = None
    for line in text.splitlines():
        m = re.match(r"^(?:\.(?:visible|weak) )?\.entry (\S+?)\(", line)
        if m:
            entry = m[1]
            continue
        m = re.match(r"^\.(maxntid|reqntid) (\d+), (\d+), (\d+)", line)
        if m and entry is not None:
            bounds[entry] = int(m[2]) * int(m[3]) * int(m[4])


def demangle(names):
    if not names:
        return {}
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True).stdout
        return dict(zip(names, out.splitlines()))
    except (OSError, subprocess.CalledProcessError):
        return {n: n for n in names}


def short_name(demangled):
    """Drops namespaces, (anonymous namespace) and the parameter list: ImplicitGemmKernel<__half, ...>."""
    name = demangled.replace("(anonymous namespace)::", "").replace("convoy::cuda::", "").replace("convoy::", "")
    depth, cut = 0, len(name)
    for i, ch in enumerate(name):  # the parameter list is the first '(' at template depth 0 after the name
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    name = name[:cut]
    name = re.sub(r"^void ", "", name)
    return name


def dynamic_shared(demangled):
    for pattern, size in DYNAMIC_SHARED_RULES:
        m = re.search(pattern, demangled)
        if m:
            return size(m)
    return None


def occupancy(k):
    """(active warps per SM, limiting resource) on sm_90, or (None, why)."""
    threads = k.get("threads")
    if not threads:
        return None, "no launch bounds"
    warps = -(-threads // 32)
    regs = max(k["registers"], 1)
    regs_per_warp = -(-regs * 32 // SM90["reg_unit"]) * SM90["reg_unit"]
    limits = {
        "blocks": SM90["blocks"],
        "warps": SM90["warps"] // warps,
        "registers": SM90["regs"] // (regs_per_warp * warps),
    }
    smem = k["static_smem"] + (k["dynamic_smem"] or 0)
    if smem > 0:
        per_block = -(-(smem + SM90["smem_per_block_reserved"]) // SM90["smem_unit"]) * SM90["smem_unit"]
        limits["shared memory"] = SM90["smem"] // per_block
    blocks = min(limits.values())
    limiter = min(limits, key=lambda key: (limits[key], key != "registers"))
    return blocks * warps, limiter


def find_cuobjdump():
    for candidate in [os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"), "/usr/local/cuda/bin/cuobjdump"]:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    venv = os.environ.get("CONVOY_VENV")
    site_dirs = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")) if venv else []
    for site in site_dirs + [p for p in sys.path if p and os.path.isdir(p)]:
        for hit in sorted(glob.glob(os.path.join(site, "nvidia", "*", "bin", "cuobjdump"))):  # cu13/, cuda_cuobjdump/
            if os.access(hit, os.X_OK):
                return hit
    return None


def disassemble(cuobjdump, cubin):
    env = dict(os.environ)  # cuobjdump -sass runs the nvdisasm beside it (the nvidia-cuda-nvdisasm wheel's)
    env["PATH"] = os.path.dirname(cuobjdump) + os.pathsep + env.get("PATH", "")
    try:
        return subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True, check=True, env=env).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""


def sass_classes(cuobjdump, cubins):
    """{mangled kernel: Counter of SASS classes} from cuobjdump -sass (the cubins disassembled in parallel)."""
    counts = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        texts = list(pool.map(lambda cubin: disassemble(cuobjdump, cubin), cubins))
    for text in texts:
        current = None
        for line in text.splitlines():
            m = re.match(r"\s*Function : (\S+)", line)
            if m:
                current = counts.setdefault(m[1], collections.Counter())
                continue
            m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
            if m and current is not None:
                opcode = m[1]
                for cls, pattern in SASS_CLASSES.items():
                    if re.match(pattern, opcode):
                        current[cls] += 1
                        break
                current["total"] += 1
    return counts


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument("--markdown_out", help="also write the Markdown table to this file")
    parser.add_argument("--fail_on_hot_spills", action="store_true")
    parser.add_argument("--check_setmaxnreg", action="store_true")
    args = parser.parse_args()

    kernels, bounds, cubins, seen = {}, {}, [], set()
    for path in args.files:
        if os.path.basename(path) in seen:  # the same output reached through two runfiles paths
            continue
        seen.add(os.path.basename(path))
        if path.endswith(".cubin"):
            cubins.append(path)
            continue
        text = open(path).read()
        source = re.sub(r"\.pic\.o\.ptxas\.txt$", "", os.path.basename(path))
        parse_ptxas(text, kernels, source)
        if "== PTX entries" in text:
            parse_launch_bounds(text.split("== PTX entries", 1)[1], bounds)
    sm90 = {name: k for (name, arch), k in kernels.items() if arch in ("sm_90", "sm_90a")}
    if not sm90:
        print("kernel_resources: no sm_90 kernel in the ptxas reports given", file=sys.stderr)
        return 1
    names = demangle(sorted(sm90))
    cuobjdump = find_cuobjdump()
    sass = sass_classes(cuobjdump, cubins) if cuobjdump else {}

    rows, hot_spills, hot_stacks = [], [], []
    for mangled, k in sm90.items():
        k["demangled"] = names.get(mangled, mangled)
        k["name"] = short_name(k["demangled"])
        k["threads"] = bounds.get(mangled)
        k["dynamic_smem"] = dynamic_shared(k["demangled"])
        warps, limiter = occupancy(k)
        k["occupancy"] = f"{100 * warps / SM90['warps']:.0f}% ({warps} warps, {limiter})" if warps else limiter
        cold = any(re.search(p, k["name"]) for p in COLD_KERNELS)
        k["hot"] = not cold
        allowance = next((b for p, b in CALL_SAVE_SPILL_BYTES.items() if re.search(p, k["name"])), 0)
        if k["hot"] and max(k.get("spill_stores", 0), k.get("spill_loads", 0)) > allowance:
            hot_spills.append(k)
        elif k["hot"] and k.get("stack", 0):
            hot_stacks.append(k)
        counts = sass.get(mangled)
        k["sass"] = ", ".join(f"{c} {counts[c]}" for c in list(SASS_CLASSES) + ["total"] if counts and counts[c]) \
            if counts else "-"
        rows.append(k)
    rows.sort(key=lambda k: (k["source"], k["name"]))

    header = ["kernel (sm_90)", "source", "regs", "spill st/ld", "stack", "smem static+dyn", "threads", "occupancy",
              "hot", "SASS classes"]
    lines = []
    for k in rows:
        dyn = "dyn?" if k["dynamic_smem"] is None and "ImplicitGemm" in k["name"] else str(k["dynamic_smem"] or 0)
        lines.append([k["name"], k["source"], str(k["registers"]),
                      f"{k.get('spill_stores', 0)}/{k.get('spill_loads', 0)}", str(k.get("stack", 0)),
                      f"{k['static_smem']}+{dyn}", str(k["threads"] or "?"), k["occupancy"],
                      "yes" if k["hot"] else "no", k["sass"]])
    markdown = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for line in lines:
        markdown.append("| " + " | ".join([f"`{line[0]}`"] + [c.replace("|", "\\|") for c in line[1:]]) + " |")
    if args.markdown_out:
        with open(args.markdown_out, "w") as f:
            f.write("\n".join(markdown) + "\n")
    if args.markdown:
        print("\n".join(markdown))
    else:
        widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
        print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
        for line in lines:
            print("  ".join(c.ljust(w) for c, w in zip(line, widths)))
    regs = sorted(k["registers"] for k in rows)
    print(f"\n{len(rows)} kernel instances on sm_90; registers {regs[0]}..{regs[-1]}; "
          f"{sum(1 for k in rows if k['hot'])} hot; hot kernels that spill: {len(hot_spills)}, with a stack frame "
          f"(local memory, no spill): {len(hot_stacks)}; "
          f"SASS classes: {'from ' + cuobjdump if cuobjdump else 'no cuobjdump found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)'}")
    for k in hot_spills:
        print(f"SPILL {k['name']} ({k['source']}): {k.get('spill_stores', 0)} bytes spill stores, "
              f"{k.get('spill_loads', 0)} loads, {k.get('stack', 0)} bytes stack")
    for k in hot_stacks:
        print(f"STACK {k['name']} ({k['source']}): {k['stack']} bytes of stack frame (local memory) without spills")
    misfits = []
    if args.check_setmaxnreg:
        checked = 0
        for k in rows:
            if any(re.search(p, k["demangled"]) for p, _ in SETMAXNREG_RULES):
                checked += 1
                why = setmaxnreg_misfit(k)
                if why:
                    misfits.append(k)
                    print(f"SETMAXNREG {k['name']} ({k['source']}, {k['registers']} registers): {why}")
        print(f"setmaxnreg split checked against the compiled register count: {checked} kernels, "
              f"{len(misfits)} do not fit")
        if checked == 0:
            print("kernel_resources: --check_setmaxnreg found no kernel that SETMAXNREG_RULES covers", file=sys.stderr)
            return 1
    return 1 if (args.fail_on_hot_spills and hot_spills) or misfits else 0


if __name__ == "__main__":
    sys.exit(main())
