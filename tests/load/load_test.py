#!/usr/bin/env python3
"""Load tests against convoy_server on loopback, each bounded in time, printing its figures (and one JSON line):

  overload   measure the capacity of a compute-heavy CNN (closed loop), then offer 10x that rate open-loop for 30 s
             to a model with max_queue_size 32: every accepted request must be answered correctly, every refusal
             must be UNAVAILABLE within a few ms, the queue bounded by 32, the server's memory bounded. The refusal
             latency bound is checked on a probe process (one request every 20 ms on its own channel); the sending
             process's own latencies are printed too (they include its interpreter's queueing).
  soak       1M (--requests) batch-1 requests on simple_cnn from closed-loop clients: zero errors, every answer
             correct, resident memory growth after warm-up (the first 10%) under 10 MB.
  reload     a model reloaded to a new version ten times (explicit mode, RepositoryModelLoad) while clients send at
             full speed: zero failed requests, every answer equal to the answer of exactly the version it names.
  shutdown   SIGTERM with hundreds of requests in flight: every request accepted before the signal answered
             correctly, requests sent once readiness went false refused UNAVAILABLE, exit 0 within
             --exit_timeout_seconds.

    tests/load/load_test.py overload [--server BINARY] [--seconds 30] [--factor 10]
    tests/load/load_test.py soak --requests 1000000
    tests/load/load_test.py reload
    tests/load/load_test.py shutdown
    tests/load/load_test.py all --server bazel-bin/server/convoy_server     # overload, reload, shutdown

The server binary is --server, else $CONVOY_SERVER, else the Bazel build (as the pytest suite finds it). Under a
sanitizer build (--sanitized) the server's log is also checked for ASan/UBSan/TSan reports. Figures and the
commands that produced them are in docs/reliability.md. Exit status 0 when every check held.

Correctness: each scenario sends a fixed set of random inputs whose onnxruntime outputs are computed first; an
answer must match its input's reference within 1e-4 relative error (max |diff| / max |ref|: FP32 kernels against
onnxruntime's, a few roundings per layer).
"""
import argparse
import json
import multiprocessing
import os
import pathlib
import re
import shutil
import signal
import sys
import tempfile
import threading
import time

import grpc
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from tritonclient.grpc import service_pb2, service_pb2_grpc

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "python"))
from conftest import ConvoyServer, make_repository, metric, relative_error, simple_cnn_as_onnx  # noqa: E402

RNG = np.random.default_rng()
TOLERANCE = 1e-4
SANITIZER_MARKERS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                     "runtime error:", "ERROR: ThreadSanitizer")


# ----------------------------------------------------------------------------------------------------------------
# Models


def heavy_cnn(path, rng):
    """x [3,32,32] -> 5 convs up to 64 channels at 32x32 (~0.27 GFLOP per image) -> GAP -> Gemm 10."""
    chans = [3, 32, 64, 64, 64, 64]
    init, nodes, prev = {}, [], "x"
    for i in range(5):
        init[f"w{i}"] = (rng.standard_normal((chans[i + 1], chans[i], 3, 3)) / np.sqrt(9 * chans[i])).astype(np.float32)
        init[f"b{i}"] = rng.uniform(-0.1, 0.1, chans[i + 1]).astype(np.float32)
        nodes += [helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"c{i}"], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        prev = f"r{i}"
    init["fc"] = rng.uniform(-0.3, 0.3, (10, 64)).astype(np.float32)
    init["fcb"] = rng.uniform(-0.1, 0.1, 10).astype(np.float32)
    nodes += [helper.make_node("GlobalAveragePool", [prev], ["gap"]), helper.make_node("Flatten", ["gap"], ["f"]),
              helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1)]
    save_onnx(path, nodes, init)


def small_cnn(path, rng):
    """x [3,32,32] -> Conv 3x3 8 -> Relu -> GAP -> Gemm 10: fast, so reloads race many requests."""
    init = {"w": rng.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32),
            "b": rng.uniform(-0.2, 0.2, 8).astype(np.float32),
            "fc": rng.uniform(-1, 1, (10, 8)).astype(np.float32), "fcb": rng.uniform(-0.5, 0.5, 10).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("GlobalAveragePool", ["r"], ["gap"]), helper.make_node("Flatten", ["gap"], ["f"]),
             helper.make_node("Gemm", ["f", "fc", "fcb"], ["logits"], transB=1)]
    save_onnx(path, nodes, init)


