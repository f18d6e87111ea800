#!/usr/bin/env python3
r"""HTTP/REST against gRPC under perf_analyzer on the sample ResNet classifier (CPU), one server serving both: the
server pinned to one core (CONVOY_CPU_THREADS=1), perf_analyzer to another, the two protocols measured back to back
at each concurrency (order alternating round by round), each row the median of its rounds, and the HTTP/gRPC
throughput ratio taken within each round (the machine's drift hits both protocols alike) and reported as the median
of the rounds. perf_analyzer -i http sends and receives tensors in the binary tensor data extension.

A second table splits each protocol's average request into perf_analyzer's phases (client send, network and the
server's send/receive, the server's queue, compute input, compute infer, compute output, client receive; averages in
microseconds, the server's from its statistics extension) and prints two edge costs: the client's p50 latency minus
the server's own compute-infer time, and the client's p50 minus the plan's own time (`convoy run --repeat` of the
same model on the server's core with the server's thread count, before the servers start), which is the figure the
server's 0.5 ms goal is stated against. A third table gives the server's own edge phases per request from its
`convoy_edge_duration_us` metric (scraped before and after each perf_analyzer run).

    .venv/bin/python bench/protocol_compare.py                         # concurrency 1 and 8, 3 rounds, cores 0:1
    .venv/bin/python bench/protocol_compare.py --concurrency=1,2,8 --rounds=5 --measurement_ms=3000
    .venv/bin/python bench/protocol_compare.py --no_batching --concurrency=1 --probes \
        --baseline_server=/tmp/old/convoy_server                       # where the edge's time goes, old against new

--probes also serves two generated models with the ResNet's output (logits [1000] FP32) on a trivial plan
(GlobalAveragePool, Flatten, Gemm): `wire_588k` takes the ResNet's 588 KiB input [3,224,224] FP32, `wire_tiny` a
[3,8,8] one (768 bytes). wire_tiny's p50 is the fixed cost of a request (both ends, the loopback, the server's
threads); wire_588k's minus wire_tiny's is what carrying the 588 KiB request costs. --baseline_server serves the same
models from a second binary (its own ports, the same core), measured in the same rounds in alternating order, so two
builds (or, with --server_flag / --baseline_flag, two settings of one build) compare on the same machine state.
--fifo=N runs the servers, perf_analyzer and the plan alone as SCHED_FIFO tasks (chrt), so other work on the machine
(compilers) waits while they run: the nearest to an idle machine a shared one gives.

--raw_client also runs bench/raw_infer_client (bazel build //bench:raw_infer_client) after each perf_analyzer run,
on the same server, model and protocol: one request sent again and again at concurrency 1 over the protocol,
serialized once (`raw`) and built and serialized anew for each call (`raw, serialized each`), each round trip timed,
with the client's and the server's CPU time and context switches per request. It measures the server and the
transport with as little client work as a client can do: what perf_analyzer's p50 has beyond it is the client's.

The model's config.yaml is used as shipped (dynamic batching on); --no_batching serves it without
`dynamic_batching`. All traffic goes to 127.0.0.1; every perf_analyzer run is bounded (--max-trials).
"""
import argparse
import csv
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
PROBES = {"wire_588k": (3, 224, 224), "wire_tiny": (3, 8, 8)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cmd, core, fifo=0):
    """`cmd` on `core` (taskset), and with fifo > 0 at that SCHED_FIFO priority (chrt: ahead of every normal task)."""
    cmd = cmd if core is None else ["taskset", "-c", str(core)] + cmd
    return cmd if fifo <= 0 else ["chrt", "-f", str(fifo)] + cmd


def start_server(args, binary, flags, repo, log):
    ports = {"grpc": free_port(), "http": free_port(), "metrics": free_port()}
    env = dict(os.environ, CONVOY_CPU_THREADS=str(args.server_threads))
    proc = subprocess.Popen(pinned([binary, f"--model_repository={repo}", f"--grpc_port={ports['grpc']}",
                                    f"--http_port={ports['http']}", f"--metrics_port={ports['metrics']}",
                                    "--device=cpu"] + flags, args.server_core, args.fifo),
                            stdout=open(log, "ab"), stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"convoy_server exited {proc.returncode}; see {log}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ports['http']}/v2/models/{MODEL}/ready", timeout=2):
                return proc, ports
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)
    raise RuntimeError(f"convoy_server not ready in 120 s; see {log}")


