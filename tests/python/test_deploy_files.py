"""Checks of the deployment files (deploy/, .dockerignore) and of the image's health probe.

The image is built and run by deploy/test_image.sh (docs/deploy.md); these checks read the files, quickly, on every
run: they parse; every port agrees with the server's flag defaults (read from server/main.cc); the probes
use the server's health service names; the Dockerfile's build stages run the README's setup script (build-only) and its runtime
stage installs the Debian package of every library the locally built binaries link; shutdown timing leaves the
server its drain time; the dashboard is generated from deploy/metrics.yaml and every PromQL query names only
metrics listed there; and the server really exports them (a live /metrics scrape).

Binaries come from bazel-out/k8-opt/bin or bazel-bin (tools/test.sh builds them first); CONVOY_BAZEL_BIN points
elsewhere, e.g. another output base.
"""

import json
import os
import pathlib
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent import futures

import pytest
import yaml

REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
DEPLOY = REPO_ROOT / "deploy"
sys.path.insert(0, str(DEPLOY / "grafana"))
sys.path.insert(0, str(DEPLOY))
import generate_dashboard  # noqa: E402  (deploy/grafana/generate_dashboard.py)
import validate_manifests  # noqa: E402  (deploy/validate_manifests.py)

# The server's health service names (server contract): "" and "liveness" = process, "readiness" = all models READY.
LIVENESS_SERVICES = {"", "liveness"}
READINESS_SERVICE = "readiness"


# ----------------------------------------------------------------------------------------------------------------
# Helpers

class _ComposeLoader(yaml.SafeLoader):
    """SafeLoader that also accepts Compose's merge tags (!reset, !override) on any node."""


def _compose_tag(loader, suffix, node):
    if isinstance(node, yaml.MappingNode):
        return loader.construct_mapping(node, deep=True)
    if isinstance(node, yaml.SequenceNode):
        return loader.construct_sequence(node, deep=True)
    return loader.construct_scalar(node)


_ComposeLoader.add_multi_constructor("!", _compose_tag)


def load_yaml_documents(path):
    return [d for d in yaml.load_all(path.read_text(), Loader=_ComposeLoader) if d is not None]


def load_yaml(path):
    docs = load_yaml_documents(path)
    assert len(docs) == 1, f"{path}: expected one YAML document, found {len(docs)}"
    return docs[0]


