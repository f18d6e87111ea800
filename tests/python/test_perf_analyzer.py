"""perf_analyzer (the one bundled with tritonclient 2.41.1 in .venv) against a real server on simple_cnn over gRPC
and over HTTP/REST (`-i http`, binary tensor data): concurrency 1 and 4 with 2 s measurement windows (stability bound loosened to 100 %: a smoke test on a shared
machine, not a benchmark) must exit 0 and report throughput > 0 at both levels in its CSV.
All traffic goes to 127.0.0.1; perf_analyzer stops by itself (bounded windows and trials).
"""
import csv
import os
import pathlib
import subprocess
import sys

import pytest

from conftest import REPO_ROOT, metric, started_server, stop_and_check


def perf_analyzer_command():
    """The bundled perf_analyzer and the environment it needs (libcudart.so.12 from nvidia-cuda-runtime-cu12)."""
    venv = pathlib.Path(sys.prefix)
    binary = venv / "bin" / "perf_analyzer"
    if not binary.exists():
        binary = REPO_ROOT / ".venv" / "bin" / "perf_analyzer"
    if not binary.exists():
        pytest.fail("perf_analyzer not found in the virtualenv: run tools/setup.sh (tritonclient[grpc]==2.41.1)",
                    pytrace=False)
    site = next((venv / "lib").glob("python3*/site-packages"), None) or next(
        (REPO_ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    cudart = site / "nvidia" / "cuda_runtime" / "lib"
    env = dict(os.environ)
    env["LD_LIBRARY_PATH"] = f"{cudart}:{env.get('LD_LIBRARY_PATH', '')}"
    return str(binary), env


def run_perf_analyzer(server, model, out_csv, *extra, timeout=240, protocol="grpc"):
    binary, env = perf_analyzer_command()
    url = server.url if protocol == "grpc" else server.http_url
    args = [binary, "-m", model, "-i", protocol, "-u", url, "-f", str(out_csv), "--measurement-interval",
            "2000", "--max-trials", "8", "--stability-percentage", "100", *extra]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout, env=env)
    return proc


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_perf_analyzer_concurrency_sweep(tmp_path_factory, protocol):
    server = started_server(tmp_path_factory, ["simple_cnn"], name="perf")
    try:
        before = server.scrape()
        out = tmp_path_factory.mktemp("pa") / "simple_cnn.csv"
        proc = run_perf_analyzer(server, "simple_cnn", out, "--concurrency-range", "1:4:3", protocol=protocol)
        assert proc.returncode == 0, f"perf_analyzer exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr}"
        rows = read_csv(out)
        by_concurrency = {int(r["Concurrency"]): r for r in rows}
        assert set(by_concurrency) == {1, 4}, rows
        for c, row in by_concurrency.items():
            assert float(row["Inferences/Second"]) > 0, (c, row)
            assert float(row["p99 latency"]) >= float(row["p50 latency"]) > 0, (c, row)
        assert "Throughput" in proc.stdout
        after = server.scrape()
        served = (metric(after, "nv_inference_request_success", model="simple_cnn")
                  - metric(before, "nv_inference_request_success", model="simple_cnn"))
        assert served > 0
        assert metric(after, "nv_inference_request_failure", model="simple_cnn", reason="OTHER") == 0
    finally:
        stop_and_check(server)