def save_onnx(path, nodes, init):
    graph = helper.make_graph(nodes, "load", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in init.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def write_model(repo, name, build, max_batch, queue, versions=1, preferred=None):
    for v in range(1, versions + 1):
        build(repo / name / str(v) / "model.onnx", RNG)
    preferred = preferred or [max_batch]
    (repo / name / "config.yaml").write_text(f"""name: {name}
format: onnx
max_batch_size: {max_batch}
inputs:
  - name: x
    datatype: FP32
    dims: [3, 32, 32]
outputs:
  - name: logits
    datatype: FP32
    dims: [10]
dynamic_batching:
  preferred_batch_size: [{', '.join(map(str, preferred))}]
  max_queue_delay_microseconds: 1000
  default_queue_policy:
    max_queue_size: {queue}
instance_group:
  - count: 1
    kind: cpu
""")


class References:
    """K fixed random inputs (batch 1) of a model and their onnxruntime outputs."""

    def __init__(self, onnx_path, k=32, input_name="x", inputs=None):
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = 1
        session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        self.inputs = inputs or [RNG.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32) for _ in range(k)]
        self.outputs = [session.run(None, {input_name: x})[0] for x in self.inputs]
        self.input_name = input_name

    def request(self, model, i):
        req = service_pb2.ModelInferRequest(model_name=model, id=str(i % len(self.inputs)))
        t = req.inputs.add()
        t.name, t.datatype = self.input_name, "FP32"
        t.shape.extend([1, 3, 32, 32])
        req.raw_input_contents.append(self.inputs[i % len(self.inputs)].tobytes())
        return req

    def error(self, reply):
        got = np.frombuffer(reply.raw_output_contents[0], np.float32).reshape(1, -1)
        return relative_error(got, self.outputs[int(reply.id)])


# ----------------------------------------------------------------------------------------------------------------
# Measuring


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


class Sampler:
    """Samples the server's RSS and a model's queue length (the pending-request gauge) every `period` seconds."""

    def __init__(self, server, model, period=0.05):
        self.server, self.model, self.period = server, model, period
        self.rss, self.queue = [], []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self):
        while not self._stop.is_set():
            try:
                self.rss.append((time.monotonic(), rss_mb(self.server.proc.pid)))
                pending = metric(self.server.scrape(), "nv_inference_pending_request_count", model=self.model)
                self.queue.append(pending)
            except (OSError, ValueError):
                pass
            self._stop.wait(self.period)


def percentiles(values, ps=(50, 99, 100)):
    if not values:
        return {f"p{p}": None for p in ps}
    arr = np.asarray(values) * 1000.0
    return {f"p{p}": round(float(np.percentile(arr, p)), 2) for p in ps}


class Outcomes:
    """Thread-safe tally of request outcomes with latencies."""

    def __init__(self, refs, refusal="queue"):
        self.refs, self.refusal = refs, refusal
        self.lock = threading.Lock()
        self.ok_latency, self.refused_latency = [], []
        self.wrong, self.other = [], []

    def record(self, future, sent_at):
        latency = time.monotonic() - sent_at
        try:
            reply = future.result()
        except grpc.RpcError as e:
            with self.lock:
                if e.code() == grpc.StatusCode.UNAVAILABLE:
                    self.refused_latency.append(latency)
                    if self.refusal not in e.details():
                        self.other.append(f"UNAVAILABLE without '{self.refusal}': {e.details()}")
                else:
                    self.other.append(f"{e.code()}: {e.details()}")
            return
        err = self.refs.error(reply)
        with self.lock:
            self.ok_latency.append(latency)
            if not err <= TOLERANCE:
                self.wrong.append(err)


