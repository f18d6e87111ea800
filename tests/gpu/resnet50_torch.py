#!/usr/bin/env python3
"""ResNet-50 for the GPU check's whole-model phase, and PyTorch's numbers on it.

  resnet50_torch.py write --dir DIR [--width 64 --image 224 --blocks 3,4,6,3 --classes 1000 --seed 0]
      Builds torchvision's ResNet-50 (v1.5: the stride in the 3x3 conv; defined here, so torchvision is not needed)
      with seeded random weights and random batch-norm statistics, and writes DIR/model.yaml + DIR/model.safetensors
      (a Convoy YAML graph, docs/model_formats.md), DIR/reference_input.bin (FP32, [2, 3, image, image]) and
      DIR/reference_logits.bin (PyTorch's FP32 logits of that input: on CUDA with TF32 off where there is a GPU, else
      on the CPU). tests/gpu/model_bench.cc loads the model through ModelRuntime and compares with these logits.
      Smaller --width/--image/--blocks make the tiny model the emulated CI run uses.

  resnet50_torch.py bench --dir DIR [--batches 1,8,32,64 --compile_budget_s 60]
      On the GPU, in FP16 channels_last with torch.backends.cudnn.benchmark = True: eager, then torch.compile while
      its budget lasts (each batch size compiles anew; sizes past the budget are reported SKIP). Per batch size:
      images/s on device tensors (CUDA events around back-to-back iterations) and host->host (pinned FP32 input
      copied in, logits copied out, as Convoy's ModelInstance::Run is timed). Prints one line per measurement.

Works with PyTorch 1.13 (Debian, CPU: `write` in CI) through 2.x (the GPU machine's 2.11).
"""
import argparse
import json
import os
import struct
import sys
import time

import torch
from torch import nn


