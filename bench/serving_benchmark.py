#!/usr/bin/env python3
r"""Serving benchmark: perf_analyzer concurrency sweep against convoy_server on the sample ResNet classifier (CPU),
with dynamic batching on (the sample config.yaml: the fixed policy, Triton's queue delay) and off (the same config
without `dynamic_batching`), and optionally the adaptive policy (the same config with `policy: adaptive` and a
latency target, docs/model_config.md), reporting throughput, p50/p99 latency, the batch-size histogram from the
server's /metrics (convoy_batch_size buckets, the delta over each run), and the ratio of served throughput to the
in-process engine's throughput at the same batch size (`convoy inspect --profile_batch=B`: one timed run of the plan
at batch B after a warm-up run; the fastest of --engine_reps invocations, since on a shared machine a single run is
easily slowed by others' work, never sped up).

    .venv/bin/python bench/serving_benchmark.py                  # writes docs/images/serving_*.png, prints tables
    .venv/bin/python bench/serving_benchmark.py --concurrency=1,2,4,8 --measurement_ms=3000 --json=/tmp/serving.json
    # the three policies, server pinned to core 0 with one compute thread, perf_analyzer on core 1, 3 rounds,
    # the modes interleaved at each concurrency (docs/performance.md, "Serving: batching policies"):
    .venv/bin/python bench/serving_benchmark.py --modes=off,on,adaptive --concurrency=1,2,4,8,16 --rounds=3 \
        --interleave --taskset=0:1 --server_threads=1 --target_latency_ms=100 --no_queue_timeout \
        --image_prefix=serving_policies
    # the sample served INT8 (calibrated first on uniform inputs; perf_analyzer sends uniform [0, 1) values):
    .venv/bin/python bench/serving_benchmark.py --precision=int8 --image_prefix=serving_int8

With --rounds=N the modes alternate round by round (every mode sweeps every concurrency once per round, on a fresh
server) and each row is the median of its N runs; with --interleave every round starts one fresh server per mode and
runs the modes back to back at each concurrency (order rotated), so on a machine whose load drifts the modes compared
at one concurrency are measured seconds apart, not a whole sweep apart; with --one_server as well, one fresh server
process per round serves every mode as its own model (resnet_classifier_off, _on, _adaptive), so the speed of the
process itself (a fresh one can be 20 % faster or slower than the next for its whole life) hits the modes alike and
a paired ratio compares the policies alone; a point whose runs spread by more than --noise (relative to their
median) is measured again, up to --repeat_noisy more times. The load average of the machine is recorded around every
run. With both modes of a pair (adaptive and off, adaptive and fixed) measured, a last table gives their throughput
ratio within each round, its median over the rounds, and the median round ratio of the server's own time per request
(nv_inference_request_duration_us per request: queue + compute, without the client). All traffic goes to
127.0.0.1; every perf_analyzer run is bounded (--max-trials). One repository copy per mode
is made in a temporary folder; nothing in model_repo/ is changed.
"""
import argparse
import csv
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]
MODEL = "resnet_classifier"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


MODE_LABELS = {"on": "fixed delay (config as shipped)", "off": "batching off", "adaptive": "adaptive policy"}
MODE_COLORS = {"on": "tab:blue", "off": "tab:orange", "adaptive": "tab:green"}


def model_name(args, mode):
    """The model a mode is served as: the sample's own name, or with --one_server one name per mode."""
    return f"{MODEL}_{mode}" if args.one_server else MODEL


def calibrate(cli, tmp):
    """An INT8 calibration table for the sample model (convoy calibrate, minmax, on 8 inputs uniform in [0, 1) like
    normalized pixels): the file `precision: int8` reads beside model.onnx. A speed run, not an accuracy one: the
    scales only have to be those of real-valued activations."""
    import numpy as np
    work = pathlib.Path(tmp) / "calibration"
    shutil.copytree(REPO_ROOT / "model_repo" / MODEL, work / MODEL)
    x = np.random.default_rng().uniform(0, 1, (8, 3, 224, 224)).astype(np.float32)
    np.save(work / "inputs.npy", x)
    out = subprocess.run([cli, "calibrate", f"--model={work / MODEL}", f"--inputs={work / 'inputs.npy'}"],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"convoy calibrate failed:\n{out.stderr[-2000:]}")
    print(out.stderr.strip().splitlines()[-1], flush=True)
    return work / MODEL / "1" / "calibration.yaml"