def closed_loop(stub, refs, model, concurrency, seconds=None, requests=None, on_reply=None, stop=None):
    """`concurrency` requests always in flight until `seconds` pass, `requests` complete or `stop` is set; returns
    (completed, elapsed, errors) once every request sent was answered. on_reply(reply) sees every answer."""
    lock = threading.Lock()
    state = {"sent": 0, "done": 0, "errors": []}
    finished = threading.Event()
    start = time.monotonic()

    def over():
        return ((requests is not None and state["sent"] >= requests) or
                (seconds is not None and time.monotonic() - start >= seconds) or (stop is not None and stop.is_set()))

    def send():
        with lock:
            if finished.is_set() or over():
                if state["done"] == state["sent"]:
                    finished.set()
                return
            i = state["sent"]
            state["sent"] += 1
        future = stub.ModelInfer.future(refs.request(model, i), timeout=120)
        future.add_done_callback(done)

    def done(future):
        try:
            reply = future.result()
            if on_reply is not None:
                on_reply(reply)
        except grpc.RpcError as e:
            with lock:
                state["errors"].append(f"{e.code()}: {e.details()}")
        with lock:
            state["done"] += 1
        send()
        with lock:
            if state["done"] == state["sent"] and over():
                finished.set()

    for _ in range(concurrency):
        send()
    finished.wait()
    return state["done"], time.monotonic() - start, state["errors"]


def refusal_probe(url, request_bytes, seconds, period, results):
    """Runs in a process of its own during the overload: one synchronous ModelInfer every `period` seconds, so its
    latencies are the server's (plus loopback and scheduling), not the queueing inside the sending process, whose
    single Python interpreter serializes hundreds of requests a second and runs their callbacks under one lock.
    Each ModelInfer is followed by a ServerLive, the control: a call that touches no model, so its latency is what
    the machine's scheduling adds to any call at that moment.
    Puts ([refusal seconds], [(accepted seconds, reply bytes)], [other errors], [ServerLive seconds]) on `results`."""
    channel = grpc.insecure_channel(url)
    infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer")  # bytes in, bytes out
    live = channel.unary_unary("/inference.GRPCInferenceService/ServerLive")
    live_request = service_pb2.ServerLiveRequest().SerializeToString()
    refused, accepted, other, live_latency = [], [], [], []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        sent_at = time.monotonic()
        try:
            live(live_request, timeout=60)
            live_latency.append(time.monotonic() - sent_at)
        except grpc.RpcError as e:
            other.append(f"ServerLive {e.code()}: {e.details()}")
        sent_at = time.monotonic()
        try:
            reply = infer(request_bytes, timeout=60)
            accepted.append((time.monotonic() - sent_at, reply))
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.UNAVAILABLE:
                refused.append(time.monotonic() - sent_at)
            else:
                other.append(f"{e.code()}: {e.details()}")
        time.sleep(max(0.0, period - (time.monotonic() - sent_at)))
    channel.close()
    results.put((refused, accepted, other, live_latency))


def start_server(repo, log, binary, flags=(), env=None):
    server = ConvoyServer(repo, log, flags=flags, binary=binary, env=env)
    server.start(wait_for="liveness", timeout=600)
    return server


# A frame of the sanitizer runtime or the standard library (by its file, or by its function where it has no file).
RUNTIME_FILE = re.compile(r"libsanitizer|libtsan|/usr/include/c\+\+/")
RUNTIME_FUNCTION = re.compile(r"(void )?(std::|__gnu_cxx::|operator (new|delete)|(mem(move|cpy|set)|free|malloc|"
                              r"calloc|realloc)\b)")
# A frame of the prebuilt libraries that hand calls between threads: gRPC (its libraries, upb, and the gRPC++
# header code compiled into the server), protobuf (serializing into gRPC's buffers) and Debian's Abseil.
LIBRARY_FRAME = re.compile(r"grpc::|grpc_|gpr_|google::protobuf::|absl::|/usr/include/(grpcpp|grpc|google|absl)/|"
                           r"\((libgrpc|libgpr|libupb|libprotobuf|libabsl_)")
# What starts an access stack of a TSan report, and what ends the access stacks (memory and thread descriptions).
TSAN_ACCESS = re.compile(r"^\s+(Previous )?(Atomic )?(read|write|Read|Write) of size")
TSAN_CONTEXT = re.compile(r"^\s+(Location is|Thread T\d+|Mutex M\d+|Main thread)")


