#!/usr/bin/env python3
"""Checks a running Convoy server from outside, as a user would: what deploy/test_image.sh runs against a container.

    deploy/check_served.py --url=HOST:8001 --metrics_url=http://HOST:8002/metrics [--model_repo=model_repo]
                           [--cli=PATH/convoy] [--photos=DIR]

1. the server is live and ready, and every model of --model_repo is READY in the repository index;
2. simple_cnn answers a batch of fresh random images: [N, 10] probabilities, finite, every row summing to 1; the
   classification extension's top-3 "score:index:label" strings name the same classes as the raw scores; with --cli
   (the `convoy` tool built on this machine), `convoy run` on the same input gives the same probabilities;
3. when the tree has the photo classifier (tools/classify.py and model_repo/efficientnet_lite0), classify.py sends
   the sample photos through the server: chelsea must come out a cat, coffee an espresso or cup;
4. /metrics counts what was sent: nv_inference_count and nv_inference_request_success of simple_cnn grow by exactly
   the inferences and requests of step 2.
One line per check; exits 0 when every check passes, 1 otherwise. Needs numpy and tritonclient[grpc] (.venv).
"""
import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import urllib.request

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

# Expected top-1 of the sample photos (scikit-image's data files), as words that must appear in the class name.
PHOTO_CLASSES = {"chelsea.png": ("cat",), "coffee.png": ("espresso", "cup", "coffee")}


