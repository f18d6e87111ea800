"""bench/raw_infer_client (the minimal KServe v2 client bench/protocol_compare.py --raw_client sets beside
perf_analyzer) against a real server over both protocols: it reports its timings, and the requests it sent are the
ones the server counted (convoy_edge_requests_total); a response it does not expect, a model the server does not
serve and an input of the wrong size each end the run with exit status 1 and a message saying what was wrong."""
import re
import subprocess

import numpy as np
import pytest

from conftest import built_binary, metric, started_server, stop_and_check

RNG = np.random.default_rng()
LINE = re.compile(r"protocol (grpc|http) model simple_cnn requests (\d+) p50_us ([0-9.]+) p90_us ([0-9.]+) "
                  r"mean_us ([0-9.]+) infer_per_s ([0-9.]+) client_cpu_us ([0-9.]+) client_switches ([0-9.]+)")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = started_server(tmp_path_factory, ["simple_cnn"], name="raw_client")
    yield server
    stop_and_check(server)


@pytest.fixture(scope="module")
def image(tmp_path_factory):
    path = tmp_path_factory.mktemp("raw_client") / "images.raw"
    path.write_bytes(RNG.uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32).tobytes())
    return path


def run_client(server, image, protocol, *flags):
    address = server.url if protocol == "grpc" else server.http_url
    cmd = [built_binary("bench/raw_infer_client"), f"--protocol={protocol}", f"--address={address}",
           "--model=simple_cnn", f"--input={image}", "--shape=1,3,32,32", "--output=probabilities",
           "--output_bytes=40", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def edge_requests(server, protocol):
    return metric(server.scrape(), "convoy_edge_requests_total", model="simple_cnn", protocol=protocol)


@pytest.mark.parametrize("serialize_each", [False, True], ids=["serialized_once", "serialized_each"])
@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_reports_timings_of_requests_the_server_answered(server, image, protocol, serialize_each):
    before = edge_requests(server, protocol)
    out = run_client(server, image, protocol, "--requests=40", "--warmup=5",
                     f"--serialize_each_request={str(serialize_each).lower()}")
    assert out.returncode == 0, out.stderr
    match = LINE.fullmatch(out.stdout.strip())
    assert match, out.stdout
    assert match.group(1) == protocol and int(match.group(2)) == 40
    p50, p90, mean, rate = (float(match.group(i)) for i in (3, 4, 5, 6))
    assert 0 < p50 <= p90 and mean > 0 and rate > 0
    assert edge_requests(server, protocol) - before == 45  # warm-up and timed requests, each answered


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_refuses_what_it_does_not_expect(server, image, protocol, tmp_path):
    out = run_client(server, image, protocol, "--requests=3", "--warmup=0", "--output_bytes=44")
    assert out.returncode == 1
    assert (f"unexpected response: expected one {'raw' if protocol == 'grpc' else 'binary'} output of 44 bytes, "
            f"got {'[40]' if protocol == 'grpc' else '40'}") in out.stderr, out.stderr
    unknown = run_client(server, image, protocol, "--requests=3", "--warmup=0", "--model=nope")
    assert unknown.returncode == 1
    assert ("unknown model 'nope'" in unknown.stderr if protocol == "grpc" else "HTTP/1.1 404" in unknown.stderr), \
        unknown.stderr
    short = tmp_path / "short.raw"
    short.write_bytes(b"\0" * 100)
    wrong = run_client(server, short, protocol, "--requests=3")
    assert wrong.returncode == 1
    assert "--input: expected 12288 bytes for shape [1,3,32,32] FP32, got 100" in wrong.stderr, wrong.stderr