def tsan_report_is_grpc_internal(block):
    """Whether every access of a ThreadSanitizer report was made by the prebuilt libraries' code (LIBRARY_FRAME).

    Debian's gRPC, protobuf and Abseil are prebuilt without TSan: gRPC's completion queues and locks hand calls
    between threads in code TSan cannot see, so gRPC's header code compiled into the server (call op sets,
    interceptor state, callback tags, byte buffers), protobuf serializing a response into gRPC's buffer and gRPC's
    send of it read as racing, also where Convoy's code called the API that made the access (reactor->Finish on a
    batcher thread, Server::Shutdown). The code that made an access is the first frame of its stack outside the
    sanitizer runtime and the standard library; a report counts as library-internal when that frame is a library's
    in every access stack. A report where Convoy's code made an access, or with a stack TSan could not restore,
    counts against the run."""
    stacks, current = [], None
    for line in block.splitlines():
        if TSAN_CONTEXT.match(line):
            break
        if TSAN_ACCESS.match(line):
            current = []
            stacks.append(current)
        elif current is not None and re.match(r"^\s+#\d+ ", line):
            current.append(line)
    if not stacks:
        return False
    for frames in stacks:
        maker = next((f for f in frames if not RUNTIME_FILE.search(f)
                      and not RUNTIME_FUNCTION.match(f.split(None, 1)[1])), None)
        if maker is None or not LIBRARY_FRAME.search(maker):
            return False
    return True


def sanitizer_checks(server, checks, figures):
    """Adds the sanitizer verdict: no ASan/UBSan report, and no TSan report but those whose every access gRPC's own
    code made (tsan_report_is_grpc_internal), which are counted and shown, not failed. Under TSan run the server
    with TSAN_OPTIONS=halt_on_error=0:exitcode=0:history_size=7 (docs/reliability.md): every report is then read,
    and stacks are restored (a report with an unrestored stack fails the check)."""
    text = server.log_path.read_text(errors="replace") if server.log_path.exists() else ""
    blocks = [b for b in text.split("==================") if "WARNING: ThreadSanitizer" in b]
    grpc_internal = [b for b in blocks if tsan_report_is_grpc_internal(b)]
    project = [b for b in blocks if not tsan_report_is_grpc_internal(b)]
    others = [line for line in text.splitlines()
              if any(m in line for m in SANITIZER_MARKERS) and "WARNING: ThreadSanitizer" not in line]
    summaries = [next((l for l in b.splitlines() if l.startswith("SUMMARY")), "?") for b in grpc_internal]
    checks[f"no ASan/UBSan report in the server log ({len(others)})"] = not others
    checks[f"no TSan report of an access by Convoy's code or with a stack TSan could not restore ({len(project)})"] = \
        not project
    figures["sanitizer_reports"] = (others + [b.strip().splitlines()[0] + " ..." for b in project])[:5]
    figures["tsan_reports_within_grpc"] = len(grpc_internal)
    figures["tsan_grpc_functions"] = sorted({s.split(" in ", 1)[-1][:90] for s in summaries})[:8]


def finish(server, name, figures, checks, sanitized):
    """Stops the server, adds the exit-code and sanitizer checks, prints the figures; returns whether all held."""
    rc = server.stop(timeout=120)
    checks[f"server exited 0 after SIGTERM (rc {rc})"] = rc == 0
    if sanitized:
        sanitizer_checks(server, checks, figures)
    print(f"\n== {name}")
    for k, v in figures.items():
        print(f"  {k}: {v}")
    for k, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {k}")
    print("JSON " + json.dumps({"scenario": name, "figures": figures, "checks": checks}))
    print(f"  server log: {server.log_path}")
    return all(checks.values())


# ----------------------------------------------------------------------------------------------------------------
# Scenarios