def write_uniform_input(tmp):
    """perf_analyzer's --input-data folder: one request's input uniform in [0, 1) (its default random bytes carry
    NaN and denormal floats a real image never has)."""
    import numpy as np
    folder = pathlib.Path(tmp) / "uniform_input"
    folder.mkdir()
    (folder / "images").write_bytes(np.random.default_rng().uniform(0, 1, (3, 224, 224)).astype(np.float32).tobytes())
    return folder


def make_repositories(tmp, modes, target_latency_ms, keep_queue_timeout=True, one_server=False, precision="",
                      calibration_table=None):
    """One copy of the sample ResNet entry per mode: "on" (config as shipped: the fixed policy), "off"
    (dynamic_batching removed) and "adaptive" (policy: adaptive with the latency target, without the fixed policy's
    preferred sizes and delay; the queue policy and priorities stay). Each in a repository of its own, or with
    `one_server` all in one repository, as models named resnet_classifier_<mode>. `precision` (when set) replaces
    the config's; `calibration_table` is copied beside each copy's model.onnx."""
    src = REPO_ROOT / "model_repo" / MODEL
    repos = {}
    for mode in modes:
        repo = pathlib.Path(tmp) / ("batching_all" if one_server else f"batching_{mode}")
        name = f"{MODEL}_{mode}" if one_server else MODEL
        shutil.copytree(src, repo / name)
        config = (src / "config.yaml").read_text()
        config = re.sub(r"^name: .*$", f"name: {name}", config, count=1, flags=re.M)
        if not keep_queue_timeout:  # every mode alike: an overloaded machine then measures latency, not rejections
            config = re.sub(r"^    default_timeout_microseconds:.*\n", "", config, flags=re.M)
        if mode == "off":
            # Drop the dynamic_batching block (its key line and the indented lines under it).
            config = re.sub(r"^dynamic_batching:\n(?:[ ].*\n)+", "", config, flags=re.M)
            assert "dynamic_batching" not in config
        elif mode == "adaptive":
            config = re.sub(r"^  (preferred_batch_size|max_queue_delay_microseconds):.*\n", "", config, flags=re.M)
            target = f"  target_latency_microseconds: {int(target_latency_ms * 1000)}\n" if target_latency_ms else ""
            config = config.replace("dynamic_batching:\n", "dynamic_batching:\n  policy: adaptive\n" + target)
            assert "policy: adaptive" in config and "preferred_batch_size" not in config
        if precision:
            config, n = re.subn(r"^  precision: .*$", f"  precision: {precision}", config, flags=re.M)
            assert n == 1, "the sample config has one optimization.precision"
        if calibration_table:
            shutil.copy(calibration_table, repo / name / "1" / "calibration.yaml")
        (repo / name / "config.yaml").write_text(config)
        repos[mode] = repo
    return repos


def scrape(port, model=MODEL):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        text = r.read().decode()
    buckets, series = {}, {}
    for line in text.splitlines():
        if line.startswith("#") or f'model="{model}"' not in line:
            continue
        name = line.split("{")[0]
        value = float(line.rsplit(" ", 1)[1])
        if name == "convoy_batch_size_bucket":
            le = re.search(r'le="([^"]+)"', line).group(1)
            buckets[le] = value
        elif name == "convoy_request_duration_seconds_bucket":  # cumulative: requests served within `le` seconds
            le = re.search(r'le="([^"]+)"', line).group(1)
            series[f"{name}:{le}"] = value
        elif "batch_size=" in line:  # convoy_batcher_execution_seconds, by measured batch size
            size = re.search(r'batch_size="([^"]+)"', line).group(1)
            series[f"{name}:{size}"] = value
        elif "reason=" not in line:
            series[name] = value
        else:
            reason = re.search(r'reason="([^"]+)"', line).group(1)
            series[f"{name}:{reason}"] = value
    return buckets, series


def pinned(cmd, core):
    """`cmd` run on CPU `core` (taskset) when one is given."""
    return cmd if core is None else ["taskset", "-c", str(core)] + cmd