def k8s_object(path, kind, name=None):
    found = [d for d in load_yaml_documents(path) if d.get("kind") == kind and (name is None or
                                                                              d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{path}: expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def server_flag_defaults():
    """{flag: default text} from the ABSL_FLAG lines of server/main.cc (the one place the defaults live)."""
    text = (REPO_ROOT / "server" / "main.cc").read_text()
    flags = {}
    for m in re.finditer(r'ABSL_FLAG\(\s*[^,]+?,\s*(\w+)\s*,\s*("(?:[^"\\]|\\.)*"|[^,]+?)\s*,', text):
        flags[m.group(1)] = m.group(2).strip('"')
    assert "grpc_port" in flags and "metrics_port" in flags, f"no port flags found in server/main.cc: {flags}"
    return flags


def flag_values(args):
    """['--a=1', '--b', 'x'] -> {'a': '1', ...}; the last occurrence wins, as in absl."""
    values = {}
    for arg in args:
        if arg.startswith("--"):
            name, _, value = arg[2:].partition("=")
            values[name] = value if _ else "true"
    return values


def bazel_bin_candidates():
    """Where built binaries are looked for: $CONVOY_BAZEL_BIN, else the default (-c opt) output folder, else bazel-bin.

    bazel-bin follows the configuration of the LAST build in the tree (tools/test.sh ends with an asan pass, -c dbg,
    that builds only asan-tagged targets), so the opt folder under bazel-out comes first.
    """
    if os.environ.get("CONVOY_BAZEL_BIN"):
        return [pathlib.Path(os.environ["CONVOY_BAZEL_BIN"])]
    return [REPO_ROOT / "bazel-out" / "k8-opt" / "bin", REPO_ROOT / "bazel-bin"]


def built_binary(label_path):
    for folder in bazel_bin_candidates():
        if (folder / label_path).exists():
            return folder / label_path
    package, name = label_path.rsplit("/", 1)
    pytest.fail(f"{label_path} not found in {[str(f) for f in bazel_bin_candidates()]}: build it first "
                f"(bazel build //{package}:{name}; tools/test.sh does) or set CONVOY_BAZEL_BIN")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ----------------------------------------------------------------------------------------------------------------
# Dockerfile

class Dockerfile:
    """The instructions of deploy/Dockerfile, split into stages."""

    def __init__(self, path=DEPLOY / "Dockerfile"):
        text = re.sub(r"\\\n", " ", path.read_text())
        self.stages = []  # [(base, name, [(instruction, rest)])]
        self.args = {}
        for raw in text.splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            instruction, _, rest = line.partition(" ")
            instruction = instruction.upper()
            if instruction == "FROM":
                m = re.match(r"(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
                self.stages.append((self._expand(m.group(1)), m.group(2), []))
            elif self.stages:
                self.stages[-1][2].append((instruction, rest.strip()))
            elif instruction == "ARG" and "=" in rest:
                k, v = rest.split("=", 1)
                self.args[k.strip()] = v.strip()

    def _expand(self, s):
        return re.sub(r"\$\{(\w+)\}", lambda m: self.args.get(m.group(1), m.group(0)), s)

    def stage(self, name):
        """(the image the stage starts from at the root of its FROM chain, the instructions from there to it)."""
        names = {stage_name: (base, instructions) for base, stage_name, instructions in self.stages}
        if name not in names:
            raise AssertionError(f"deploy/Dockerfile has no stage named {name!r}")
        base, instructions = names[name]
        if base in names:
            root, earlier = self.stage(base)
            return root, earlier + instructions
        return base, instructions

    def names(self):
        return [stage_name for _, stage_name, _ in self.stages]

    def final(self):
        """The default target: (root image, name, instructions from the root image on)."""
        name = self.stages[-1][1]
        base, instructions = self.stage(name)
        return base, name, instructions

    @staticmethod
    def exec_form(rest):
        rest = re.sub(r"^(--\S+\s+)*", "", rest).strip()
        if rest.upper().startswith("CMD "):
            rest = rest[4:].strip()
        return json.loads(rest)

    def run_lines(self, name):
        return [rest for ins, rest in self.stage(name)[1] if ins == "RUN"]


def readme_setup_command():
    """The set-up script the README's "two commands" section names, which both commands run first
    (tools/setup.sh)."""
    readme = (REPO_ROOT / "README.md").read_text()
    section = re.search(r"## The two commands\n(.*?)\n## ", readme, re.S)
    assert section, "README.md has no '## The two commands' section"
    commands = re.search(r"```sh\n(.*?)```", section.group(1), re.S)
    assert commands, "README.md's '## The two commands' has no sh block"
    assert [line.split("#")[0].strip() for line in commands.group(1).strip().splitlines() if line.strip()] == \
        ["tools/run_server.sh", "tools/test.sh"], commands.group(1)
    named = re.search(r"`(tools/setup\.sh)` does the installing alone", section.group(1))
    assert named, "README.md's '## The two commands' no longer names the set-up script the commands run"
    for script in ("tools/run_server.sh", "tools/test.sh"):
        assert f"bash {named.group(1)}" in (REPO_ROOT / script).read_text(), f"{script} no longer runs {named.group(1)}"
    return named.group(1)


@pytest.mark.parametrize("stage", ["build", "build-cpu"])
def test_dockerfile_build_stage_runs_the_readme_setup_script(stage):
    docker = Dockerfile()
    base, instructions = docker.stage(stage)
    assert base == "debian:12", f"build stage must start from Debian 12 like the development machines, not {base}"
    setup = readme_setup_command()
    assert setup == "tools/setup.sh", f"README's first command changed to {setup!r}: update deploy/Dockerfile"
    runs = docker.run_lines(stage)
    setup_runs = [shlex.split(r) for r in runs
                  if shlex.split(r)[:1] in ([setup], [f"./{setup}"]) or shlex.split(r)[:2] == ["bash", setup]]
    assert setup_runs, f"build stage must RUN {setup}; RUN lines: {runs}"
    # The image build needs the build dependencies only: no test libraries, Python test tools or PyTorch.
    assert all("--build-only" in r for r in setup_runs), f"the build stage must run {setup} --build-only"
    copied = [rest for ins, rest in instructions if ins == "COPY"]
    assert any(setup in c for c in copied), "build stage must COPY the setup script before running it"
    bazel = [r for r in runs if "bazel build" in r]
    assert bazel and "//server:convoy_server" in bazel[0] and "//deploy:convoy_health_probe" in bazel[0], \
        "build stage must bazel-build //server:convoy_server and //deploy:convoy_health_probe"
    cuda_copies = [c for c in copied if c.startswith("--from=cuda")]
    if stage == "build":
        assert cuda_copies and all("/usr/local/cuda" in c for c in cuda_copies), \
            "the CUDA toolkit must land in /usr/local/cuda, where bazel/cuda_configure.bzl looks"
    else:
        assert not cuda_copies, "the CPU-only build stage must not hold the CUDA toolkit"


def test_setup_build_only_leaves_out_the_test_toolchain():
    listed = subprocess.run(["bash", "-c", 'source <(sed -n "1,/^# ---- end of build-only mode/p" tools/setup.sh '
                             '| sed "s/^set -euo pipefail//") --build-only; printf "%s\\n" "${debian_packages[@]}"'],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert "bazel-bootstrap" in listed and "libgrpc++-dev" in listed, listed
    for test_only in ["python3-torch", "python3-torchvision", "libgtest-dev", "python3-venv", "prometheus",
                      "docker.io"]:
        assert test_only not in listed, f"setup.sh --build-only installs {test_only}"
    text = (REPO_ROOT / "tools" / "setup.sh").read_text()
    venv_call = re.search(r"^\s*install_python_tools\s*$", text, re.M)
    assert venv_call, "setup.sh no longer calls install_python_tools"
    assert text.index('if [ "$build_only" = 1 ]; then  # build-only') < venv_call.start(), \
        "setup.sh --build-only must stop before the virtualenv"


def test_setup_serve_installs_what_serving_needs_and_no_test_tools():
    """tools/run_server.sh runs `tools/setup.sh --serve`: the build's packages and what exports the sample model
    (Debian's PyTorch, a virtualenv for its wheels), none of the test-only packages."""
    listed = subprocess.run(["bash", "-c", 'source <(sed -n "1,/^# ---- end of build-only mode/p" tools/setup.sh '
                             '| sed "s/^set -euo pipefail//") --serve; printf "%s\\n" "${debian_packages[@]}"'],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    for needed in ["bazel-bootstrap", "libgrpc++-dev", "libdnnl-dev", "python3-torch", "python3-torchvision",
                   "python3-venv"]:
        assert needed in listed, f"setup.sh --serve leaves out {needed}: {listed}"
    for test_only in ["libgtest-dev", "libbenchmark-dev", "prometheus", "docker.io", "clang-14"]:
        assert test_only not in listed, f"setup.sh --serve installs {test_only}"
    assert "bash tools/setup.sh --serve" in (REPO_ROOT / "tools" / "run_server.sh").read_text()


def test_dockerfile_targets_share_one_runtime_stage():
    docker = Dockerfile()
    assert docker.names()[-1] == "runtime", "the default target (last stage) is the CUDA image"
    for target, source in [("runtime", "--from=build "), ("cpu", "--from=build-cpu "), ("prebuilt", "bin/ ")]:
        base, instructions = docker.stage(target)
        assert base == "debian:12-slim", f"target {target} starts from {base}"
        own = [rest for b, name, ins in docker.stages if name == target for i, rest in ins if i == "COPY"]
        assert own and own[0].startswith(source) and own[0].endswith(" /opt/convoy/bin/"), \
            f"target {target} copies {own}, expected the binaries from {source.strip()}"
        assert [name for b, name, _ in docker.stages if name == target and b == "runtime-base"], \
            f"target {target} must build on runtime-base (one set of libraries, user, health check, entrypoint)"


def test_dockerfile_runtime_stage_is_slim_non_root_and_serves_models_from_slash_models():
    docker = Dockerfile()
    base, name, instructions = docker.final()
    assert base == "debian:12-slim" and name == "runtime"
    users = [rest for ins, rest in instructions if ins == "USER"]
    assert users and users[-1].split(":")[0] not in ("root", "0"), "the runtime stage must run as a non-root user"
    entry = Dockerfile.exec_form([rest for ins, rest in instructions if ins == "ENTRYPOINT"][-1])
    assert entry[0].endswith("/convoy_server")
    assert flag_values(entry[1:])["model_repository"] == "/models"
    cmd = Dockerfile.exec_form([rest for ins, rest in instructions if ins == "CMD"][-1])
    assert all(c.startswith("--") for c in cmd), "CMD holds only extra flags (ENTRYPOINT is the server)"
    copies = [rest for ins, rest in instructions if ins == "COPY"]
    assert any("--from=build" in c for c in copies), "binaries come from the build stage"


def runtime_packages():
    runs = Dockerfile().run_lines("runtime-base")
    install = next(r for r in runs if "apt-get install" in r)
    words = install.split("apt-get install", 1)[1].split("&&")[0].split()
    return {w for w in words if not w.startswith("-")}


def owning_packages(library_paths):
    """{library path: Debian package or None}, from one dpkg -S call (usrmerge: dpkg may list /lib or /usr/lib)."""
    candidates = {}
    for lib in library_paths:
        paths = [lib, os.path.realpath(lib)]
        for c in list(paths):
            paths.append(c[len("/usr"):] if c.startswith("/usr/lib/") else "/usr" + c if c.startswith("/lib") else c)
        candidates[lib] = paths
    everything = sorted({c for paths in candidates.values() for c in paths})
    out = subprocess.run(["dpkg", "-S", *everything], capture_output=True, text=True).stdout
    owner = {}
    for line in out.splitlines():
        packages, _, path = line.partition(": ")
        owner[path.strip()] = packages.split(",")[0].split(":")[0].strip()
    return {lib: next((owner[c] for c in paths if c in owner), None) for lib, paths in candidates.items()}


@pytest.mark.parametrize("binary", ["server/convoy_server", "deploy/convoy_health_probe"])
def test_dockerfile_runtime_stage_installs_every_library_the_binaries_link(binary):
    path = built_binary(binary)
    ldd = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=True).stdout
    libraries = re.findall(r"=>\s+(/\S+)", ldd)
    assert "not found" not in ldd, f"ldd {path}: unresolved libraries\n{ldd}"
    installed = runtime_packages() | {"libc6"}  # libc6 is in every Debian image
    missing = {}
    owners = owning_packages(libraries)
    for lib in libraries:
        if "/usr/local/cuda" in lib:
            pytest.fail(f"{binary} links {lib} dynamically: the image has no CUDA libraries (cudart must be static)")
        package = owners[lib]
        assert package, f"no Debian package owns {lib} (linked by {binary})"
        if package not in installed:
            missing.setdefault(package, []).append(lib)
    assert not missing, f"deploy/Dockerfile runtime stage lacks packages for {binary}: {missing}"


def test_dockerfile_healthcheck_uses_the_probe_on_the_grpc_port():
    defaults = server_flag_defaults()
    _, _, instructions = Dockerfile().final()
    health = [rest for ins, rest in instructions if ins == "HEALTHCHECK"]
    assert len(health) == 1
    probe = Dockerfile.exec_form(health[0])
    assert probe[0] == "/opt/convoy/bin/convoy_health_probe"
    flags = flag_values(probe[1:])
    assert flags["address"].rsplit(":", 1)[1] == defaults["grpc_port"]
    assert flags["service"] in LIVENESS_SERVICES | {READINESS_SERVICE}


def test_dockerignore_keeps_build_outputs_and_virtualenv_out_of_the_context():
    patterns = {l.strip() for l in (REPO_ROOT / ".dockerignore").read_text().splitlines()
                if l.strip() and not l.startswith("#")}
    for required in [".git", "bazel-*", ".venv"]:
        assert required in patterns, f".dockerignore must exclude {required}"
    for needed in ["tools", "deploy", "server", "proto", "kernels", "WORKSPACE", "README.md"]:
        assert needed not in patterns, f".dockerignore must not exclude {needed}: the build stage needs it"


# ----------------------------------------------------------------------------------------------------------------
# Every file parses; ports, probes and shutdown timing agree with the server

DEPLOY_YAML = sorted(p for p in DEPLOY.rglob("*") if p.suffix in (".yaml", ".yml"))
DEPLOY_JSON = sorted(DEPLOY.rglob("*.json"))


@pytest.mark.parametrize("path", DEPLOY_YAML, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_yaml_file_parses(path):
    docs = load_yaml_documents(path)
    assert docs, f"{path} is empty"
    for doc in docs:
        assert isinstance(doc, dict), f"{path}: top level must be a mapping"
        for key, value in (doc.get("data") or {}).items():
            if key.endswith((".yaml", ".yml")):
                assert isinstance(yaml.safe_load(value), dict), f"{path}: embedded {key} does not parse"


@pytest.mark.parametrize("path", DEPLOY_JSON, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_json_file_parses(path):
    json.loads(path.read_text())


def deployment_container():
    deployment = k8s_object(DEPLOY / "kubernetes" / "deployment.yaml", "Deployment")
    containers = deployment["spec"]["template"]["spec"]["containers"]
    return deployment, next(c for c in containers if c["name"] == "convoy")


def serving_runtime_container():
    runtime = k8s_object(DEPLOY / "kserve" / "servingruntime.yaml", "ServingRuntime")
    return runtime, next(c for c in runtime["spec"]["containers"] if c["name"] == "kserve-container")


def test_ports_agree_with_the_server_flag_defaults():
    defaults = server_flag_defaults()
    http_port, grpc_port, metrics_port = (int(defaults["http_port"]), int(defaults["grpc_port"]),
                                          int(defaults["metrics_port"]))

    _, _, instructions = Dockerfile().final()
    exposed = {int(p.split("/")[0]) for ins, rest in instructions if ins == "EXPOSE" for p in rest.split()}
    assert exposed == {http_port, grpc_port, metrics_port}, f"Dockerfile EXPOSE {exposed}"
    entry = flag_values(Dockerfile.exec_form([r for i, r in instructions if i == "ENTRYPOINT"][-1])[1:])
    assert (int(entry["http_port"]), int(entry["grpc_port"]), int(entry["metrics_port"])) == \
           (http_port, grpc_port, metrics_port)

    compose = load_yaml(DEPLOY / "compose" / "docker-compose.yaml")
    assert set(compose["services"]["convoy"]["ports"]) == {f"{p}:{p}" for p in (http_port, grpc_port, metrics_port)}
    prometheus = load_yaml(DEPLOY / "compose" / "prometheus.yml")
    targets = [t for job in prometheus["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert targets == [f"convoy:{metrics_port}"]

    deployment, container = deployment_container()
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": http_port, "grpc": grpc_port, "metrics": metrics_port}
    args = flag_values(container["args"])
    assert (int(args["http_port"]), int(args["grpc_port"]), int(args["metrics_port"])) == \
           (http_port, grpc_port, metrics_port)
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert int(annotations["prometheus.io/port"]) == metrics_port

    service = k8s_object(DEPLOY / "kubernetes" / "service.yaml", "Service", "convoy")
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == \
           {"http": http_port, "grpc": grpc_port, "metrics": metrics_port}
    assert all(p["targetPort"] in ports for p in service["spec"]["ports"])
    assert int(service["metadata"]["annotations"]["prometheus.io/port"]) == metrics_port
    monitor = k8s_object(DEPLOY / "kubernetes" / "servicemonitor.yaml", "ServiceMonitor")
    assert [e["port"] for e in monitor["spec"]["endpoints"]] == ["metrics"]
    assert all(service["metadata"]["labels"].get(k) == v for k, v in monitor["spec"]["selector"]["matchLabels"].items())

    runtime, kserve = serving_runtime_container()
    assert [(p["name"], p["containerPort"]) for p in kserve["ports"]] == [("h2c", grpc_port)]
    kargs = flag_values(kserve["args"])
    assert (int(kargs["http_port"]), int(kargs["grpc_port"]), int(kargs["metrics_port"])) == \
           (http_port, grpc_port, metrics_port)
    assert int(runtime["spec"]["annotations"]["prometheus.kserve.io/port"]) == metrics_port


def all_grpc_probes():
    """(where, probe kind, probe) for every probe of the Deployment and the ServingRuntime."""
    _, container = deployment_container()
    _, kserve = serving_runtime_container()
    for where, c in [("deployment", container), ("servingruntime", kserve)]:
        for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
            if kind in c:
                yield where, kind, c[kind]


def test_probes_are_native_grpc_probes_on_the_health_service_names():
    """Liveness and start-up are native gRPC probes on the health service; readiness is gRPC's "readiness" service,
    or in the Deployment KServe v2's GET /v2/health/ready on the HTTP port (the same state)."""
    grpc_port = int(server_flag_defaults()["grpc_port"])
    probes = list(all_grpc_probes())
    assert {(w, k) for w, k, _ in probes} >= {("deployment", "livenessProbe"), ("deployment", "readinessProbe"),
                                              ("servingruntime", "livenessProbe"), ("servingruntime", "readinessProbe")}
    for where, kind, probe in probes:
        if where == "deployment" and kind == "readinessProbe":
            assert probe["httpGet"] == {"port": "http", "path": "/v2/health/ready"}, probe
            continue
        assert "grpc" in probe, f"{where} {kind} must be a native gRPC probe"
        assert probe["grpc"]["port"] == grpc_port, f"{where} {kind} probes port {probe['grpc']['port']}"
        service = probe["grpc"].get("service", "")
        if kind == "readinessProbe":
            assert service == READINESS_SERVICE, f"{where} readiness probe asks for {service!r}"
        else:
            assert service in LIVENESS_SERVICES, f"{where} {kind} asks for {service!r}: must be process health"


def test_health_service_names_match_the_server():
    # The files that implement the health service answer with HealthCheckResponse statuses.
    sources = [p for p in (REPO_ROOT / "server").rglob("*.cc") if "HealthCheckResponse::SERVING" in p.read_text()]
    assert sources, "no server/**/*.cc answers with HealthCheckResponse::SERVING: the health service is missing"
    text = "\n".join(p.read_text() for p in sources)
    for name in ("liveness", READINESS_SERVICE):
        assert f'"{name}"' in text, f"server health service ({[str(p) for p in sources]}) does not name {name!r}"


def test_shutdown_grace_periods_outlast_prestop_and_the_drain():
    deployment, container = deployment_container()
    exit_timeout = int(flag_values(container["args"])["exit_timeout_seconds"])
    pre_stop = container["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0].endswith("sleep"), f"preStop should be a sleep, is {pre_stop}"
    pre_stop_seconds = int(pre_stop[1])
    grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert grace > pre_stop_seconds + exit_timeout, \
        f"terminationGracePeriodSeconds {grace} <= preStop {pre_stop_seconds} + exit timeout {exit_timeout}"

    defaults = server_flag_defaults()
    _, _, instructions = Dockerfile().final()
    image_timeout = int(flag_values(Dockerfile.exec_form([r for i, r in instructions if i == "ENTRYPOINT"][-1])[1:])
                        ["exit_timeout_seconds"])
    if "exit_timeout_seconds" in defaults:  # once the server declares it, the files and the server agree
        assert image_timeout == int(defaults["exit_timeout_seconds"])
    assert exit_timeout == image_timeout, "the Deployment and the image drain for different times"

    compose = load_yaml(DEPLOY / "compose" / "docker-compose.yaml")["services"]["convoy"]
    stop_grace = int(re.fullmatch(r"(\d+)s", compose["stop_grace_period"]).group(1))
    assert stop_grace > image_timeout, f"compose stop_grace_period {stop_grace}s <= exit timeout {image_timeout}s"

    isvc = k8s_object(DEPLOY / "kserve" / "inferenceservice.yaml", "InferenceService")
    _, kserve = serving_runtime_container()
    kserve_timeout = int(flag_values(kserve["args"])["exit_timeout_seconds"])
    kserve_prestop = int(kserve.get("lifecycle", {}).get("preStop", {}).get("exec", {}).get("command", ["", 0])[1])
    assert isvc["spec"]["predictor"]["terminationGracePeriodSeconds"] > kserve_prestop + kserve_timeout


def test_the_server_flags_the_files_pass_are_the_contracts():
    known = {"model_repository", "grpc_port", "metrics_port", "model_control_mode", "strict_readiness",
             "exit_timeout_seconds", "algorithm_cache_file", "device", "tls_cert", "tls_key", "tls_client_ca"}
    known |= set(server_flag_defaults())
    _, container = deployment_container()
    _, kserve = serving_runtime_container()
    _, _, instructions = Dockerfile().final()
    image = Dockerfile.exec_form([r for i, r in instructions if i == "ENTRYPOINT"][-1])[1:]
    image += Dockerfile.exec_form([r for i, r in instructions if i == "CMD"][-1])
    compose = load_yaml(DEPLOY / "compose" / "docker-compose.yaml")["services"]["convoy"]["command"]
    cpu = load_yaml(DEPLOY / "compose" / "docker-compose.cpu.yaml")["services"]["convoy"]["command"]
    scale = load_yaml(DEPLOY / "compose" / "docker-compose.scale.yaml")["services"]["convoy"]["command"]
    for where, args in [("deployment", container["args"]), ("servingruntime", kserve["args"]), ("image", image),
                        ("compose", compose), ("compose cpu", cpu), ("compose scale-out", scale)]:
        unknown = set(flag_values(args)) - known
        assert not unknown, f"{where} passes flags the server does not have: {unknown}"
        assert flag_values(args).get("device", "auto") in ("auto", "cpu", "cuda")
        assert flag_values(args).get("model_control_mode", "none") in ("none", "poll", "explicit")


def test_gpu_requests():
    _, container = deployment_container()
    assert container["resources"]["requests"]["nvidia.com/gpu"] == 1
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    isvc = k8s_object(DEPLOY / "kserve" / "inferenceservice.yaml", "InferenceService")
    assert isvc["spec"]["predictor"]["model"]["resources"]["limits"]["nvidia.com/gpu"] == 1
    compose = load_yaml(DEPLOY / "compose" / "docker-compose.yaml")["services"]["convoy"]
    devices = compose["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 1, "capabilities": ["gpu"]}]
    cpu = load_yaml(DEPLOY / "compose" / "docker-compose.cpu.yaml")["services"]["convoy"]
    assert cpu["deploy"] == {} and "!reset" in (DEPLOY / "compose" / "docker-compose.cpu.yaml").read_text()
    assert cpu["build"]["target"] in Dockerfile().names(), "the CPU override builds a Dockerfile target"
    assert flag_values(cpu["command"])["device"] == "cpu"


def test_compose_mounts_the_files_that_exist():
    compose_dir = DEPLOY / "compose"
    compose = load_yaml(compose_dir / "docker-compose.yaml")
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            if source.startswith("."):
                assert (compose_dir / source).resolve().exists(), f"compose service {name} mounts missing {source}"
    assert compose["services"]["convoy"]["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (compose_dir / compose["services"]["convoy"]["build"]["context"]).resolve() == REPO_ROOT


def test_kserve_runtime_and_inference_service_fit_together():
    runtime, container = serving_runtime_container()
    assert "grpc-v2" in runtime["spec"]["protocolVersions"]
    assert flag_values(container["args"])["model_repository"] == "/mnt/models", "KServe downloads models there"
    isvc = k8s_object(DEPLOY / "kserve" / "inferenceservice.yaml", "InferenceService")
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"]
    assert model["modelFormat"]["name"] in {f["name"] for f in runtime["spec"]["supportedModelFormats"]}
    assert model["protocolVersion"] == "grpc-v2"


def test_hpa_scales_the_deployment_on_a_metric_the_adapter_exposes():
    deployment, _ = deployment_container()
    hpa = k8s_object(DEPLOY / "kubernetes" / "hpa.yaml", "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"]["name"] == deployment["metadata"]["name"]
    rules = adapter_rules()
    exposed = {r["name"]["as"] for r in rules}
    for metric in hpa["spec"]["metrics"]:
        assert metric["type"] == "Pods"
        assert metric["pods"]["metric"]["name"] in exposed
    for rule in rules:
        assert set(rule["resources"]["overrides"]) == {"namespace", "pod"}
        assert "<<.LabelMatchers>>" in rule["metricsQuery"] and "<<.GroupBy>>" in rule["metricsQuery"]


def test_algorithm_cache_configmap_files_would_load():
    header = (REPO_ROOT / "kernels" / "registry" / "algorithm_cache.h").read_text()
    source = (REPO_ROOT / "kernels" / "registry" / "algorithm_cache.cc").read_text()
    version = re.search(r'kKernelLibraryVersion\[\]\s*=\s*"([^"]+)"', header).group(1)
    magic = re.search(r'kFileMagic\[\]\s*=\s*"([^"]+)"', source).group(1)
    file_format = re.search(r"kFileFormat\s*=\s*(\d+)", source).group(1)
    offset, prime = (int(x) for x in re.search(r"uint64_t h = (\d+)ull;.*?h \*= (\d+)ull;", source, re.S).groups())
    configmap = k8s_object(DEPLOY / "kubernetes" / "algorithm-cache-configmap.yaml", "ConfigMap")
    assert configmap["data"], "no cache files in the ConfigMap"
    for key, text in configmap["data"].items():
        lines = text.split("\n")
        assert lines[0] == f"{magic} {file_format}", f"{key}: bad first line {lines[0]!r}"
        assert lines[1] == f"library {version}", f"{key} is for {lines[1]!r}, the kernels are {version}"
        body = "".join(l + "\n" for l in lines[2:-2])
        h = offset
        for byte in body.encode():
            h = ((h ^ byte) * prime) % 2**64
        assert lines[-2] == f"checksum {h}", f"{key}: checksum line {lines[-2]!r}, expected {h}"
    deployment, _ = deployment_container()
    init = deployment["spec"]["template"]["spec"]["initContainers"][0]
    gpu_type = next(e["value"] for e in init["env"] if e["name"] == "GPU_TYPE")
    assert f"{gpu_type}.txt" in configmap["data"], f"the Deployment seeds {gpu_type}.txt, not in the ConfigMap"


# ----------------------------------------------------------------------------------------------------------------
# Metric names: the dashboard and the adapter rules name only deploy/metrics.yaml's metrics; the server exports them

def metric_list():
    return yaml.safe_load((DEPLOY / "metrics.yaml").read_text())["metrics"]


def adapter_rules():
    configmap = k8s_object(DEPLOY / "kubernetes" / "prometheus-adapter-rules.yaml", "ConfigMap")
    return yaml.safe_load(configmap["data"]["config.yaml"])["rules"]


def dashboard_queries():
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "convoy.json").read_text())
    queries = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queries += [v["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return queries


PROMQL_WORDS = {"sum", "avg", "max", "min", "count", "by", "without", "rate", "increase", "irate",
                "histogram_quantile", "label_values", "on", "ignoring", "group_left", "group_right", "and", "or",
                "unless", "offset", "bool", "le"}


def metric_names_in(query):
    """Identifiers of a PromQL query that are metric names (not functions, keywords, labels or label values)."""
    query = re.sub(r'"(?:[^"\\]|\\.)*"', '""', query)          # label values
    query = re.sub(r"\{[^}]*\}", "{}", query)                   # label matchers
    query = re.sub(r"\[[^\]]*\]", "[]", query)                  # ranges
    query = re.sub(r"<<[^>]*>>", "", query)                     # prometheus-adapter template fields
    query = re.sub(r"\b(by|without|on|ignoring)\s*\([^)]*\)", "", query)  # grouping labels
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", query):
        word = m.group(0)
        following = query[m.end():].lstrip()[:1]
        if word in PROMQL_WORDS or following == "(" or word == "model":
            continue
        names.add(word)
    return names


def series_names():
    """Every series name the server exports for deploy/metrics.yaml's metrics: histograms as _bucket/_sum/_count."""
    series = {}
    for m in metric_list():
        if m["type"] == "histogram":
            for suffix in ("_bucket", "_sum", "_count"):
                series[m["name"] + suffix] = m
        else:
            series[m["name"]] = m
    return series


def test_metric_list_is_well_formed():
    metrics = metric_list()
    roles = [m["role"] for m in metrics]
    names = [m["name"] for m in metrics]
    assert len(set(roles)) == len(roles) and len(set(names)) == len(names), "duplicate role or name"
    for m in metrics:
        assert m["type"] in ("counter", "gauge", "histogram"), m
        assert re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", m["name"]), m
    # The contract's Triton metrics are all there.
    for name in ["nv_inference_request_success", "nv_inference_request_failure", "nv_inference_count",
                 "nv_inference_exec_count", "nv_inference_request_duration_us", "nv_inference_queue_duration_us",
                 "nv_inference_compute_input_duration_us", "nv_inference_compute_infer_duration_us",
                 "nv_inference_compute_output_duration_us", "nv_inference_pending_request_count"]:
        assert name in names, f"deploy/metrics.yaml lacks {name}"


def test_dashboard_is_generated_from_the_metric_list():
    committed = (DEPLOY / "grafana" / "dashboards" / "convoy.json").read_text()
    assert committed == generate_dashboard.render(), \
        "deploy/grafana/dashboards/convoy.json is stale: run python3 deploy/grafana/generate_dashboard.py"


def test_dashboard_covers_the_required_panels():
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "convoy.json").read_text())
    text = json.dumps(dashboard)
    roles = {m["role"]: m["name"] for m in metric_list()}
    for role in ["inference_count", "request_latency", "batch_size", "pending_requests", "request_failure",
                 "gpu_memory_used", "gpu_utilization", "algorithm_cache_hits"]:
        assert roles[role] in text, f"the dashboard shows no {role} ({roles[role]})"
    quantiles = [e for e in dashboard_queries() if "histogram_quantile" in e]
    assert any("histogram_quantile(0.5," in e for e in quantiles) and any("histogram_quantile(0.99," in e
                                                                          for e in quantiles)
    assert any(p["type"] == "heatmap" for p in dashboard["panels"]), "batch size distribution needs a heatmap"
    provider = load_yaml(DEPLOY / "grafana" / "provisioning" / "dashboards" / "convoy.yaml")["providers"][0]
    compose = load_yaml(DEPLOY / "compose" / "docker-compose.yaml")["services"]["grafana"]["volumes"]
    assert any(v.endswith(":" + provider["options"]["path"] + ":ro") and "dashboards" in v for v in compose)
    datasource = load_yaml(DEPLOY / "grafana" / "provisioning" / "datasources" / "prometheus.yaml")["datasources"][0]
    assert datasource["url"] == "http://prometheus:9090"


def test_queries_name_only_listed_metrics():
    series = series_names()
    queries = [("dashboard", q) for q in dashboard_queries()]
    for rule in adapter_rules():
        queries += [("adapter seriesQuery", rule["seriesQuery"]), ("adapter metricsQuery", rule["metricsQuery"])]
    assert len(queries) > 10
    for where, query in queries:
        names = metric_names_in(query)
        assert names or "<<.Series>>" in query, f"{where}: no metric found in {query!r}"
        for name in names:
            assert name in series, f"{where} names {name!r}, which deploy/metrics.yaml does not list: {query}"
            base = series[name]
            if base["type"] == "histogram":
                assert "histogram_quantile" in query or name.endswith(("_sum", "_count")) or "increase" in query, \
                    f"{where}: histogram series {name} used outside a quantile, sum or count: {query}"
        for m in re.finditer(r"histogram_quantile\([^,]+,.*?(\w+)\{", query):
            assert m.group(1).endswith("_bucket"), f"{where}: histogram_quantile over {m.group(1)}: {query}"


def metrics_sources():
    sources = sorted((REPO_ROOT / "server" / "metrics").glob("*.h")) + sorted((REPO_ROOT / "server" / "metrics")
                                                                            .glob("*.cc"))
    doc = REPO_ROOT / "docs" / "metrics.md"
    return sources + ([doc] if doc.exists() else [])


def test_listed_metrics_are_the_names_in_server_metrics_sources():
    sources = metrics_sources()
    assert (REPO_ROOT / "docs" / "metrics.md").exists() and any(p.suffix == ".cc" for p in sources), \
        "server/metrics/*.cc or docs/metrics.md is missing: deploy/metrics.yaml's names have nothing to match"
    text = "\n".join(p.read_text() for p in sources)
    missing = [m["name"] for m in metric_list() if m["name"] not in text]
    assert not missing, (f"deploy/metrics.yaml names metrics that {', '.join(str(p.relative_to(REPO_ROOT)) for p in sources)} "
                         f"never mention: {missing}. Align deploy/metrics.yaml with the server and run "
                         f"python3 deploy/grafana/generate_dashboard.py")


@pytest.fixture(scope="module")
def live_metrics():
    """The text of a live server's /metrics, started on free loopback ports with the sample model repository."""
    server = built_binary("server/convoy_server")
    grpc_port, metrics_port = free_port(), free_port()
    process = subprocess.Popen([str(server), f"--model_repository={REPO_ROOT / 'model_repo'}",
                                f"--grpc_port={grpc_port}", f"--http_port={free_port()}",
                                f"--metrics_port={metrics_port}"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    body, last_error = None, None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and body is None:
            if process.poll() is not None:
                last_error = f"the server exited with status {process.returncode}"
                break
            try:
                with urllib.request.urlopen(url, timeout=2) as response:
                    candidate = response.read().decode()
                # Model metrics appear once the models are loaded: wait for the Triton counters.
                if "nv_inference_count" in candidate or time.monotonic() > deadline - 5:
                    body = candidate
            except (urllib.error.URLError, ConnectionError, socket.timeout) as error:
                last_error = repr(error)
            time.sleep(0.5)
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=40)
            except subprocess.TimeoutExpired:
                process.kill()
        output = process.stdout.read() if process.stdout else ""
    if body is None:
        pytest.fail(f"{server} served no {url} ({last_error}). Server output:\n{output[-3000:]}")
    return body


def test_live_server_exports_every_listed_metric(live_metrics):
    exported = set(re.findall(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{|\s)", live_metrics, re.M))
    missing = [name for name, m in series_names().items() if name not in exported and not m.get("gpu_only")]
    assert not missing, (f"the server's /metrics lacks {missing}; it exports {sorted(exported)[:60]}. Align "
                         f"deploy/metrics.yaml and run python3 deploy/grafana/generate_dashboard.py")


# ----------------------------------------------------------------------------------------------------------------
# convoy_health_probe against a Python grpc.health.v1 server

@pytest.fixture(scope="module")
def health_server():
    grpc = pytest.importorskip("grpc")
    from grpc_health.v1 import health, health_pb2, health_pb2_grpc
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("liveness", health_pb2.HealthCheckResponse.SERVING)
    servicer.set("readiness", health_pb2.HealthCheckResponse.NOT_SERVING)
    servicer.set("resnet", health_pb2.HealthCheckResponse.SERVING)
    yield port, servicer, health_pb2
    server.stop(0)


def run_probe(*args, timeout=20):
    probe = built_binary("deploy/convoy_health_probe")
    start = time.monotonic()
    result = subprocess.run([str(probe), *args], capture_output=True, text=True, timeout=timeout)
    return result.returncode, result.stdout + result.stderr, time.monotonic() - start


@pytest.mark.parametrize("service,expected", [("", 0), ("liveness", 0), ("readiness", 1), ("resnet", 0),
                                              ("no_such_model", 1)])
def test_probe_exit_code_follows_the_serving_status(health_server, service, expected):
    port = health_server[0]
    rc, output, _ = run_probe(f"--address=127.0.0.1:{port}", f"--service={service}", "--timeout_ms=3000")
    assert rc == expected, f"probe for {service!r}: exit {rc}, expected {expected}; output: {output}"
    assert f'service "{service}"' in output


def test_probe_follows_a_status_change(health_server):
    port, servicer, health_pb2 = health_server
    servicer.set("readiness", health_pb2.HealthCheckResponse.SERVING)
    try:
        rc, output, _ = run_probe(f"--address=127.0.0.1:{port}", "--service=readiness")
        assert rc == 0 and "SERVING" in output, output
    finally:
        servicer.set("readiness", health_pb2.HealthCheckResponse.NOT_SERVING)


def test_probe_fails_within_its_timeout_when_nothing_listens():
    rc, output, elapsed = run_probe(f"--address=127.0.0.1:{free_port()}", "--timeout_ms=500")
    assert rc == 1, output
    assert elapsed < 5, f"the probe took {elapsed:.1f} s with --timeout_ms=500"
    assert "gRPC error" in output


def test_probe_defaults_to_the_server_grpc_port():
    text = (DEPLOY / "health_probe.cc").read_text()
    default = re.search(r'ABSL_FLAG\(std::string, address, "([^"]+)"', text).group(1)
    assert default == f"localhost:{server_flag_defaults()['grpc_port']}"


def test_deploy_doc_shows_the_image_commands_and_a_test_image_run():
    doc = (REPO_ROOT / "docs" / "deploy.md").read_text()
    assert "docker run --gpus all -p 8000:8000 -p 8001:8001 -p 8002:8002 -v $PWD/model_repo:/models" in doc
    assert "tests/python/test_deploy_files.py" in doc
    assert "deploy/test_image.sh" in doc and "test_image: PASSED" in doc, \
        "docs/deploy.md must show a deploy/test_image.sh run"


def test_kustomization_lists_every_manifest_and_services_select_the_pods():
    folder = DEPLOY / "kubernetes"
    kustomization = load_yaml(folder / "kustomization.yaml")
    listed = set(kustomization["resources"])
    present = {p.name for p in folder.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == present, f"kustomization.yaml lists {sorted(listed)}, the folder has {sorted(present)}"
    deployment, container = deployment_container()
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert all(pod_labels.get(k) == v for k, v in deployment["spec"]["selector"]["matchLabels"].items())
    for service in load_yaml_documents(folder / "service.yaml"):
        assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items()), service["metadata"]
    assert {i["name"] for i in kustomization["images"]} == {container["image"].split(":")[0]}
    seed = next(v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "algorithm-cache-seed")
    configmap = k8s_object(folder / "algorithm-cache-configmap.yaml", "ConfigMap")
    assert seed["configMap"]["name"] == configmap["metadata"]["name"]


# ----------------------------------------------------------------------------------------------------------------
# The manifests against Kubernetes' own API schemas (deploy/validate_manifests.py)

@pytest.fixture(scope="module")
def manifest_schemas():
    kubernetes = validate_manifests.KubernetesSchemas("1.37.0")
    return kubernetes, validate_manifests.KServeSchemas(validate_manifests.DEFAULT_KSERVE_SDK, kubernetes)


def documents_of(path):
    return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]


def test_every_manifest_validates_against_the_kubernetes_and_kserve_schemas(manifest_schemas):
    outcomes = {}
    for path in validate_manifests.manifests_in_deploy():
        for document in documents_of(path):
            outcome, messages, _ = validate_manifests.validate_document(document, *manifest_schemas)
            assert outcome != "invalid", f"{path.name} {document['kind']}: " + "; ".join(messages)
            outcomes.setdefault(outcome, set()).add(document["kind"])
    # Only the kinds no schema package describes go unchecked; everything else, KServe's included, is validated.
    assert outcomes["unchecked"] == set(validate_manifests.UNCHECKED_KINDS)
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ConfigMap", "InferenceService",
            "ServingRuntime"} <= outcomes["ok"]


def test_validator_command_line_passes_on_the_deploy_folder():
    run = subprocess.run([sys.executable, str(DEPLOY / "validate_manifests.py")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "INVALID" not in run.stdout and "ok         deploy/kserve/servingruntime.yaml" in run.stdout


def _set(path, value):
    def mutate(document):
        node = document
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
    return mutate


_DELETE = object()
PLANTED_MISTAKES = {
    # name: (file, kind, mutation, the error's field path, a phrase of the message)
    "port_as_string": ("kubernetes/deployment.yaml", "Deployment",
                       _set(["spec", "template", "spec", "containers", 0, "ports", 0, "containerPort"], "8001"),
                       "spec.template.spec.containers.0.ports.0.containerPort", "is not of type 'integer'"),
    "misspelled_field": ("kubernetes/deployment.yaml", "Deployment", _set(["spec", "replica"], 2),
                         "spec", "'replica' was unexpected"),
    "missing_required_field": ("kubernetes/hpa.yaml", "HorizontalPodAutoscaler", _set(["spec", "maxReplicas"], _DELETE),
                               "spec", "'maxReplicas' is a required property"),
    "service_port_as_a_name": ("kubernetes/service.yaml", "Service", _set(["spec", "ports", 0, "port"], "grpc"),
                                  "spec.ports.0.port", "is not of type 'integer'"),
    "runtime_misspelled_field": ("kserve/servingruntime.yaml", "ServingRuntime",
                                 _set(["spec", "supportedModelFormat"], []), "spec",
                                 "'supportedModelFormat' was unexpected"),
    "runtime_probe_port_as_string": ("kserve/servingruntime.yaml", "ServingRuntime",
                                     _set(["spec", "containers", 0, "readinessProbe", "grpc", "port"], "8001"),
                                     "spec.containers.0.readinessProbe.grpc.port", "is not of type 'integer'"),
    "runtime_unknown_container_field": ("kserve/servingruntime.yaml", "ServingRuntime",
                                        _set(["spec", "containers", 0, "arguments"], ["--grpc_port=8001"]),
                                        "spec.containers.0", "'arguments' was unexpected"),
    "inference_service_replicas_as_word": ("kserve/inferenceservice.yaml", "InferenceService",
                                           _set(["spec", "predictor", "minReplicas"], "one"),
                                           "spec.predictor.minReplicas", "is not of type 'integer'"),
}


@pytest.mark.parametrize("mistake", sorted(PLANTED_MISTAKES))
def test_validation_catches_a_planted_mistake(manifest_schemas, mistake):
    file, kind, mutate, field, phrase = PLANTED_MISTAKES[mistake]
    document = next(d for d in documents_of(DEPLOY / file) if d["kind"] == kind)
    outcome, messages, _ = validate_manifests.validate_document(document, *manifest_schemas)
    assert outcome == "ok", messages  # the file as committed passes...
    mutate(document)
    outcome, messages, _ = validate_manifests.validate_document(document, *manifest_schemas)
    assert outcome == "invalid"  # ...and the mistake is reported at the field, with the reason
    assert any(m.startswith(field + ":") and phrase in m for m in messages), messages


def test_validator_exits_nonzero_and_names_the_field_of_a_planted_mistake(tmp_path):
    broken = tmp_path / "deployment.yaml"
    broken.write_text((DEPLOY / "kubernetes" / "deployment.yaml").read_text().replace(
        "containerPort: 8001", "containerPort: \"8001\"", 1))
    assert broken.read_text() != (DEPLOY / "kubernetes" / "deployment.yaml").read_text()
    run = subprocess.run([sys.executable, str(DEPLOY / "validate_manifests.py"), str(broken)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 1, run.stdout + run.stderr
    assert "INVALID" in run.stdout and "containerPort: '8001' is not of type 'integer'" in run.stdout, run.stdout


# ----------------------------------------------------------------------------------------------------------------
# Scale-out: HAProxy in front of N replicas (deploy/compose/balancer, docker-compose.scale.yaml). deploy/test_scale_out.sh
# runs it (a rolling restart under load); these checks read the files.

BALANCER = DEPLOY / "compose" / "balancer"
sys.path.insert(0, str(BALANCER))
import grpc_health_check  # noqa: E402  (deploy/compose/balancer/grpc_health_check.py)


def haproxy_sections():
    """{(keyword, name): [directive lines]} of balancer/haproxy.cfg, comments and blank lines dropped."""
    sections, current = {}, None
    for raw in (BALANCER / "haproxy.cfg").read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        if not raw.startswith((" ", "\t")):
            words = line.split()
            current = (words[0], words[1] if len(words) > 1 else "")
            sections[current] = []
        else:
            assert current is not None, f"haproxy.cfg: directive outside a section: {raw!r}"
            sections[current].append(" ".join(line.split()))
    return sections


def directive(lines, keyword):
    found = [l for l in lines if l.split()[0] == keyword]
    assert len(found) == 1, f"expected one {keyword!r} directive, found {found}"
    return found[0].split()[1:]


def keyword_value(words, keyword):
    return words[words.index(keyword) + 1]


def seconds(text):
    match = re.fullmatch(r"(\d+)(ms|s)?", text)
    assert match, text
    return int(match.group(1)) / (1000 if match.group(2) == "ms" else 1)


def scale_compose():
    return load_yaml(DEPLOY / "compose" / "docker-compose.scale.yaml")["services"]


def test_haproxy_balances_grpc_per_request_over_replicas_found_by_dns():
    grpc_port = int(server_flag_defaults()["grpc_port"])
    sections = haproxy_sections()
    assert "mode http" in sections[("defaults", "")], "HTTP mode: each gRPC request (HTTP/2 stream) is balanced"
    assert directive(sections[("frontend", "grpc")], "bind") == [f":{grpc_port}", "proto", "h2"]
    backend = sections[("backend", "convoy_grpc")]
    assert directive(backend, "balance") == ["leastconn"]  # counts requests in flight, not TCP connections
    name, count, address = directive(backend, "server-template")
    assert int(count) >= 2 and address == f"convoy:{grpc_port}", "slots for the replicas of the service 'convoy'"
    default_server = directive(backend, "default-server")
    assert keyword_value(default_server, "proto") == "h2", "HTTP/2 to the replicas: gRPC needs it"
    assert "check" in default_server and keyword_value(default_server, "init-addr") == "none"
    resolvers = keyword_value(default_server, "resolvers")
    nameservers = [l.split() for l in sections[("resolvers", resolvers)] if l.startswith("nameserver")]
    assert [n[2] for n in nameservers] == ["127.0.0.11:53"], "Docker's embedded DNS lists every replica"
    holds = {l.split()[1]: seconds(l.split()[2]) for l in sections[("resolvers", resolvers)] if l.startswith("hold")}
    assert holds["valid"] <= 2, "new replicas (--scale) are found within seconds"
    assert holds["obsolete"] >= 10, "a replica restarted on its address keeps its slot and returns through checks"
    defaults = sections[("defaults", "")]
    assert int(directive(defaults, "retries")[0]) >= 1
    assert any(l.startswith("option redispatch") for l in defaults), "retries go to another replica"
    assert "conn-failure" in directive(defaults, "retry-on")


def test_haproxy_checks_grpc_readiness_with_the_generated_bytes():
    backend = haproxy_sections()[("backend", "convoy_grpc")]
    assert "option tcp-check" in backend
    checks = [l for l in backend if l.startswith("tcp-check")]
    assert checks == ["tcp-check connect"] + grpc_health_check.haproxy_lines(), \
        "haproxy.cfg's tcp-check lines differ from `python3 deploy/compose/balancer/grpc_health_check.py`"
    # The request is well-formed HTTP/2 framing: preface, then frames whose lengths add up, ending the stream.
    data = grpc_health_check.request_bytes()
    assert data.startswith(grpc_health_check.PREFACE)
    offset, frames = len(grpc_health_check.PREFACE), []
    while offset < len(data):
        length = int.from_bytes(data[offset:offset + 3], "big")
        kind, flags, stream = data[offset + 3], data[offset + 4], int.from_bytes(data[offset + 5:offset + 9], "big")
        frames.append((kind, flags, stream, data[offset + 9:offset + 9 + length]))
        offset += 9 + length
    assert offset == len(data)
    assert [(k, f, s) for k, f, s, _ in frames] == [(4, 0, 0), (1, 4, 1), (0, 1, 1)], "SETTINGS, HEADERS, DATA"
    assert b"/grpc.health.v1.Health/Check" in frames[1][3] and b"application/grpc" in frames[1][3]
    message = frames[2][3]
    assert message[0] == 0 and int.from_bytes(message[1:5], "big") == len(message) - 5
    assert message[5:] == b"\x0a" + bytes([len(READINESS_SERVICE)]) + READINESS_SERVICE.encode(), \
        "the check asks for the server's readiness"
    # A SERVING answer matches both expects, a NOT_SERVING one only the first.
    prefix = grpc_health_check.ANSWER_PREFIX
    serving = grpc_health_check.frame(0, 0, 1, grpc_health_check.SERVING_BYTES)
    not_serving = grpc_health_check.frame(0, 0, 1, grpc_health_check.NOT_SERVING_BYTES)
    final = bytes.fromhex(checks[-1].split()[-1])
    assert prefix in serving and prefix in not_serving and final in serving and final not in not_serving
    assert "min-recv" in checks[-1], "without min-recv a NOT_SERVING answer fails only at `timeout check`"


def test_balancer_takes_a_leaving_replica_out_before_it_refuses_requests():
    """The longest a SIGTERMed replica can still be sent new requests is one check interval plus (fall - 1) fast
    intervals; the replica keeps serving for --exit_delay_seconds, which must be longer (with a second to spare)."""
    default_server = directive(haproxy_sections()[("backend", "convoy_grpc")], "default-server")
    inter, fastinter = seconds(keyword_value(default_server, "inter")), seconds(keyword_value(default_server, "fastinter"))
    fall = int(keyword_value(default_server, "fall"))
    worst = inter + (fall - 1) * fastinter
    convoy = scale_compose()["convoy"]
    delay = int(flag_values(convoy["command"])["exit_delay_seconds"])
    assert worst + 1 <= delay, f"HAProxy may route to a leaving replica for {worst} s; it serves only {delay} s"
    _, _, instructions = Dockerfile().final()
    image_timeout = int(flag_values(Dockerfile.exec_form([r for i, r in instructions if i == "ENTRYPOINT"][-1])[1:])
                        ["exit_timeout_seconds"])
    grace = int(re.fullmatch(r"(\d+)s", convoy["stop_grace_period"]).group(1))
    assert grace > delay + image_timeout, f"stop_grace_period {grace}s <= exit delay {delay} s + drain {image_timeout} s"
    script = (DEPLOY / "test_scale_out.sh").read_text()
    assert re.search(rf"^exit_delay={delay}$", script, re.M), "deploy/test_scale_out.sh tests the Compose delay"


def test_scale_out_compose_file():
    grpc_port = int(server_flag_defaults()["grpc_port"])
    text = (DEPLOY / "compose" / "docker-compose.scale.yaml").read_text()
    services = scale_compose()
    assert services["convoy"]["ports"] == [] and "ports: !reset []" in text, \
        "replicas publish no host port (N containers cannot share one)"
    assert flag_values(services["convoy"]["command"])["device"] == "auto"
    balancer = services["balancer"]
    context = DEPLOY / "compose" / balancer["build"]["context"]
    assert (context / "Dockerfile").exists() and (context / "haproxy.cfg").exists()
    assert f"{grpc_port}:{grpc_port}" in balancer["ports"]
    dockerfile = (context / "Dockerfile").read_text()
    assert re.search(r"^FROM debian:12-slim$", dockerfile, re.M), "built from the local Debian base, no registry"
    assert "apt-get install -y --no-install-recommends haproxy" in dockerfile
    assert "COPY haproxy.cfg /usr/local/etc/haproxy/haproxy.cfg" in dockerfile
    assert "RUN haproxy -c -f /usr/local/etc/haproxy/haproxy.cfg" in dockerfile, "the build checks the config"
    volumes = services["prometheus"]["volumes"]
    assert volumes == ["./prometheus.scale.yml:/etc/prometheus/prometheus.yml:ro"]
    assert (DEPLOY / "compose" / "prometheus.scale.yml").exists()


def test_prometheus_scrapes_every_replica_and_the_balancer():
    metrics_port = int(server_flag_defaults()["metrics_port"])
    prometheus = load_yaml(DEPLOY / "compose" / "prometheus.scale.yml")
    jobs = {job["job_name"]: job for job in prometheus["scrape_configs"]}
    assert jobs["convoy"]["dns_sd_configs"] == [{"names": ["convoy"], "type": "A", "port": metrics_port,
                                                 "refresh_interval": "10s"}], "one target per replica, by DNS"
    stats_bind = directive(haproxy_sections()[("frontend", "stats")], "bind")[0]
    assert jobs["balancer"]["static_configs"][0]["targets"] == [f"balancer{stats_bind}"]
    assert "prometheus-exporter" in " ".join(haproxy_sections()[("frontend", "stats")])


def test_dashboard_adds_up_the_replicas():
    """With N replicas every series comes N times (one per instance): every panel aggregates them, and one panel
    shows them side by side."""
    dashboard = json.loads((DEPLOY / "grafana" / "dashboards" / "convoy.json").read_text())
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            expr = target["expr"]
            assert re.match(r"(sum|max|avg|min|count|histogram_quantile\(\S+, sum)\b", expr), \
                f"panel {panel['title']!r}: {expr} is not aggregated over replicas"
    per_instance = [p for p in dashboard["panels"] if any("by (instance)" in t["expr"] for t in p["targets"])]
    assert len(per_instance) == 1, "one panel shows each replica's throughput"


def test_prometheus_configs_pass_promtool(tmp_path):
    """Debian's promtool (package prometheus, installed by tools/setup.sh) accepts both Compose Prometheus configs and
    rejects a planted mistake in the DNS discovery."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("no `promtool`: tools/setup.sh installs Debian's prometheus", pytrace=False)
    for name in ("prometheus.yml", "prometheus.scale.yml"):
        proc = subprocess.run([promtool, "check", "config", str(DEPLOY / "compose" / name)], capture_output=True,
                              text=True, timeout=60)
        assert proc.returncode == 0, f"promtool rejects {name}:\n{proc.stdout}\n{proc.stderr}"
    planted = tmp_path / "prometheus.yml"
    planted.write_text((DEPLOY / "compose" / "prometheus.scale.yml").read_text().replace("type: A", "type: AAA"))
    proc = subprocess.run([promtool, "check", "config", str(planted)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "AAA" in proc.stdout + proc.stderr, proc.stdout + proc.stderr