def overload(args, work):
    repo = work / "repo_overload"
    write_model(repo, "heavy", heavy_cnn, max_batch=8, queue=32)
    refs = References(repo / "heavy" / "1" / "model.onnx")
    server = start_server(repo, work / "overload.log", args.server, env=args.env)
    channel = server.channel()
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    closed_loop(stub, refs, "heavy", concurrency=16, seconds=args.warmup)  # warm-up
    done, elapsed, errors = closed_loop(stub, refs, "heavy", concurrency=16, seconds=args.capacity_seconds)
    capacity = done / elapsed
    rate = args.factor * capacity
    outcomes = Outcomes(refs)
    rss_before = rss_mb(server.proc.pid)
    spawn = multiprocessing.get_context("spawn")  # no fork of a process that has gRPC threads
    probe_results = spawn.Queue()
    probe = spawn.Process(target=refusal_probe, daemon=True,
                          args=(server.url, refs.request("heavy", 0).SerializeToString(), args.seconds, 0.02,
                                probe_results))
    probe.start()
    # The requests go as prepared bytes (serialized once per reference input), so the one sending interpreter
    # spends its time sending, not building protobuf messages: that is what lets it offer 10x a fast server's rate.
    payloads = [refs.request("heavy", i).SerializeToString() for i in range(len(refs.inputs))]
    infer = channel.unary_unary("/inference.GRPCInferenceService/ModelInfer",
                                response_deserializer=service_pb2.ModelInferResponse.FromString)
    with Sampler(server, "heavy") as sampler:
        start = time.monotonic()
        sent = 0
        while True:
            now = time.monotonic()
            if now - start >= args.seconds:
                break
            due = int((now - start) * rate)
            while sent < due:
                sent_at = time.monotonic()
                future = infer.future(payloads[sent % len(payloads)], timeout=args.seconds + 60)
                future.add_done_callback(lambda f, t=sent_at: outcomes.record(f, t))
                sent += 1
            time.sleep(0.0005)
        offered_seconds = time.monotonic() - start
        deadline = time.monotonic() + 120
        while len(outcomes.ok_latency) + len(outcomes.refused_latency) + len(outcomes.other) < sent and \
                time.monotonic() < deadline:
            time.sleep(0.05)
    probe_refused, probe_accepted, probe_other, probe_live = probe_results.get(timeout=180)
    probe.join(timeout=60)
    for _, reply in probe_accepted:
        err = refs.error(service_pb2.ModelInferResponse.FromString(reply))
        if not err <= TOLERANCE:
            outcomes.wrong.append(err)
    rss = [r for _, r in sampler.rss]
    figures = {
        "capacity_req_per_s": round(capacity, 1), "capacity_errors": len(errors),
        "offered_req_per_s": round(sent / offered_seconds, 1), "target_req_per_s": round(rate, 1),
        "seconds": round(offered_seconds, 1), "sent": sent, "accepted": len(outcomes.ok_latency),
        "refused_unavailable": len(outcomes.refused_latency), "other_errors": len(outcomes.other),
        "wrong_answers": len(outcomes.wrong),
        "accepted_throughput_req_per_s": round(len(outcomes.ok_latency) / offered_seconds, 1),
        "sender_refusal_latency_ms": percentiles(outcomes.refused_latency),
        "sender_accepted_latency_ms": percentiles(outcomes.ok_latency),
        "probe_refused": len(probe_refused), "probe_accepted": len(probe_accepted), "probe_other_errors": probe_other[:3],
        "probe_refusal_latency_ms": percentiles(probe_refused),
        "probe_server_live_latency_ms (control)": percentiles(probe_live),
        "queue_max": max(sampler.queue, default=None), "queue_limit": 32,
        "rss_mb_before": round(rss_before, 1), "rss_mb_max": round(max(rss, default=float("nan")), 1),
        "rss_mb_end": round(rss[-1], 1) if rss else None,
        "other_error_examples": outcomes.other[:3],
    }
    checks = {
        "no errors while measuring capacity": not errors,
        "every request answered": len(outcomes.ok_latency) + len(outcomes.refused_latency) + len(outcomes.other) == sent,
        "offered at least 80% of the target rate": sent / offered_seconds >= 0.8 * rate,
        "some requests refused (the overload was real)": len(outcomes.refused_latency) > 0,
        "no failure other than UNAVAILABLE (queue full)": not outcomes.other and not probe_other,
        "every accepted answer correct": not outcomes.wrong and len(outcomes.ok_latency) > 0,
        f"refusals answered within {args.refusal_ms} ms (p99, the probe's)":
            bool(probe_refused) and percentiles(probe_refused)["p99"] <= args.refusal_ms,
        "queue bounded by max_queue_size": max(sampler.queue, default=0) <= 32,
        f"RSS stayed within {args.memory_mb} MB of its start": max(rss, default=0) - rss_before <= args.memory_mb,
    }
    channel.close()
    return finish(server, "overload", figures, checks, args.sanitized)


