"""Runs models through the `convoy` CLI for the Python op and model tests: Convoy's reference path (import, optimize,
FP32 reference interpreter: `convoy run|inspect --engine=reference`) and, with run_on_kernels, the real kernel
runtime (`convoy run --device=cpu --layout=...`, or the emulated GPU through //server/tools:convoy_emulated_gpu).

Each CLI binary runs as one long-lived `convoy jobs` process (a command per stdin line), so a module of small
tests pays the process start-up (~0.2 s here) once instead of per call. The CLI is looked up as test_cli.cli_path()
does: $CONVOY_CLI, then bazel-bin/server/tools/convoy.
"""
import atexit
import pathlib
import queue
import subprocess
import tempfile
import threading

import numpy as np

from test_cli import cli_path, relative_error  # noqa: F401 (relative_error is re-exported for the op tests)


class JobRunner:
    """One `convoy jobs` process: run(args) sends a command and returns (ok, stdout lines, error message)."""

    def __init__(self, binary):
        self.binary = binary
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, "jobs"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, bufsize=1)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)  # EOF: the process ended

    def alive(self):
        return self.proc.poll() is None

    def stderr_tail(self):
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-3000:]

    def run(self, args, timeout=300):
        assert all("\t" not in a and "\n" not in a for a in args), args
        self.proc.stdin.write("\t".join(map(str, args)) + "\n")
        self.proc.stdin.flush()
        out = []
        while True:
            try:
                line = self.lines.get(timeout=timeout)
            except queue.Empty:
                self.close()
                raise RuntimeError(f"{self.binary} jobs: no answer within {timeout} s to {args}")
            if line is None:
                raise RuntimeError(f"{self.binary} jobs died ({self.proc.wait()}) running {args}:\n{self.stderr_tail()}")
            if line == "job ok":
                return True, out, ""
            if line.startswith("job error: "):
                return False, out, line[len("job error: "):]
            out.append(line)

    def close(self):
        if self.alive():
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


_runners = {}


def runner(binary):
    """The live JobRunner of `binary` (restarted after a crash, which fails the test that caused it)."""
    r = _runners.get(binary)
    if r is None or not r.alive():
        r = _runners[binary] = JobRunner(binary)
    return r


@atexit.register
def _close_runners():
    for r in _runners.values():
        r.close()


def run_on(binary, model_path, inputs, *flags):
    """`<binary> run --model=... <flags>` on {name: float32 array}; the outputs in graph output order. Raises
    RuntimeError with the CLI's message when the run fails."""
    with tempfile.TemporaryDirectory() as tmp:
        args = ["run", f"--model={model_path}", f"--output_dir={tmp}", "--quiet", *flags]
        for i, (name, value) in enumerate(inputs.items()):
            path = pathlib.Path(tmp, f"input{i}.npy")
            np.save(path, np.ascontiguousarray(value, dtype=np.float32))
            args.append(f"--input={name}={path}")
        ok, out, error = runner(binary).run(args)
        if not ok:
            raise RuntimeError(f"convoy {' '.join(flags)} failed: {error}")
        count = sum(1 for line in out if line.startswith("wrote "))
        return [np.load(pathlib.Path(tmp, f"{i}.npy")) for i in range(count)]


def run_model(model_path, inputs, optimize=True):
    """Evaluates `model_path` with the reference interpreter; the outputs as a list in graph output order."""
    return run_on(cli_path(), model_path, inputs, "--engine=reference", f"--optimize={str(optimize).lower()}")


def inspect_model(model_path, optimize=True):
    """(0 or 1, the printed graph or the error message) of `convoy inspect --engine=reference`."""
    ok, out, error = runner(cli_path()).run(["inspect", "--engine=reference", f"--model={model_path}",
                                             f"--optimize={str(optimize).lower()}"], timeout=120)
    return (0 if ok else 1), "\n".join(out) + ("" if ok else f"\nconvoy: {error}")