class Bottleneck(nn.Module):
    def __init__(self, inplanes, width, stride, downsample):
        super().__init__()
        self.conv1 = nn.Conv2d(inplanes, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, width * 4, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(width * 4)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        y = self.bn3(self.conv3(y))
        return self.relu(y + identity)


class ResNet(nn.Module):
    def __init__(self, width=64, blocks=(3, 4, 6, 3), classes=1000):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, stride=2, padding=1)
        layers, inplanes = [], width
        for stage, count in enumerate(blocks):
            planes = width * 2 ** stage
            stride = 1 if stage == 0 else 2
            stage_blocks = []
            for b in range(count):
                downsample = None
                if b == 0 and (stride != 1 or inplanes != planes * 4):
                    downsample = nn.Sequential(nn.Conv2d(inplanes, planes * 4, 1, stride=stride, bias=False),
                                               nn.BatchNorm2d(planes * 4))
                stage_blocks.append(Bottleneck(inplanes, planes, stride if b == 0 else 1, downsample))
                inplanes = planes * 4
            layers.append(nn.Sequential(*stage_blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(inplanes, classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def build(args):
    torch.manual_seed(args.seed)
    model = ResNet(args.width, tuple(int(b) for b in args.blocks.split(",")), args.classes)
    with torch.no_grad():
        for m in model.modules():  # random statistics, so batch-norm folding is exercised on real numbers
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model.eval()


# ---- write: the model as a Convoy YAML graph --------------------------------------------------------------------


def tensor_bytes(t):
    t = t.detach().to(torch.float32).contiguous().cpu()
    try:
        return t.numpy().tobytes()
    except Exception:  # a PyTorch without numpy
        return bytes(t.untyped_storage())


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = tensor_bytes(t)
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


class GraphWriter:
    def __init__(self):
        self.layers, self.weights = [], {}

    def conv(self, name, source, conv):
        self.layers.append(f"  - {{name: {name}, op: conv, input: {source}, filters: {conv.out_channels}, "
                           f"kernel: {conv.kernel_size[0]}, stride: {conv.stride[0]}, padding: {conv.padding[0]}, "
                           f"bias: false}}")
        self.weights[f"{name}.weight"] = conv.weight
        return name

    def bn(self, name, source, bn):
        self.layers.append(f"  - {{name: {name}, op: batch_norm, input: {source}, epsilon: {bn.eps}}}")
        for key, value in (("scale", bn.weight), ("bias", bn.bias), ("mean", bn.running_mean),
                           ("var", bn.running_var)):
            self.weights[f"{name}.{key}"] = value
        return name

    def layer(self, text, name):
        self.layers.append("  - " + text)
        return name


def write_graph(model, path, image):
    g = GraphWriter()
    x = g.bn("bn1", g.conv("conv1", "images", model.conv1), model.bn1)
    x = g.layer(f"{{name: relu1, op: activation, input: {x}, function: relu}}", "relu1")
    x = g.layer(f"{{name: maxpool, op: max_pool, input: {x}, kernel: 3, stride: 2, padding: 1}}", "maxpool")
    for s, stage in enumerate([model.layer1, model.layer2, model.layer3, model.layer4]):
        for b, block in enumerate(stage):
            p = f"s{s + 1}b{b}"
            y = g.bn(f"{p}_bn1", g.conv(f"{p}_conv1", x, block.conv1), block.bn1)
            y = g.layer(f"{{name: {p}_relu1, op: activation, input: {y}, function: relu}}", f"{p}_relu1")
            y = g.bn(f"{p}_bn2", g.conv(f"{p}_conv2", y, block.conv2), block.bn2)
            y = g.layer(f"{{name: {p}_relu2, op: activation, input: {y}, function: relu}}", f"{p}_relu2")
            y = g.bn(f"{p}_bn3", g.conv(f"{p}_conv3", y, block.conv3), block.bn3)
            identity = x
            if block.downsample is not None:
                identity = g.bn(f"{p}_down_bn", g.conv(f"{p}_down", x, block.downsample[0]), block.downsample[1])
            y = g.layer(f"{{name: {p}_add, op: add, inputs: [{y}, {identity}]}}", f"{p}_add")
            x = g.layer(f"{{name: {p}_out, op: activation, input: {y}, function: relu}}", f"{p}_out")
    x = g.layer(f"{{name: pool, op: global_avg_pool, input: {x}}}", "pool")
    x = g.layer(f"{{name: flatten, op: flatten, input: {x}}}", "flatten")
    g.layers.append(f"  - {{name: logits, op: dense, input: {x}, units: {model.fc.out_features}}}")
    g.weights["logits.weight"], g.weights["logits.bias"] = model.fc.weight, model.fc.bias
    write_safetensors(os.path.join(path, "model.safetensors"), g.weights)
    with open(os.path.join(path, "model.yaml"), "w") as f:
        f.write("# ResNet-50 (torchvision v1.5 shape, random weights) written by tests/gpu/resnet50_torch.py.\n")
        f.write(f"name: resnet50\nweights: model.safetensors\ninputs:\n  - name: images\n"
                f"    shape: [3, {image}, {image}]\noutputs: [logits]\nlayers:\n")
        f.write("\n".join(g.layers) + "\n")


def command_write(args):
    os.makedirs(args.dir, exist_ok=True)
    model = build(args)
    write_graph(model, args.dir, args.image)
    torch.manual_seed(args.seed + 1)
    x = torch.rand(2, 3, args.image, args.image) * 2 - 1
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        logits = model.to(device)(x.to(device)).float().cpu()
    with open(os.path.join(args.dir, "reference_input.bin"), "wb") as f:
        f.write(tensor_bytes(x))
    with open(os.path.join(args.dir, "reference_logits.bin"), "wb") as f:
        f.write(tensor_bytes(logits))
    print(f"resnet50_torch: wrote {args.dir} (width {args.width}, blocks {args.blocks}, {args.image}x{args.image}, "
          f"reference logits from PyTorch {torch.__version__} FP32 on {device})", flush=True)


# ---- bench: PyTorch on the GPU -----------------------------------------------------------------------------------


def time_batch(model, batch, image, iterations):
    """(device-tensor ms per batch, host->host ms per batch) for one batch size, after a warm-up."""
    x = torch.randn(batch, 3, image, image, device="cuda", dtype=torch.half).to(memory_format=torch.channels_last)
    host = torch.randn(batch, 3, image, image).pin_memory()
    with torch.inference_mode():
        for _ in range(5):  # cudnn.benchmark times its algorithms on the first call of each shape
            model(x)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iterations):
            model(x)
        end.record()
        end.synchronize()
        device_ms = start.elapsed_time(end) / iterations
        began = time.perf_counter()
        for _ in range(iterations):
            xi = host.to("cuda", non_blocking=True).half().to(memory_format=torch.channels_last)
            model(xi).float().cpu()
        host_ms = (time.perf_counter() - began) * 1000 / iterations
    return device_ms, host_ms


def report(kind, batch, device_ms, host_ms):
    print(f"torch    resnet50 fp16 channels_last {kind:8s} batch {batch:3d}: {device_ms:8.3f} ms/batch "
          f"{batch * 1000 / device_ms:9.1f} images/s (device tensors); host->host {batch * 1000 / host_ms:9.1f} "
          f"images/s", flush=True)


def command_bench(args):
    if not torch.cuda.is_available():
        print("SKIP torch resnet50: no CUDA device visible to PyTorch", flush=True)
        return 0
    torch.backends.cudnn.benchmark = True
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name(0)}",
          flush=True)
    model = build(args).cuda().half().to(memory_format=torch.channels_last).eval()
    batches = [int(b) for b in args.batches.split(",")]
    for batch in batches:
        report("eager", batch, *time_batch(model, batch, args.image, max(5, 256 // batch)))
    if not hasattr(torch, "compile"):
        print("SKIP torch.compile: this PyTorch has none", flush=True)
        return 0
    began = time.perf_counter()
    compiled = torch.compile(model)
    for batch in batches:
        spent = time.perf_counter() - began
        if spent > args.compile_budget_s:
            print(f"SKIP torch.compile batch {batch}: its {args.compile_budget_s:.0f} s budget is spent", flush=True)
            continue
        try:
            t0 = time.perf_counter()
            device_ms, host_ms = time_batch(compiled, batch, args.image, max(5, 256 // batch))
            report("compiled", batch, device_ms, host_ms)
            print(f"  (torch.compile batch {batch}: {time.perf_counter() - t0:.1f} s including compilation)",
                  flush=True)
        except Exception as e:  # noqa: BLE001 - an inductor failure is a result to report, not a crash
            print(f"SKIP torch.compile batch {batch}: {type(e).__name__}: {str(e).splitlines()[0][:200]}", flush=True)
            break
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["write", "bench"])
    parser.add_argument("--dir", required=True)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--image", type=int, default=224)
    parser.add_argument("--blocks", default="3,4,6,3")
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batches", default="1,8,32,64")
    parser.add_argument("--compile_budget_s", type=float, default=60)
    args = parser.parse_args()
    return command_write(args) if args.command == "write" else command_bench(args)


if __name__ == "__main__":
    sys.exit(main() or 0)