def soak(args, work):
    repo = make_repository(work / "repo_soak", ["simple_cnn"])
    refs = References(simple_cnn_as_onnx(repo, work), k=64, input_name="images")
    server = start_server(repo, work / "soak.log", args.server, env=args.env)
    channel = server.channel()
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    lock = threading.Lock()
    wrong = []
    marks = []  # (completed, seconds, rss MB)
    counter = {"n": 0}
    start = time.monotonic()
    step = max(args.requests // 20, 1)

    def on_reply(reply):
        err = refs.error(reply)
        with lock:
            counter["n"] += 1
            n = counter["n"]
            if not err <= TOLERANCE:
                wrong.append(err)
        if n % step == 0:
            marks.append((n, round(time.monotonic() - start, 1), round(rss_mb(server.proc.pid), 1)))
            print(f"  soak: {n} requests, {marks[-1][1]} s, RSS {marks[-1][2]} MB", flush=True)

    done, elapsed, errors = closed_loop(stub, refs, "simple_cnn", concurrency=args.concurrency,
                                        requests=args.requests, on_reply=on_reply)
    warm = [m for m in marks if m[0] >= args.requests // 10]
    growth = (marks[-1][2] - warm[0][2]) if warm else float("nan")
    figures = {"requests": done, "seconds": round(elapsed, 1), "req_per_s": round(done / elapsed, 1),
               "errors": len(errors), "wrong_answers": len(wrong), "rss_marks (requests, s, MB)": marks,
               "rss_growth_after_warmup_mb": round(growth, 1), "error_examples": errors[:3]}
    checks = {"every request answered": done == args.requests, "no errors": not errors,
              "every answer correct": not wrong,
              f"RSS growth after warm-up below {args.growth_mb} MB": growth < args.growth_mb}
    channel.close()
    return finish(server, "soak", figures, checks, args.sanitized)


def reload(args, work):
    repo = work / "repo_reload"
    write_model(repo, "reloaded", small_cnn, max_batch=8, queue=0, preferred=[4, 8])
    refs_by_version = {1: References(repo / "reloaded" / "1" / "model.onnx")}
    inputs = refs_by_version[1].inputs
    server = start_server(repo, work / "reload.log", args.server, env=args.env,
                          flags=["--model_control_mode=explicit", "--load_model=reloaded"])
    channel = server.channel()
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    lock = threading.Lock()
    tally = {"answers": {}, "wrong": [], "unknown_version": []}

    def on_reply(reply):
        version = int(reply.model_version)
        refs = refs_by_version.get(version)
        with lock:
            if refs is None:
                tally["unknown_version"].append(version)
                return
            tally["answers"][version] = tally["answers"].get(version, 0) + 1
            err = refs.error(reply)
            if not err <= TOLERANCE:
                # Which version's answer is it then? (a mix of versions would match none)
                got = np.frombuffer(reply.raw_output_contents[0], np.float32).reshape(1, -1)
                matches = [v for v, r in refs_by_version.items() if relative_error(got, r.outputs[int(reply.id)])
                           <= TOLERANCE]
                tally["wrong"].append((version, matches, err))

    stop = threading.Event()
    result = {}

    def clients():
        result["done"], result["elapsed"], result["errors"] = closed_loop(
            stub, refs_by_version[1], "reloaded", concurrency=args.concurrency, on_reply=on_reply, stop=stop)

    reload_times = []
    client_thread = threading.Thread(target=clients, daemon=True)
    client_thread.start()
    wait_until(lambda: sum(tally["answers"].values()) >= 50, "first answers", 120)
    for version in range(2, 2 + args.reloads):
        small_cnn(repo / "reloaded" / str(version) / "model.onnx", RNG)
        refs = References(repo / "reloaded" / str(version) / "model.onnx", inputs=inputs)
        with lock:
            refs_by_version[version] = refs
        t0 = time.monotonic()
        stub.RepositoryModelLoad(service_pb2.RepositoryModelLoadRequest(model_name="reloaded"), timeout=300)
        reload_times.append(round(time.monotonic() - t0, 2))
        # Requests flow between reloads: the next one waits for answers from the new version.
        wait_until(lambda: tally["answers"].get(version, 0) >= 200, f"answers from version {version}", 300)
    stop.set()
    client_thread.join(timeout=120)
    errors_before_stop = result.get("errors", ["the clients did not finish"])
    index = [(m.version, m.state) for m in stub.RepositoryIndex(service_pb2.RepositoryIndexRequest(), timeout=10).models]
    channel.close()
    figures = {"reloads": args.reloads, "seconds": round(result.get("elapsed", 0), 1),
               "req_per_s": round(result.get("done", 0) / max(result.get("elapsed", 1), 1e-9), 1),
               "answers_by_version": dict(sorted(tally["answers"].items())),
               "answers": sum(tally["answers"].values()), "failed_requests": len(errors_before_stop),
               "wrong_answers": len(tally["wrong"]), "reload_seconds": reload_times, "final_index": index,
               "error_examples": errors_before_stop[:3], "wrong_examples": tally["wrong"][:3]}
    checks = {"zero failed requests": not errors_before_stop,
              "every answer is exactly its version's": not tally["wrong"] and not tally["unknown_version"],
              "every version answered": all(tally["answers"].get(v, 0) > 0 for v in range(1, 2 + args.reloads)),
              "only the newest version is served at the end": index == [(str(1 + args.reloads), "READY")]}
    return finish(server, "reload", figures, checks, args.sanitized)


def wait_until(condition, what, timeout):
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.01)


def shutdown(args, work):
    repo = work / "repo_shutdown"
    write_model(repo, "heavy", heavy_cnn, max_batch=8, queue=0)
    refs = References(repo / "heavy" / "1" / "model.onnx")
    drain = args.exit_timeout
    server = start_server(repo, work / "shutdown.log", args.server, env=args.env,
                          flags=[f"--exit_timeout_seconds={drain}"])
    channel = server.channel()
    stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
    closed_loop(stub, refs, "heavy", concurrency=8, seconds=args.warmup)
    done_before = metric(server.scrape(), "nv_inference_request_success", model="heavy")
    n = args.in_flight
    accepted = Outcomes(refs, refusal="(no refusal expected)")
    futures = []
    for i in range(n):
        sent_at = time.monotonic()
        f = stub.ModelInfer.future(refs.request("heavy", i), timeout=drain + 60)
        f.add_done_callback(lambda f, t=sent_at: accepted.record(f, t))
        futures.append(f)

    def arrived():
        s = server.scrape()
        return (metric(s, "nv_inference_pending_request_count", model="heavy") +
                metric(s, "nv_inference_request_success", model="heavy") - done_before)

    wait_until(lambda: arrived() >= n - 8, "every request to reach the server (one batch may be running)", 120)
    queued_at_signal = metric(server.scrape(), "nv_inference_pending_request_count", model="heavy")
    signalled = time.monotonic()
    server.terminate()
    # The late requests go once the server has acted on the signal (readiness false), not merely once the signal
    # was sent: until its sigwait thread runs, the server has not yet heard of the shutdown and rightly queues them.
    def not_ready():
        try:
            return not stub.ServerReady(service_pb2.ServerReadyRequest(), timeout=10).ready
        except grpc.RpcError as e:  # a slow (sanitizer) build may be past its drain already: the call is cancelled
            return e.code() in (grpc.StatusCode.CANCELLED, grpc.StatusCode.UNAVAILABLE)

    wait_until(not_ready, "readiness false after SIGTERM", drain)
    not_ready_seconds = time.monotonic() - signalled
    late = Outcomes(refs, refusal="the server is shutting down")
    for i in range(20):  # on the open connection, after the server began shutting down
        sent_at = time.monotonic()
        f = stub.ModelInfer.future(refs.request("heavy", i), timeout=drain + 60)
        f.add_done_callback(lambda f, t=sent_at: late.record(f, t))
    rc = server.proc.wait(timeout=drain + 60)
    exit_seconds = time.monotonic() - signalled
    wait_until(lambda: len(accepted.ok_latency) + len(accepted.refused_latency) + len(accepted.other) == n,
               "every accepted request's answer", 60)
    channel.close()
    figures = {"in_flight_at_signal": n, "queued_at_signal": queued_at_signal,
               "not_ready_after_s": round(not_ready_seconds, 3), "exit_seconds": round(exit_seconds, 2),
               "drain_timeout_s": drain, "exit_code": rc, "accepted_ok": len(accepted.ok_latency),
               "accepted_failed": len(accepted.refused_latency) + len(accepted.other),
               "wrong_answers": len(accepted.wrong), "late_refused_unavailable": len(late.refused_latency),
               "late_ok": len(late.ok_latency), "late_other": late.other[:3]}
    checks = {"every accepted request answered correctly": len(accepted.ok_latency) == n and not accepted.wrong,
              "the drain had work (requests queued at SIGTERM)": queued_at_signal >= 8,
              f"exit within the drain timeout ({drain} s)": exit_seconds <= drain,
              "exit code 0": rc == 0,
              "requests after readiness went false refused UNAVAILABLE ('shutting down')":
                  len(late.refused_latency) == 20 and not late.other}
    if args.sanitized:
        sanitizer_checks(server, checks, figures)
    print("\n== shutdown")
    for k, v in figures.items():
        print(f"  {k}: {v}")
    for k, ok in checks.items():
        print(f"  [{'ok' if ok else 'FAILED'}] {k}")
    print("JSON " + json.dumps({"scenario": "shutdown", "figures": figures, "checks": checks}))
    print(f"  server log: {server.log_path}")
    return all(checks.values())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("scenario", choices=["overload", "soak", "reload", "shutdown", "all"])
    p.add_argument("--server", help="convoy_server binary (default: $CONVOY_SERVER or the Bazel build)")
    p.add_argument("--sanitized", action="store_true", help="the server is an ASan/UBSan/TSan build: check its log")
    p.add_argument("--threads", type=int, default=2, help="CONVOY_CPU_THREADS of the server")
    p.add_argument("--seconds", type=float, default=30.0, help="overload: seconds at the offered rate")
    p.add_argument("--factor", type=float, default=10.0, help="overload: offered rate / measured capacity")
    p.add_argument("--warmup", type=float, default=3.0)
    p.add_argument("--capacity_seconds", type=float, default=10.0)
    p.add_argument("--refusal_ms", type=float, default=20.0, help="overload: p99 bound of a refusal's latency")
    p.add_argument("--memory_mb", type=float, default=100.0, help="overload: RSS growth bound")
    p.add_argument("--requests", type=int, default=1_000_000, help="soak: requests")
    p.add_argument("--concurrency", type=int, default=8, help="soak, reload: requests in flight")
    p.add_argument("--growth_mb", type=float, default=10.0, help="soak: RSS growth bound after warm-up")
    p.add_argument("--reloads", type=int, default=10)
    p.add_argument("--in_flight", type=int, default=200, help="shutdown: requests in flight at SIGTERM")
    p.add_argument("--exit_timeout", type=int, default=60, help="shutdown: the server's --exit_timeout_seconds")
    p.add_argument("--keep", action="store_true", help="keep the work folder (repositories, server logs)")
    args = p.parse_args()
    if args.server:
        os.environ["CONVOY_SERVER"] = args.server
    args.server = None  # ConvoyServer finds $CONVOY_SERVER
    args.env = {"CONVOY_CPU_THREADS": str(args.threads)}
    work = pathlib.Path(tempfile.mkdtemp(prefix="convoy-load-"))
    print(f"work folder {work}; server {os.environ.get('CONVOY_SERVER', '(bazel build)')}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", flush=True)
    scenarios = {"overload": overload, "soak": soak, "reload": reload, "shutdown": shutdown}
    names = ["overload", "reload", "shutdown"] if args.scenario == "all" else [args.scenario]
    ok = True
    for name in names:
        ok = scenarios[name](args, work) and ok
    if not args.keep and ok:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nload_test {' '.join(names)}: {'PASSED' if ok else 'FAILED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
