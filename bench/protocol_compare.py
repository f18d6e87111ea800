#!/usr/bin/env python3
r"""HTTP/REST against gRPC under perf_analyzer on the sample ResNet classifier (CPU), one server serving both: the
server pinned to one core (CONVOY_CPU_THREADS=1), perf_analyzer to another, the two protocols measured back to back
at each concurrency (order alternating round by round), each row the median of its rounds, and the HTTP/gRPC
throughput ratio taken within each round (the machine's drift hits both protocols alike) and reported as the median
of the rounds. perf_analyzer -i http sends and receives tensors in the binary tensor data extension.

A second table splits each protocol's average request into perf_analyzer's phases (client send, network and the
server's send/receive, the server's queue, compute input, compute infer, compute output, client receive; averages in
microseconds, the server's from its statistics extension) and prints the edge cost: the client's p50 latency minus
the server's own compute-infer time (the plan running), i.e. what the protocol, the batcher and the copies add.

    .venv/bin/python bench/protocol_compare.py                         # concurrency 1 and 8, 3 rounds, cores 0:1
    .venv/bin/python bench/protocol_compare.py --concurrency=1,2,8 --rounds=5 --measurement_ms=3000

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


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cmd, core):
    return cmd if core is None else ["taskset", "-c", str(core)] + cmd


def start_server(args, repo, log):
    ports = {"grpc": free_port(), "http": free_port(), "metrics": free_port()}
    env = dict(os.environ, CONVOY_CPU_THREADS=str(args.server_threads))
    proc = subprocess.Popen(pinned([args.server, f"--model_repository={repo}", f"--grpc_port={ports['grpc']}",
                                    f"--http_port={ports['http']}", f"--metrics_port={ports['metrics']}",
                                    "--device=cpu"], args.server_core),
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


def perf_analyzer(args, protocol, port, concurrency, out_csv):
    venv = pathlib.Path(args.perf_analyzer).absolute().parent.parent
    site = next((venv / "lib").glob("python3*/site-packages"))
    env = dict(os.environ, LD_LIBRARY_PATH=f"{site / 'nvidia' / 'cuda_runtime' / 'lib'}:"
                                          f"{os.environ.get('LD_LIBRARY_PATH', '')}")
    cmd = pinned([args.perf_analyzer, "-m", MODEL, "-i", protocol, "-u", f"127.0.0.1:{port}", "--concurrency-range",
                  f"{concurrency}:{concurrency}", "--measurement-interval", str(args.measurement_ms),
                  "--max-trials", str(args.max_trials), "--stability-percentage", str(args.stability),
                  "-f", str(out_csv)], args.client_core)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    if not out_csv.exists():
        raise RuntimeError(f"perf_analyzer -i {protocol} failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    with open(out_csv, newline="") as f:
        row = next(csv.DictReader(f))
    result = {"throughput": float(row["Inferences/Second"]), "p50_ms": float(row["p50 latency"]) / 1000,
              "p99_ms": float(row["p99 latency"]) / 1000}
    for key, column in PHASES:
        result[key] = float(row.get(column) or "nan") / 1000
    result["edge_ms"] = result["p50_ms"] - result["infer_ms"]
    return result


# perf_analyzer's CSV columns of one request's phases (average microseconds), as (key, column).
PHASES = [("client_send_ms", "Client Send"), ("network_ms", "Network+Server Send/Recv"),
          ("queue_ms", "Server Queue"), ("input_ms", "Server Compute Input"), ("infer_ms", "Server Compute Infer"),
          ("output_ms", "Server Compute Output"), ("client_recv_ms", "Client Recv")]


def cpu_name():
    out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    match = re.search(r"Model name:\s*(.+)", out)
    return match.group(1).strip() if match else "unknown CPU"


def main():
    opt_bin = REPO_ROOT / "bazel-out/k8-opt/bin"
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default=os.environ.get("CONVOY_SERVER", str(opt_bin / "server/convoy_server")))
    p.add_argument("--perf_analyzer", default=str(REPO_ROOT / ".venv/bin/perf_analyzer"))
    p.add_argument("--concurrency", default="1,8")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--taskset", default="0:1", help="SERVER_CORE:CLIENT_CORE (empty: no pinning)")
    p.add_argument("--server_threads", type=int, default=1, help="CONVOY_CPU_THREADS of the server")
    p.add_argument("--measurement_ms", type=int, default=3000)
    p.add_argument("--max_trials", type=int, default=6)
    p.add_argument("--stability", type=int, default=50)
    p.add_argument("--no_batching", action="store_true", help="serve the model without dynamic_batching")
    args = p.parse_args()
    args.server = os.path.abspath(args.server)
    args.server_core, args.client_core = (args.taskset.split(":") if args.taskset else (None, None))
    concurrencies = [int(c) for c in args.concurrency.split(",")]
    protocols = ["grpc", "http"]
    runs = {(proto, c): [] for proto in protocols for c in concurrencies}
    with tempfile.TemporaryDirectory() as tmp:
        repo = pathlib.Path(tmp) / "repo"
        shutil.copytree(REPO_ROOT / "model_repo" / MODEL, repo / MODEL)
        if args.no_batching:
            config = repo / MODEL / "config.yaml"
            config.write_text(re.sub(r"(?ms)^dynamic_batching:.*?(?=^\S)", "", config.read_text()))
        server, ports = start_server(args, repo, pathlib.Path(tmp) / "server.log")
        try:
            for r in range(args.rounds):
                for c in concurrencies:
                    for proto in (protocols if r % 2 == 0 else protocols[::-1]):
                        row = perf_analyzer(args, proto, ports[proto], c, pathlib.Path(tmp) / f"{proto}_{c}_{r}.csv")
                        runs[(proto, c)].append(row)
                        print(f"round {r + 1} concurrency {c} {proto}: {row['throughput']:.1f} infer/s, "
                              f"p50 {row['p50_ms']:.2f} ms, p99 {row['p99_ms']:.2f} ms", flush=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)
    print(f"\n{cpu_name()}, server on core {args.server_core} with {args.server_threads} compute thread(s), "
          f"perf_analyzer on core {args.client_core}, {args.rounds} rounds, medians"
          f"{', batching off' if args.no_batching else ', batching as in config.yaml'}\n")
    print("| concurrency | protocol | infer/s | p50 ms | p99 ms | HTTP / gRPC throughput (median of rounds) |")
    print("| --- | --- | --- | --- | --- | --- |")
    for c in concurrencies:
        ratios = [h["throughput"] / g["throughput"] for g, h in zip(runs[("grpc", c)], runs[("http", c)])]
        for proto in protocols:
            rows = runs[(proto, c)]
            med = {k: statistics.median(row[k] for row in rows) for k in ("throughput", "p50_ms", "p99_ms")}
            ratio = f"{statistics.median(ratios):.3f} (rounds: {', '.join(f'{x:.3f}' for x in ratios)})" \
                if proto == "http" else ""
            print(f"| {c} | {proto} | {med['throughput']:.1f} | {med['p50_ms']:.2f} | {med['p99_ms']:.2f} | {ratio} |")
    print("\nPhases of a request, ms (averages over the measurement, medians of the rounds); edge = client p50 minus "
          "the server's compute infer\n")
    print("| concurrency | protocol | client send | network + server send/recv | server queue | compute input | "
          "compute infer | compute output | client recv | p50 | **edge** |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for c in concurrencies:
        for proto in protocols:
            rows = runs[(proto, c)]
            med = {k: statistics.median(row[k] for row in rows) for k, _ in PHASES + [("p50_ms", ""), ("edge_ms", "")]}
            cells = " | ".join(f"{med[k]:.3f}" for k, _ in PHASES)
            print(f"| {c} | {proto} | {cells} | {med['p50_ms']:.3f} | **{med['edge_ms']:.3f}** |")


if __name__ == "__main__":
    sys.exit(main())