class Checks:
    def __init__(self):
        self.failed = []
        self.passed = 0

    def check(self, name, ok, detail=""):
        print(f"  {'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)
        if ok:
            self.passed += 1
        else:
            self.failed.append(name)
        return ok


def scrape(metrics_url):
    """{(metric name, frozenset of label pairs): value} from the Prometheus text format."""
    text = urllib.request.urlopen(metrics_url, timeout=10).read().decode()
    samples = {}
    for line in text.splitlines():
        m = re.match(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)', line)
        if not m or line.startswith("#"):
            continue
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        samples[(m.group(1), labels)] = float(m.group(3))
    return samples


def model_counter(samples, metric, model):
    return sum(v for (name, labels), v in samples.items() if name == metric and ("model", model) in labels)


def repository_models(model_repo):
    return sorted(p.parent.name for p in pathlib.Path(model_repo).glob("*/config.yaml"))


def check_simple_cnn(checks, client, grpcclient, np, cli):
    batch = 4
    rng = np.random.default_rng()
    images = rng.random((batch, 3, 32, 32), dtype=np.float32)
    x = grpcclient.InferInput("images", list(images.shape), "FP32")
    x.set_data_from_numpy(images)
    raw = client.infer("simple_cnn", [x], outputs=[grpcclient.InferRequestedOutput("probabilities")])
    probs = raw.as_numpy("probabilities")
    checks.check("simple_cnn answers [4, 10] FP32", probs is not None and probs.shape == (batch, 10)
                 and probs.dtype == np.float32, f"got {None if probs is None else (probs.shape, probs.dtype)}")
    if probs is None or probs.shape != (batch, 10):
        return 1, batch
    # Softmax output in FP32: each row sums to 1 within a few ulps of the 10 terms.
    sums = probs.sum(axis=1)
    checks.check("probabilities finite, rows sum to 1 (tolerance 1e-5)",
                 bool(np.isfinite(probs).all() and np.allclose(sums, 1.0, atol=1e-5)), f"row sums {sums}")
    checks.check("different images give different answers", not np.allclose(probs[0], probs[1:], rtol=0, atol=0))
    top = client.infer("simple_cnn", [x], outputs=[grpcclient.InferRequestedOutput("probabilities", class_count=3)])
    strings = top.as_numpy("probabilities")
    indexes = [[int(s.decode().split(":")[1]) for s in row] for row in strings]
    expected = [[int(i) for i in np.argsort(-row, kind="stable")[:3]] for row in probs]
    checks.check("classification extension top-3 = top-3 of the raw scores", indexes == expected,
                 f"{indexes} vs {expected}")
    if cli:
        with tempfile.TemporaryDirectory() as tmp:
            np.save(f"{tmp}/x.npy", images)
            run = subprocess.run([cli, "run", f"--model={REPO_ROOT / 'model_repo' / 'simple_cnn'}", "--device=cpu",
                                  f"--input=images={tmp}/x.npy", f"--output=probabilities={tmp}/y.npy", "--quiet"],
                                 capture_output=True, text=True)
            if checks.check("convoy run on this machine", run.returncode == 0, run.stderr.strip()[-300:]):
                local = np.load(f"{tmp}/y.npy")
                # Same kernels, but the server may pick another algorithm for a batch (tuned or batched
                # differently): FP32 summation order differs, so 1e-5 absolute on probabilities in [0, 1].
                err = float(np.abs(local - probs).max())
                checks.check("served probabilities = convoy run's (|diff| <= 1e-5)", err <= 1e-5, f"max |diff| {err:.2e}")
    return 2, 2 * batch


def sample_photos(photos):
    """{file name: path} of the sample photos: --photos, else scikit-image's bundled data folder."""
    folder = photos
    if not folder:
        try:
            import skimage.data
            folder = os.path.dirname(skimage.data.__file__)
        except ImportError:
            return {}
    return {name: os.path.join(folder, name) for name in PHOTO_CLASSES if os.path.exists(os.path.join(folder, name))}


def check_photos(checks, url, photos):
    classify = REPO_ROOT / "tools" / "classify.py"
    model = REPO_ROOT / "model_repo" / "efficientnet_lite0" / "config.yaml"
    if not (classify.exists() and model.exists()):
        print(f"  --   photo classification not checked: this tree has no "
              f"{'tools/classify.py' if not classify.exists() else 'model_repo/efficientnet_lite0'} yet")
        return
    found = sample_photos(photos)
    checks.check("sample photos found (chelsea.png, coffee.png)", len(found) == len(PHOTO_CLASSES),
                 f"found {sorted(found)}; pass --photos=DIR")
    for name, path in sorted(found.items()):
        run = subprocess.run([sys.executable, str(classify), path, f"--url={url}", "--model=efficientnet_lite0",
                              "--top=1"], capture_output=True, text=True)
        out = run.stdout.strip()
        print("      " + out.replace("\n", "\n      "))
        words = PHOTO_CLASSES[name]
        checks.check(f"classify.py {name}: top-1 names one of {words}",
                     run.returncode == 0 and any(w in out.lower() for w in words),
                     run.stderr.strip()[-300:] if run.returncode else "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 2)[2])
    parser.add_argument("--url", required=True, help="gRPC address HOST:PORT")
    parser.add_argument("--metrics_url", required=True, help="the /metrics URL")
    parser.add_argument("--model_repo", default=str(REPO_ROOT / "model_repo"), help="the repository it serves")
    parser.add_argument("--cli", default="", help="the convoy tool, to compare simple_cnn's answers with")
    parser.add_argument("--photos", default="", help="folder with chelsea.png and coffee.png (default: scikit-image's)")
    args = parser.parse_args()

    import numpy as np
    import tritonclient.grpc as grpcclient

    checks = Checks()
    client = grpcclient.InferenceServerClient(args.url)
    checks.check("server live and ready", client.is_server_live() and client.is_server_ready())
    expected = repository_models(args.model_repo)
    index = {m.name: m.state for m in client.get_model_repository_index().models}
    checks.check(f"every model of the repository READY ({len(expected)})",
                 all(index.get(m) == "READY" for m in expected), f"index {index}, expected {expected}")
    before = scrape(args.metrics_url)
    requests, inferences = check_simple_cnn(checks, client, grpcclient, np, args.cli)
    check_photos(checks, args.url, args.photos)
    after = scrape(args.metrics_url)
    for metric, sent in (("nv_inference_count", inferences), ("nv_inference_request_success", requests)):
        grew = model_counter(after, metric, "simple_cnn") - model_counter(before, metric, "simple_cnn")
        checks.check(f"/metrics {metric}{{model=\"simple_cnn\"}} grew by {sent}", grew == sent, f"grew by {grew:g}")
    print(f"  {checks.passed} checks passed, {len(checks.failed)} failed")
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