class Server:
    def __init__(self, binary, repo, log, models=(MODEL,), core=None, threads=None):
        self.grpc_port, self.metrics_port = free_port(), free_port()
        self.log = open(log, "ab")
        env = dict(os.environ, **({"CONVOY_CPU_THREADS": str(threads)} if threads else {}))
        self.http_port = free_port()
        self.proc = subprocess.Popen(pinned([binary, f"--model_repository={repo}", f"--grpc_port={self.grpc_port}",
                                             f"--http_port={self.http_port}", f"--metrics_port={self.metrics_port}",
                                             "--device=cpu"], core),
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"convoy_server exited {self.proc.returncode}; see {log}")
            try:
                scrape(self.metrics_port)
                import tritonclient.grpc as grpcclient
                with grpcclient.InferenceServerClient(f"127.0.0.1:{self.grpc_port}") as c:
                    if all(c.is_model_ready(model) for model in models):
                        return
            except Exception:  # noqa: BLE001 - not up yet
                pass
            time.sleep(0.2)
        raise RuntimeError(f"convoy_server not ready in 120 s; see {log}")

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=60)
        self.log.close()
        if rc != 0:
            raise RuntimeError(f"convoy_server exited {rc} after SIGTERM")


def perf_analyzer(args, port, concurrency, out_csv, model=MODEL):
    # The perf_analyzer wheel's bundled CUDA runtime lives in its virtualenv's site-packages.
    venv = pathlib.Path(args.perf_analyzer).absolute().parent.parent
    site = next((venv / "lib").glob("python3*/site-packages"))
    env = dict(os.environ, LD_LIBRARY_PATH=f"{site / 'nvidia' / 'cuda_runtime' / 'lib'}:"
                                          f"{os.environ.get('LD_LIBRARY_PATH', '')}")
    cmd = pinned([args.perf_analyzer, "-m", model, "-i", "grpc", "-u", f"127.0.0.1:{port}", "--concurrency-range",
                  f"{concurrency}:{concurrency}", "--measurement-interval", str(args.measurement_ms), "--max-trials",
                  str(args.max_trials), "-f", str(out_csv)]
                 + (["--input-data", str(args.input_folder)] if args.input_folder else []), args.client_core)
    # On a shared machine the windows can miss the stability bound: retry once with the bound at 100 % (any three
    # windows), and record which bound the row was measured with.
    for stability in (args.stability, 100):
        proc = subprocess.run(cmd + ["--stability-percentage", str(stability)], capture_output=True, text=True,
                              timeout=600, env=env)
        if out_csv.exists():
            break
        print(f"perf_analyzer at concurrency {concurrency}, stability {stability} %, exited {proc.returncode}: "
              f"{proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]}", flush=True)
    if not out_csv.exists():
        raise RuntimeError(f"perf_analyzer failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr}")
    # "Client Recv" etc. are client-side; "Server Queue" + "Server Compute *" is what the latency target covers.
    with open(out_csv, newline="") as f:
        row = next(csv.DictReader(f))
    return {"throughput": float(row["Inferences/Second"]), "p50_ms": float(row["p50 latency"]) / 1000,
            "p99_ms": float(row["p99 latency"]) / 1000, "queue_ms": float(row["Server Queue"]) / 1000,
            "compute_ms": float(row["Server Compute Infer"]) / 1000, "stability": stability}