def edge_counters(metrics_port, model):
    """{(protocol, phase): summed µs} and {protocol: requests} of `model` from the server's /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    sums, counts = {}, {}
    for line in text.splitlines():
        m = re.match(r'convoy_edge_(duration_us|requests_total)\{([^}]*)\} (\S+)', line)
        if not m:
            continue
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2)))
        if labels.get("model") != model:
            continue
        if m.group(1) == "duration_us":
            sums[(labels["protocol"], labels["phase"])] = float(m.group(3))
        else:
            counts[labels["protocol"]] = float(m.group(3))
    return sums, counts


def server_usage(pid):
    """The server process's CPU seconds and context switches (voluntary and involuntary) so far, summed over its
    threads, and the switches per thread name ({comm: count}; gRPC names its threads, e.g. nexting_thread, the
    callback API's completion-queue threads). A thread that ended between two readings drops out of both sums."""
    tick = os.sysconf("SC_CLK_TCK")
    cpu, by_name = 0.0, {}
    for task in pathlib.Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            status = (task / "status").read_text()
            name = (task / "comm").read_text().strip()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()  # from the state on: utime and stime are the 12th and 13th
        cpu += (int(fields[11]) + int(fields[12])) / tick
        switches = sum(int(line.split()[1]) for line in status.splitlines() if "ctxt_switches" in line)
        by_name[name] = by_name.get(name, 0) + switches
    return cpu, by_name


def write_inputs(models, tmp):
    """One request's input per model, uniform in [0, 1) like normalized pixels: {model: (data folder, .npy)}. The
    plan alone and perf_analyzer (--input-data=folder: a raw file named after the input) use the same values; its
    default random bytes would carry NaN and denormal floats the plan alone never sees (denormals cost the plan
    about 0.2 ms here)."""
    import numpy as np
    rng = np.random.default_rng()
    inputs = {}
    for model in models:
        x = rng.uniform(0, 1, (1, *PROBES.get(model, (3, 224, 224)))).astype(np.float32)
        folder = pathlib.Path(tmp) / "inputs" / model
        folder.mkdir(parents=True)
        (folder / "images").write_bytes(x.tobytes())
        np.save(folder.parent / f"{model}.npy", x)
        inputs[model] = (folder, folder.parent / f"{model}.npy")
    return inputs


def raw_client(args, model, protocol, ports, server_pid, serialize_each):
    """bench/raw_infer_client at concurrency 1 (see above): its p50, the client's CPU µs and switches per request,
    and the server's CPU µs and context switches per request over the same requests (warm-up included)."""
    shape = (1, *PROBES.get(model, (3, 224, 224)))
    cmd = pinned([args.raw_client_binary, f"--protocol={protocol}", f"--address=127.0.0.1:{ports[protocol]}",
                  f"--model={model}", f"--input={args.inputs[model][0] / 'images'}",
                  f"--shape={','.join(map(str, shape))}", f"--requests={args.raw_requests}",
                  f"--warmup={args.raw_requests // 10}", f"--serialize_each_request={str(serialize_each).lower()}"],
                 args.client_core, args.fifo)
    before = server_usage(server_pid)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    after = server_usage(server_pid)
    if out.returncode != 0:
        raise RuntimeError(f"raw_infer_client failed ({out.returncode}): {out.stderr[-2000:]}")
    words = out.stdout.split()
    result = {k: float(v) for k, v in zip(words[::2], words[1::2]) if re.fullmatch(r"[0-9.]+", v)}
    requests = args.raw_requests + args.raw_requests // 10
    result["server_cpu_us"] = (after[0] - before[0]) / requests * 1e6
    result["server_switches"] = sum(n - before[1].get(name, 0) for name, n in after[1].items()) / requests
    return result


def perf_analyzer(args, model, protocol, ports, concurrency, out_csv, server_pid):
    venv = pathlib.Path(args.perf_analyzer).absolute().parent.parent
    site = next((venv / "lib").glob("python3*/site-packages"))
    env = dict(os.environ, LD_LIBRARY_PATH=f"{site / 'nvidia' / 'cuda_runtime' / 'lib'}:"
                                          f"{os.environ.get('LD_LIBRARY_PATH', '')}")
    cmd = pinned([args.perf_analyzer, "-m", model, "-i", protocol, "-u", f"127.0.0.1:{ports[protocol]}",
                  "--concurrency-range", f"{concurrency}:{concurrency}", "--measurement-interval",
                  str(args.measurement_ms), "--max-trials", str(args.max_trials), "--stability-percentage",
                  str(args.stability), "--input-data", str(args.inputs[model][0]), "-f", str(out_csv)],
                 args.client_core, args.fifo)
    before = edge_counters(ports["metrics"], model)
    usage_before = server_usage(server_pid)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    usage_after = server_usage(server_pid)
    after = edge_counters(ports["metrics"], model)
    if not out_csv.exists():
        raise RuntimeError(f"perf_analyzer -i {protocol} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    with open(out_csv, newline="") as f:
        row = next(csv.DictReader(f))
    result = {"throughput": float(row["Inferences/Second"]), "p50_ms": float(row["p50 latency"]) / 1000,
              "p99_ms": float(row["p99 latency"]) / 1000}
    for key, column in PHASES:
        result[key] = float(row.get(column) or "nan") / 1000
    result["edge_ms"] = result["p50_ms"] - result["infer_ms"]
    requests = after[1].get(protocol, 0) - before[1].get(protocol, 0)
    result["server_phases"] = {phase: (after[0][(p, phase)] - before[0].get((p, phase), 0)) / requests / 1000
                               for (p, phase) in after[0] if p == protocol and requests > 0}
    # The server's CPU time and context switches per request over the whole perf_analyzer run (its warm-up and
    # trials, as the request count): where the server's threads share a core, every switch is time on that core.
    if requests > 0:
        result["server_cpu_us"] = (usage_after[0] - usage_before[0]) / requests * 1e6
        result["server_switches"] = {name: (n - usage_before[1].get(name, 0)) / requests
                                     for name, n in usage_after[1].items()}
    return result


# perf_analyzer's CSV columns of one request's phases (average microseconds), as (key, column).
PHASES = [("client_send_ms", "Client Send"), ("network_ms", "Network+Server Send/Recv"),
          ("queue_ms", "Server Queue"), ("input_ms", "Server Compute Input"), ("infer_ms", "Server Compute Infer"),
          ("output_ms", "Server Compute Output"), ("client_recv_ms", "Client Recv")]


def cpu_name():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    match = re.search(r"Model name:\s*(.+)", out)
    family = re.search(r"CPU family:\s*(\d+)", out)
    model = re.search(r"Model:\s*(\d+)", out)
    name = match.group(1).strip() if match else "unknown CPU"
    return f"{name} (family {family.group(1)} model {model.group(1)})" if family and model else name


def load_average():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def write_probe_models(repo):
    """wire_588k and wire_tiny: the ResNet's logits [1000] output on GlobalAveragePool -> Flatten -> Gemm, served
    without dynamic batching (see the module docstring)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng()
    for name, dims in PROBES.items():
        init = {"fc_w": rng.uniform(-1, 1, (1000, dims[0])).astype(np.float32),
                "fc_b": rng.uniform(-0.5, 0.5, 1000).astype(np.float32)}
        nodes = [helper.make_node("GlobalAveragePool", ["images"], ["gap"]),
                 helper.make_node("Flatten", ["gap"], ["flat"]),
                 helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1)]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", *dims])],
            [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 1000])],
            initializer=[numpy_helper.from_array(v, n) for n, v in init.items()])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        (repo / name / "1").mkdir(parents=True)
        onnx.save(model, str(repo / name / "1" / "model.onnx"))
        (repo / name / "config.yaml").write_text(
            f"name: {name}\nformat: onnx\nmax_batch_size: 16\ninputs:\n  - name: images\n    datatype: FP32\n"
            f"    dims: [{', '.join(map(str, dims))}]\noutputs:\n  - name: logits\n    datatype: FP32\n"
            f"    dims: [1000]\ninstance_group:\n  - count: 1\n    kind: auto\n")


def plan_time(args, repo, model, tmp):
    """Median ms of the plan alone at batch 1: `convoy run --repeat` pinned as the server, with its thread count, on
    the input perf_analyzer sends."""
    x = args.inputs[model][1]
    cmd = pinned([args.convoy, "run", f"--model={repo / model}", f"--input={x}", f"--output_dir={tmp}/plan_out",
                  f"--threads={args.server_threads}", f"--repeat={args.plan_runs}", "--quiet"],
                 args.server_core, args.fifo)
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    match = re.search(r"median ([0-9.]+) ms", out.stdout)
    if not match:
        raise RuntimeError(f"convoy run failed ({out.returncode}):\n{out.stdout[-2000:]}{out.stderr[-2000:]}")
    return float(match.group(1))


def median_of(rows, key):
    return statistics.median(row[key] for row in rows)


def print_tables(args, runs, servers, models, protocols, concurrencies, plan_ms):
    print(f"\n{cpu_name()}, server on core {args.server_core} with {args.server_threads} compute thread(s), "
          f"perf_analyzer on core {args.client_core}, {args.rounds} rounds, medians"
          f"{', batching off' if args.no_batching else ', batching as in config.yaml'}; load average now "
          f"{load_average()}\n")
    print("Plan alone (`convoy run --repeat`, batch 1, median): " +
          ", ".join(f"{m} {plan_ms[m]:.3f} ms" for m in models) + "\n")
    print("| server | model | concurrency | protocol | infer/s | p50 ms | p99 ms | HTTP / gRPC throughput "
          "(median of rounds) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for server in servers:
        for model in models:
            for c in concurrencies:
                ratios = []
                if len(protocols) == 2:
                    ratios = [h["throughput"] / g["throughput"] for g, h in
                              zip(runs[(server, model, "grpc", c)], runs[(server, model, "http", c)])]
                for proto in protocols:
                    rows = runs[(server, model, proto, c)]
                    ratio = f"{statistics.median(ratios):.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})" \
                        if proto == "http" and ratios else ""
                    print(f"| {server} | {model} | {c} | {proto} | {median_of(rows, 'throughput'):.1f} | "
                          f"{median_of(rows, 'p50_ms'):.2f} | {median_of(rows, 'p99_ms'):.2f} | {ratio} |")
    print("\nPhases of a request, ms (perf_analyzer's averages over the measurement, medians of the rounds); "
          "edge = client p50 minus the server's compute infer; over plan = client p50 minus the plan alone\n")
    print("| server | model | concurrency | protocol | client send | network + server send/recv | server queue | "
          "compute input | compute infer | compute output | client recv | p50 | edge | **over plan** |")
    print("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for server in servers:
        for model in models:
            for c in concurrencies:
                for proto in protocols:
                    rows = runs[(server, model, proto, c)]
                    cells = " | ".join(f"{median_of(rows, k):.3f}" for k, _ in PHASES)
                    p50 = median_of(rows, "p50_ms")
                    print(f"| {server} | {model} | {c} | {proto} | {cells} | {p50:.3f} | "
                          f"{median_of(rows, 'edge_ms'):.3f} | **{p50 - plan_ms[model]:.3f}** |")
    print_server_usage(args, runs, servers, models, protocols, concurrencies)
    phases = sorted({ph for rows in runs.values() for row in rows for ph in row["server_phases"]})
    if not phases:
        return
    print("\nThe server's edge phases per request, ms (convoy_edge_duration_us over convoy_edge_requests_total "
          "during each run, medians of the rounds)\n")
    print(f"| server | model | concurrency | protocol | {' | '.join(phases)} |")
    print(f"| --- | --- | --- | --- | {' | '.join('---:' for _ in phases)} |")
    for server in servers:
        for model in models:
            for c in concurrencies:
                for proto in protocols:
                    rows = runs[(server, model, proto, c)]
                    cells = []
                    for ph in phases:
                        values = [row["server_phases"][ph] for row in rows if ph in row["server_phases"]]
                        cells.append(f"{statistics.median(values):.3f}" if values else "")
                    print(f"| {server} | {model} | {c} | {proto} | {' | '.join(cells)} |")


def print_server_usage(args, runs, servers, models, protocols, concurrencies):
    """The server's CPU time and context switches per request (medians of the rounds), the switches split by thread
    name (the names with at least 0.1 switch per request)."""
    rows_with = [row for rows in runs.values() for row in rows if "server_cpu_us" in row]
    if not rows_with:
        return
    names = sorted({n for row in rows_with for n, v in row["server_switches"].items() if v >= 0.1})
    print("\nThe server's CPU time and context switches per request (/proc/PID/task, summed over the perf_analyzer "
          "run, medians of the rounds)\n")
    print(f"| server | model | concurrency | protocol | CPU us | switches | {' | '.join(names)} |")
    print(f"| --- | --- | --- | --- | ---: | ---: | {' | '.join('---:' for _ in names)} |")
    for server in servers:
        for model in models:
            for c in concurrencies:
                for proto in protocols:
                    rows = [row for row in runs[(server, model, proto, c)] if "server_cpu_us" in row]
                    if not rows:
                        continue
                    total = statistics.median(sum(row["server_switches"].values()) for row in rows)
                    cells = [f"{statistics.median(row['server_switches'].get(n, 0) for row in rows):.1f}"
                             for n in names]
                    print(f"| {server} | {model} | {c} | {proto} | {median_of(rows, 'server_cpu_us'):.0f} | "
                          f"{total:.1f} | {' | '.join(cells)} |")


def main():
    opt_bin = REPO_ROOT / "bazel-out/k8-opt/bin"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default=os.environ.get("CONVOY_SERVER", str(opt_bin / "server/convoy_server")))
    p.add_argument("--baseline_server", default="", help="a second convoy_server binary measured in the same rounds")
    p.add_argument("--server_flag", action="append", default=[], help="extra flag of --server, repeatable")
    p.add_argument("--baseline_flag", action="append", default=[], help="extra flag of --baseline_server, repeatable")
    p.add_argument("--convoy", default=str(opt_bin / "server/tools/convoy"), help="the convoy CLI (plan alone)")
    p.add_argument("--plan_runs", type=int, default=200, help="timed runs of the plan alone")
    p.add_argument("--perf_analyzer", default=str(REPO_ROOT / ".venv/bin/perf_analyzer"))
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--protocols", default="grpc,http")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--taskset", default="0:1", help="SERVER_CORE:CLIENT_CORE (empty: no pinning)")
    p.add_argument("--server_threads", type=int, default=1, help="CONVOY_CPU_THREADS of the server")
    p.add_argument("--measurement_ms", type=int, default=3000)
    p.add_argument("--fifo", type=int, default=0,
                   help="run the servers, perf_analyzer and the plan alone at this SCHED_FIFO priority (needs root): "
                        "measures the edge on a machine shared with other work; only for servers that never spin")
    p.add_argument("--max_trials", type=int, default=6)
    p.add_argument("--stability", type=int, default=50)
    p.add_argument("--no_batching", action="store_true", help="serve the model without dynamic_batching")
    p.add_argument("--probes", action="store_true", help="also measure wire_588k and wire_tiny (see above)")
    p.add_argument("--models", default="", help="measure these models only (of resnet_classifier and the probes)")
    p.add_argument("--raw_client", action="store_true", help="also measure bench/raw_infer_client (see above)")
    p.add_argument("--raw_client_binary", default=str(opt_bin / "bench/raw_infer_client"))
    p.add_argument("--raw_requests", type=int, default=2000, help="timed requests of each raw client run")
    args = p.parse_args()
    args.server = os.path.abspath(args.server)
    args.server_core, args.client_core = (args.taskset.split(":") if args.taskset else (None, None))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    protocols = args.protocols.split(",")
    models = args.models.split(",") if args.models else [MODEL] + (list(PROBES) if args.probes else [])
    args.probes = args.probes or any(m in PROBES for m in models)
    binaries = {"new": (args.server, args.server_flag)}
    if args.baseline_server:
        binaries["baseline"] = (os.path.abspath(args.baseline_server), args.baseline_flag)
    servers = list(binaries)
    runs = {(s, m, proto, c): [] for s in servers for m in models for proto in protocols for c in concurrencies}
    raws = {(s, m, proto, each): [] for s in servers for m in models for proto in protocols for each in (False, True)}
    print(f"load average at the start: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp) / "repo"
        shutil.copytree(REPO_ROOT / "model_repo" / MODEL, repo / MODEL)
        if args.no_batching:
            config = repo / MODEL / "config.yaml"
            config.write_text(re.sub(r"(?ms)^dynamic_batching:.*?(?=^\S)", "", config.read_text()))
        if args.probes:
            write_probe_models(repo)
        args.inputs = write_inputs(models, tmp)
        plan_ms = {m: plan_time(args, repo, m, tmp) for m in models}
        print("plan alone: " + ", ".join(f"{m} {ms:.3f} ms" for m, ms in plan_ms.items()), flush=True)
        started = {}
        try:
            for s, (binary, flags) in binaries.items():
                started[s] = start_server(args, binary, flags, repo, pathlib.Path(tmp) / f"server_{s}.log")
            for r in range(args.rounds):
                for c in concurrencies:
                    for model in models:
                        for s in (servers if r % 2 == 0 else servers[::-1]):
                            for proto in (protocols if r % 2 == 0 else protocols[::-1]):
                                row = perf_analyzer(args, model, proto, started[s][1], c,
                                                    pathlib.Path(tmp) / f"{s}_{model}_{proto}_{c}_{r}.csv",
                                                    started[s][0].pid)
                                runs[(s, model, proto, c)].append(row)
                                print(f"round {r + 1} {s} {model} concurrency {c} {proto}: "
                                      f"{row['throughput']:.1f} infer/s, p50 {row['p50_ms']:.3f} ms, p99 "
                                      f"{row['p99_ms']:.2f} ms (load {load_average()})", flush=True)
                                if args.raw_client and c == 1:
                                    for each in (False, True):
                                        raw = raw_client(args, model, proto, started[s][1], started[s][0].pid, each)
                                        raws[(s, model, proto, each)].append(raw)
                                        print(f"round {r + 1} {s} {model} {proto} raw client"
                                              f"{', serialized each' if each else ''}: p50 {raw['p50_us']:.1f} us, "
                                              f"client CPU {raw['client_cpu_us']:.1f} us, server CPU "
                                              f"{raw['server_cpu_us']:.1f} us, server switches "
                                              f"{raw['server_switches']:.1f} (load {load_average()})", flush=True)
        finally:
            for proc, _ in started.values():
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=60)
    print_tables(args, runs, servers, models, protocols, concurrencies, plan_ms)
    if args.raw_client and 1 in concurrencies:
        print_raw_client(runs, raws, servers, models, protocols, plan_ms)


def print_raw_client(runs, raws, servers, models, protocols, plan_ms):
    """perf_analyzer's p50 beside the raw client's, each minus the plan alone, at concurrency 1 (medians)."""
    print("\nConcurrency 1, perf_analyzer against bench/raw_infer_client on the same server (ms; medians of the rounds; "
          "CPU in us and context switches per request)\n")
    print("| server | model | protocol | perf_analyzer p50 | over plan | raw p50 | over plan | raw, serialized each "
          "p50 | over plan | raw client CPU | raw server CPU | raw server switches |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for server in servers:
        for model in models:
            for proto in protocols:
                pa = median_of(runs[(server, model, proto, 1)], "p50_ms")
                raw, each = raws[(server, model, proto, False)], raws[(server, model, proto, True)]
                raw_p50, each_p50 = median_of(raw, "p50_us") / 1000, median_of(each, "p50_us") / 1000
                print(f"| {server} | {model} | {proto} | {pa:.3f} | {pa - plan_ms[model]:.3f} | {raw_p50:.3f} | "
                      f"**{raw_p50 - plan_ms[model]:.3f}** | {each_p50:.3f} | **{each_p50 - plan_ms[model]:.3f}** | "
                      f"{median_of(raw, 'client_cpu_us'):.0f} | {median_of(raw, 'server_cpu_us'):.0f} | "
                      f"{median_of(raw, 'server_switches'):.1f} |")


if __name__ == "__main__":
    sys.exit(main())