def engine_throughput(cli, model_dir, batch, reps):
    """Inferences/s of the plan alone at `batch` (convoy inspect's measured total; fastest of reps)."""
    totals = []
    for _ in range(reps):
        out = subprocess.run([cli, "inspect", f"--model={model_dir}", f"--profile_batch={batch}"],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise RuntimeError(f"convoy inspect failed:\n{out.stderr[-2000:]}")
        totals.append(float(re.search(r"^\s*total ([0-9.]+) ms", out.stdout, re.M).group(1)))
    ms = min(totals)
    return {"batch": batch, "ms": ms, "median_ms": statistics.median(totals), "throughput": batch * 1000.0 / ms,
            "all_ms": totals}


def histogram_delta(before, after):
    """Per-bucket counts (not cumulative) of executions by batch size between two scrapes."""
    edges = sorted((float(le), le) for le in after if le != "+Inf")
    counts, prev = {}, 0.0
    for _, le in edges:
        cum = after[le] - before.get(le, 0.0)
        counts[le] = cum - prev
        prev = cum
    return {le: int(c) for le, c in counts.items() if c > 0}


def nearest_power_of_two(x, limit):
    return min((b for b in (1, 2, 4, 8, 16) if b <= limit), key=lambda b: abs(b - x))


def plot(results, engine, out_dir, prefix="serving", target_ms=None):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    modes = [m for m in MODE_LABELS if any(r["mode"] == m for r in results)]
    conc = sorted({r["concurrency"] for r in results})
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for mode in modes:
        rows = sorted((r for r in results if r["mode"] == mode), key=lambda r: r["concurrency"])
        label = MODE_LABELS[mode]
        color = MODE_COLORS[mode]
        ax1.plot([r["concurrency"] for r in rows], [r["throughput"] for r in rows], "o-", color=color, label=label)
        ax2.plot([r["concurrency"] for r in rows], [r["p50_ms"] for r in rows], "o-", color=color,
                 label=f"{label}, p50")
        ax2.plot([r["concurrency"] for r in rows], [r["p99_ms"] for r in rows], "s--", color=color,
                 label=f"{label}, p99")
    for e, style in zip(engine, [":", "-.", "--", (0, (1, 3))]):
        ax1.axhline(e["throughput"], color="gray", lw=1.0, ls=style, label=f"engine alone, batch {e['batch']}")
    if target_ms:
        ax2.axhline(target_ms, color="tab:red", lw=1.0, ls=":", label=f"adaptive target {target_ms:g} ms")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xticks(conc)
        ax.set_xticklabels([str(c) for c in conc])
        ax.set_xlabel("perf_analyzer concurrency")
        ax.grid(alpha=0.3)
    ax1.set_ylabel("inferences / s")
    ax1.set_title(f"{MODEL}: served throughput (CPU)")
    ax1.set_ylim(bottom=0)
    ax1.legend(fontsize=7, loc="lower right")
    ax2.set_ylabel("latency (ms)")
    ax2.set_title("client latency")
    if max(conc) >= 16:  # a sweep to high concurrency spans two decades of latency
        ax2.set_yscale("log")
    else:
        ax2.set_ylim(bottom=0)
    ax2.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(out_dir / f"{prefix}_throughput_latency.png", dpi=110)
    plt.close(fig)

    sizes = ["1", "2", "4", "8", "16"]
    names = ["1", "2", "3-4", "5-8", "9-16"]
    fig, axes = plt.subplots(1, len(modes), figsize=(5.5 * len(modes), 4), sharey=True, squeeze=False)
    for ax, mode in zip(axes[0], modes):
        rows = sorted((r for r in results if r["mode"] == mode), key=lambda r: r["concurrency"])
        width = 0.8 / max(len(rows), 1)
        for i, r in enumerate(rows):
            total = sum(r["batch_histogram"].values()) or 1
            ax.bar([j + i * width for j in range(len(sizes))],
                   [100.0 * r["batch_histogram"].get(s, 0) / total for s in sizes], width,
                   label=f"concurrency {r['concurrency']} (mean {r['mean_batch']:.1f})")
        ax.set_xticks([j + width * (len(rows) - 1) / 2 for j in range(len(sizes))])
        ax.set_xticklabels(names)
        ax.set_xlabel("batch size of each execution (convoy_batch_size bucket)")
        ax.set_title(MODE_LABELS[mode])
        ax.legend(fontsize=7)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("% of executions")
    fig.suptitle(f"{MODEL}: batch sizes the server executed")
    fig.tight_layout()
    fig.savefig(out_dir / f"{prefix}_batch_sizes.png", dpi=110)
    plt.close(fig)


def measure_point(args, mode, server, c, tmp, tag):
    """One perf_analyzer run of `mode` at concurrency `c` against a running server: its result row."""
    model = model_name(args, mode)
    before_b, before_s = scrape(server.metrics_port, model)
    load_before = os.getloadavg()[0]
    try:
        row = perf_analyzer(args, server.grpc_port, c, pathlib.Path(tmp) / f"pa_{mode}_{c}_{tag.replace(' ', '_')}.csv",
                            model)
    except RuntimeError as error:  # e.g. the server's queue timeouts failed perf_analyzer's requests
        reason = next((line.strip() for line in str(error).splitlines() if "had error" in line),
                      str(error).splitlines()[0])
        print(f"{tag} {MODE_LABELS[mode]} c={c}: perf_analyzer failed: {reason}", flush=True)
        return {"mode": mode, "concurrency": c, "error": reason,
                "load": [round(load_before, 2), round(os.getloadavg()[0], 2)]}
    load_after = os.getloadavg()[0]
    after_b, after_s = scrape(server.metrics_port, model)
    execs = after_s["nv_inference_exec_count"] - before_s["nv_inference_exec_count"]
    infers = after_s["nv_inference_count"] - before_s["nv_inference_count"]
    failed = sum(after_s[k] - before_s.get(k, 0) for k in after_s if k.startswith("nv_inference_request_failure"))
    served = after_s["nv_inference_request_success"] - before_s["nv_inference_request_success"]
    server_us = after_s["nv_inference_request_duration_us"] - before_s["nv_inference_request_duration_us"]
    # The share of requests the server answered within the latency target (its histogram has a bucket edge at
    # 100 ms; other targets: the nearest edge below), so "p99 under the target" is read on the server's own time.
    within = None
    edges = {float(k.split(":")[1]): k for k in after_s
             if k.startswith("convoy_request_duration_seconds_bucket:") and not k.endswith("+Inf")}
    edge = max((e for e in edges if e <= args.target_latency_ms / 1000 + 1e-12), default=None)
    if args.target_latency_ms and edge is not None:
        key = edges[edge]
        total = (after_s["convoy_request_duration_seconds_count"]
                 - before_s.get("convoy_request_duration_seconds_count", 0))
        within = {"seconds": edge, "share": (after_s[key] - before_s.get(key, 0)) / total if total else None}
    # Why the adaptive policy sent each batch of this run (convoy_batcher_batches_total, docs/metrics.md).
    prefix = "convoy_batcher_batches_total:"
    reasons = {k[len(prefix):]: int(after_s[k] - before_s.get(k, 0)) for k in after_s if k.startswith(prefix)}
    # What the policy believed once the run's clients stopped: the return time, the closed-loop split (read after
    # the load is gone, so it may already reflect the clients leaving) and the execution time of the powers of two.
    prefix = "convoy_batcher_execution_seconds:"
    execution = {int(k[len(prefix):]): round(v * 1000, 2) for k, v in after_s.items() if k.startswith(prefix)}
    estimates = {"return_ms": round(after_s.get("convoy_batcher_return_seconds", 0) * 1000, 2),
                 "closed_loop_batch_size": int(after_s.get("convoy_batcher_closed_loop_batch_size", 0)),
                 "execution_ms": {b: execution[b] for b in sorted(execution) if b & (b - 1) == 0}}
    row.update(mode=mode, concurrency=c, batch_histogram=histogram_delta(before_b, after_b),
               batch_reasons={r: n for r, n in sorted(reasons.items()) if n > 0}, estimates=estimates,
               server_ms=server_us / served / 1000 if served else 0.0, server_within_target=within,
               mean_batch=infers / execs if execs else 0.0, failures=int(failed),
               load=[round(load_before, 2), round(load_after, 2)])
    print(f"{tag} {MODE_LABELS[mode]} c={c}: {row['throughput']:.1f} inf/s p50 {row['p50_ms']:.1f} ms "
          f"p99 {row['p99_ms']:.1f} ms queue {row['queue_ms']:.1f} ms server {row['server_ms']:.2f} ms "
          f"mean batch {row['mean_batch']:.2f} "
          f"hist {row['batch_histogram']} "
          + (f"reasons {row['batch_reasons']} estimates {estimates} " if row["batch_reasons"] else "") +
          f"failures {row['failures']} (stability {row['stability']} %, "
          f"load {load_before:.1f}->{load_after:.1f})", flush=True)
    return row


def start_server(args, mode, repo, tmp, models=None):
    return Server(args.server, repo, pathlib.Path(tmp) / f"server_{mode}.log",
                  models=models or (model_name(args, mode),), core=args.server_core, threads=args.server_threads)


def measure(args, mode, repo, concurrencies, tmp, tag):
    """One fresh server of `mode`, swept over `concurrencies`: one result row per concurrency."""
    server = start_server(args, mode, repo, tmp)
    try:
        return [measure_point(args, mode, server, c, tmp, tag) for c in concurrencies]
    finally:
        server.stop()


def measure_interleaved(args, modes, repos, concurrencies, tmp, tag, shift):
    """One fresh server per mode, all up at once (idle ones wait on their sockets); at each concurrency every mode
    runs once, back to back, in an order rotated by `shift`, so the modes compared at one concurrency are measured
    within seconds of each other and a drift of the machine's load hits them alike."""
    servers = {}
    try:
        if args.one_server:  # every mode a model of one server process: the process's own speed cancels out
            shared = start_server(args, "all", repos[modes[0]], tmp, models=[model_name(args, m) for m in modes])
            servers = {mode: shared for mode in modes}
        for mode in modes:
            if mode not in servers:
                servers[mode] = start_server(args, mode, repos[mode], tmp)
        rows = []
        for i, c in enumerate(concurrencies):
            order = modes[(shift + i) % len(modes):] + modes[:(shift + i) % len(modes)]
            rows += [measure_point(args, mode, servers[mode], c, tmp, tag) for mode in order]
        return rows
    finally:
        for server in {id(server): server for server in servers.values()}.values():
            server.stop()


def spread(runs):
    values = [r["throughput"] for r in runs if "error" not in r]
    return (max(values) - min(values)) / statistics.median(values) if len(values) > 1 else 0.0


def median_row(all_runs):
    """The median over repeated runs of one (mode, concurrency): each number is its own median; the batch histogram
    is the run whose throughput is the median's (lower median with an even count). Failed runs are counted, not
    averaged; a point whose runs all failed keeps the first error."""
    runs = [r for r in all_runs if "error" not in r]
    failed = len(all_runs) - len(runs)
    if not runs:
        return dict(all_runs[0], runs=0, failed_runs=failed, load=[v for r in all_runs for v in r["load"]])
    ordered = sorted(runs, key=lambda r: r["throughput"])
    middle = ordered[(len(ordered) - 1) // 2]
    row = dict(middle)
    for key in ("throughput", "p50_ms", "p99_ms", "queue_ms", "compute_ms", "server_ms", "mean_batch"):
        row[key] = statistics.median(r[key] for r in runs)
    within = [r["server_within_target"] for r in runs
              if r.get("server_within_target") and r["server_within_target"]["share"] is not None]
    if within:
        shares = [w["share"] for w in within]
        row["server_within_target"] = dict(within[0], share=statistics.median(shares),
                                           shares=[round(x, 4) for x in shares])
    row.update(runs=len(runs), throughputs=[round(r["throughput"], 1) for r in runs], spread=spread(runs),
               failures=sum(r["failures"] for r in runs), stability=max(r["stability"] for r in runs),
               load=[v for r in all_runs for v in r["load"]], failed_runs=failed)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    opt_bin = REPO_ROOT / "bazel-out/k8-opt/bin"  # bazel-bin follows the last build's config (an asan pass: dbg)
    p.add_argument("--server", default=os.environ.get("CONVOY_SERVER", str(opt_bin / "server/convoy_server")))
    p.add_argument("--cli", default=os.environ.get("CONVOY_CLI", str(opt_bin / "server/tools/convoy")))
    p.add_argument("--perf_analyzer", default=str(REPO_ROOT / ".venv/bin/perf_analyzer"))
    p.add_argument("--concurrency", default="1,2,4,8")
    p.add_argument("--modes", default="on,off",
                   help="comma-separated: on (the fixed policy, config as shipped), off, adaptive")
    p.add_argument("--target_latency_ms", type=float, default=0,
                   help="the adaptive mode's target_latency_microseconds, in ms (0: none)")
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds; rows are medians over them")
    p.add_argument("--interleave", action="store_true",
                   help="all modes' servers up at once; at each concurrency the modes run back to back (order "
                        "rotated per concurrency and round), so a drifting load hits them alike")
    p.add_argument("--one_server", action="store_true",
                   help="with --interleave: one server process serves every mode, as models named "
                        "resnet_classifier_<mode> (a fresh process can be 20 %% faster or slower than the next for "
                        "its whole life; within one process that spread hits every mode alike)")
    p.add_argument("--repeat_noisy", type=int, default=0, help="extra runs, at most, of a point whose runs spread")
    p.add_argument("--noise", type=float, default=0.10, help="spread (max - min) / median that counts as noisy")
    p.add_argument("--no_queue_timeout", action="store_true",
                   help="drop the shipped config's 1 s queue timeout in every mode (a slow shared machine at high "
                        "concurrency otherwise turns the sweep into rejections)")
    p.add_argument("--taskset", default="", help="SERVER_CORE:CLIENT_CORE, e.g. 0:1 (taskset -c)")
    p.add_argument("--server_threads", type=int, default=0, help="CONVOY_CPU_THREADS of the server and engine runs")
    p.add_argument("--measurement_ms", type=int, default=3000)
    p.add_argument("--max_trials", type=int, default=6)
    p.add_argument("--stability", type=int, default=50, help="perf_analyzer --stability-percentage")
    p.add_argument("--engine_reps", type=int, default=5)
    p.add_argument("--images", default=str(REPO_ROOT / "docs/images"))
    p.add_argument("--image_prefix", default="serving")
    p.add_argument("--json", default="")
    p.add_argument("--precision", default="", choices=["", "fp32", "int8"],
                   help="the served plan's precision (default: the sample config's, fp32); int8 calibrates the sample "
                        "first (convoy calibrate on uniform inputs) and serves it with precision: int8")
    p.add_argument("--input_data", default="random", choices=["random", "uniform"],
                   help="perf_analyzer's input: its default random bytes, or values uniform in [0, 1) like normalized "
                        "pixels (implied by --precision=int8)")
    args = p.parse_args()
    if args.one_server and not args.interleave:
        sys.exit("--one_server needs --interleave (the modes measured back to back on the one server)")
    for path in (args.server, args.cli, args.perf_analyzer):
        if not os.access(path, os.X_OK):
            sys.exit(f"missing {path}: bazel build //server:convoy_server //server/tools:convoy; tools/setup.sh")
    modes = args.modes.split(",")
    if any(m not in MODE_LABELS for m in modes):
        sys.exit(f"--modes: each of {sorted(MODE_LABELS)}, got {args.modes}")
    args.server_core, args.client_core = ((int(c) for c in args.taskset.split(":")) if args.taskset
                                          else (None, None))
    concurrencies = [int(x) for x in args.concurrency.split(",")]

    started = time.monotonic()
    runs = {}
    with tempfile.TemporaryDirectory() as tmp:
        table = calibrate(args.cli, tmp) if args.precision == "int8" else None
        args.input_folder = (str(write_uniform_input(tmp)) if args.input_data == "uniform" or args.precision == "int8"
                             else None)
        repos = make_repositories(tmp, modes, args.target_latency_ms, keep_queue_timeout=not args.no_queue_timeout,
                                  one_server=args.one_server, precision=args.precision, calibration_table=table)
        for round_index in range(args.rounds):
            shift = round_index % len(modes)  # alternate which mode goes first
            tag = f"round {round_index + 1}"
            if args.interleave:
                rows = measure_interleaved(args, modes, repos, concurrencies, tmp, tag, shift)
            else:
                rows = [row for mode in modes[shift:] + modes[:shift]
                        for row in measure(args, mode, repos[mode], concurrencies, tmp, tag)]
            for row in rows:
                runs.setdefault((row["mode"], row["concurrency"]), []).append(row)
        for extra in range(args.repeat_noisy):
            noisy = sorted(key for key, rs in runs.items() if spread(rs) > args.noise)
            if not noisy:
                break
            print(f"noisy points (spread > {args.noise:.0%}): {noisy}", flush=True)
            for mode in modes:
                again = [c for m, c in noisy if m == mode]
                if again:
                    for row in measure(args, mode, repos[mode], again, tmp, f"repeat {extra + 1}"):
                        runs[(mode, row["concurrency"])].append(row)
        results = [median_row(runs[(mode, c)]) for mode in modes for c in concurrencies]
        measured = [r for r in results if "error" not in r]
        batches = sorted({1} | {nearest_power_of_two(r["mean_batch"], 16) for r in measured})
        engine_env = {"CONVOY_CPU_THREADS": str(args.server_threads)} if args.server_threads else {}
        os.environ.update(engine_env)
        engine = [engine_throughput(pinned_cli(args), repos[modes[0]] / model_name(args, modes[0]), b, args.engine_reps)
                  for b in batches]
    by_batch = {e["batch"]: e for e in engine}
    for r in measured:
        b = nearest_power_of_two(r["mean_batch"], 16) if r["mean_batch"] else 1
        r["engine_batch"] = b
        r["vs_engine"] = r["throughput"] / by_batch[b]["throughput"]
    plot(measured, engine, pathlib.Path(args.images), args.image_prefix,
         args.target_latency_ms if "adaptive" in modes else None)
    print_tables(results, engine)
    paired = paired_ratios(runs, modes, concurrencies, args.rounds)
    print_paired(paired, results)
    print(f"\ntotal time {time.monotonic() - started:.0f} s")
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps({"results": results, "engine": engine, "paired": paired,
                                                       "args": vars(args)},
                                                      indent=1))


def pinned_cli(args):
    """The convoy CLI, run on the server's core when the server is pinned (a wrapper script taskset can exec)."""
    if args.server_core is None:
        return args.cli
    wrapper = pathlib.Path(tempfile.mkdtemp()) / "convoy_pinned"
    wrapper.write_text(f"#!/bin/sh\nexec taskset -c {args.server_core} {args.cli} \"$@\"\n")
    wrapper.chmod(0o755)
    return str(wrapper)


PAIRS = (("adaptive", "off"), ("adaptive", "on"))


def paired_ratios(runs, modes, concurrencies, rounds):
    """Per concurrency and pair of modes (adaptive / off, adaptive / fixed): the throughput ratio within each round
    and its median over the rounds. With --interleave the two runs of a round are seconds apart on servers started
    together, so the pairing cancels a drift of the machine's load. Rounds where either run failed are left out."""
    table = []
    for a, b in PAIRS:
        if a not in modes or b not in modes:
            continue
        for c in concurrencies:
            both = [(ra, rb) for ra, rb in zip(runs[(a, c)][:rounds], runs[(b, c)][:rounds])
                    if "error" not in ra and "error" not in rb]
            ratios = [ra["throughput"] / rb["throughput"] for ra, rb in both]
            server = [ra["server_ms"] / rb["server_ms"] for ra, rb in both if rb["server_ms"] > 0]
            if ratios:
                table.append({"pair": f"{a}/{b}", "concurrency": c, "ratios": [round(x, 3) for x in ratios],
                              "median_ratio": statistics.median(ratios),
                              "server_time_ratio": statistics.median(server) if server else None})
    return table


def print_paired(paired, results):
    medians = {(r["mode"], r["concurrency"]): r["throughput"] for r in results if "error" not in r}
    print("\n| pair | concurrency | throughput ratio per round | median of the round ratios | ratio of the medians | "
          "server time per request, median round ratio |")
    print("| --- | ---: | --- | ---: | ---: | ---: |")
    for p in paired:
        a, b = p["pair"].split("/")
        c = p["concurrency"]
        of_medians = (f"{medians[(a, c)] / medians[(b, c)]:.2f}" if (a, c) in medians and (b, c) in medians
                      else "-")
        label = p["pair"].replace("/on", "/fixed")
        server = f"{p['server_time_ratio']:.3f}" if p["server_time_ratio"] is not None else "-"
        print(f"| {label} | {c} | {', '.join(f'{x:.2f}' for x in p['ratios'])} | {p['median_ratio']:.2f} | "
              f"{of_medians} | {server} |")


def print_tables(results, engine):
    by_batch = {e["batch"]: e for e in engine}
    print("\n| batching | concurrency | throughput (inf/s) | p50 (ms) | p99 (ms) | server queue (ms) | mean batch | "
          "executions by batch size | engine at that batch (inf/s) | served / engine | runs (inf/s) | load average | "
          "server answered within the target (median share) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | ---: | --- | --- | ---: |")
    for r in results:
        if "error" in r:
            print(f"| {r['mode']} | {r['concurrency']} | failed in all {r['failed_runs']} runs: {r['error']} |")
            continue
        hist = ", ".join(f"{k}: {v}" for k, v in sorted(r["batch_histogram"].items(), key=lambda kv: float(kv[0])))
        throughputs = ", ".join(f"{t:.1f}" for t in r["throughputs"]) + (
            f" ({r['failed_runs']} failed)" if r["failed_runs"] else "")
        load = f"{min(r['load']):.1f}-{max(r['load']):.1f}"
        target = r.get("server_within_target")
        within = (f"{100 * target['share']:.1f} % within {1000 * target['seconds']:g} ms" if target else "-")
        print(f"| {r['mode']} | {r['concurrency']} | {r['throughput']:.1f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} | "
              f"{r['queue_ms']:.1f} | {r['mean_batch']:.2f} | {hist} | "
              f"{by_batch[r['engine_batch']]['throughput']:.1f} (b={r['engine_batch']}) | {r['vs_engine']:.2f} | "
              f"{throughputs} | {load} | {within} |")
    print("\n| engine batch | plan time (ms, fastest) | median (ms) | inferences/s (fastest) | all runs (ms) |")
    print("| ---: | ---: | ---: | ---: | --- |")
    for e in engine:
        print(f"| {e['batch']} | {e['ms']:.2f} | {e['median_ms']:.2f} | {e['throughput']:.1f} | "
              f"{', '.join(f'{t:.1f}' for t in e['all_ms'])} |")


if __name__ == "__main__":
    main()
