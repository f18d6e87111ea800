#!/usr/bin/env python3
"""Segments a photo with a model served by Convoy (or any KServe v2 / Triton gRPC server) and draws the answer.

  tools/segment.py IMAGE [--url=localhost:8001] [--model=lraspp_mobilenet_v3] [--overlay=OUT.png] [--mask=MASK.png]
                   [--send=pixels|photo] [--crop_fraction=1.0] [--labels=FILE] [--alpha=0.5]

The photo is turned to RGB (following its EXIF orientation), centre-cropped to the model's aspect ratio keeping
`--crop_fraction` of the limiting side and resized to the model's input (bicubic), exactly as the server prepares a
photo for an `encoded_image` input. `--send=pixels` (the default) sends those UINT8 [H, W, 3] pixels; `--send=photo`
sends the file as it is, one BYTES element, for the server to decode (the model's config must declare
`encoded_image`). The model answers a per-pixel class map (an output declared `class_map: true`: UINT8 or INT32
[H, W]) or the class scores [C, H, W], whose argmax this script takes.

It writes the prepared photo with each pixel tinted by its class's colour (PASCAL VOC's palette; `--alpha` is the
tint's weight) to `--overlay` (default: IMAGE's name with `.segmented.png`), optionally the class map alone as an
indexed PNG (`--mask`, same palette), and prints the share of the picture each class covers, largest first, with the
labels of `--labels` (default: model_repo/<model>/labels.txt when it is there). Exit status 0 on success, 1 when the
request failed, 2 for a usage problem (unreadable image, server unreachable, model not ready or not an image model).
"""
import argparse
import pathlib
import sys
import time

import classify  # tools/classify.py: the photo preparation and the client plumbing both tools share
from classify import REPO_ROOT, fail


def parse_args(argv):
    parser = argparse.ArgumentParser(prog="segment.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("image", metavar="IMAGE", help="a JPEG or PNG file")
    parser.add_argument("--url", default="localhost:8001", help="the server's gRPC address (default: %(default)s)")
    parser.add_argument("--model", default="lraspp_mobilenet_v3", help="model name (default: %(default)s)")
    parser.add_argument("--overlay", type=pathlib.Path, default=None,
                        help="where to write the tinted photo (default: IMAGE with .segmented.png)")
    parser.add_argument("--mask", type=pathlib.Path, default=None, help="also write the class map as an indexed PNG")
    parser.add_argument("--send", choices=["pixels", "photo"], default="pixels",
                        help="send the prepared pixels, or the file for the server to decode (default: %(default)s)")
    parser.add_argument("--crop_fraction", type=float, default=1.0,
                        help="share of the limiting side the centred crop keeps, as in the model's encoded_image "
                             "config (default: %(default)s)")
    parser.add_argument("--labels", type=pathlib.Path, default=None, help="class names, one per line")
    parser.add_argument("--alpha", type=float, default=0.5, help="weight of the class colour (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the answer")
    args = parser.parse_args(argv)
    if not 0.0 < args.crop_fraction <= 1.0:
        parser.error(f"--crop_fraction must be in (0, 1], got {args.crop_fraction}")
    if not 0.0 <= args.alpha <= 1.0:
        parser.error(f"--alpha must be in [0, 1], got {args.alpha}")
    if args.overlay is None:
        args.overlay = pathlib.Path(args.image).with_suffix(".segmented.png")
    if args.labels is None:
        default = REPO_ROOT / "model_repo" / args.model / "labels.txt"
        args.labels = default if default.is_file() else None
    return args


def voc_palette(classes):
    """PASCAL VOC's colour map: class k's bits spread over the high bits of R, G and B. [classes, 3] UINT8."""
    import numpy as np
    palette = np.zeros((classes, 3), np.uint8)
    for k in range(classes):
        c, r, g, b = k, 0, 0, 0
        for shift in range(7, -1, -1):
            r |= (c & 1) << shift
            g |= ((c >> 1) & 1) << shift
            b |= ((c >> 2) & 1) << shift
            c >>= 3
        palette[k] = (r, g, b)
    return palette


def class_map_output(metadata, height, width):
    """(output name, True if it is already a class map) of the model's segmentation output; exits otherwise."""
    for o in metadata.outputs:
        shape = [int(d) for d in o.shape]
        if o.datatype in ("UINT8", "INT32", "INT64") and shape[-2:] == [height, width] and len(shape) == 3:
            return o.name, True
    for o in metadata.outputs:
        shape = [int(d) for d in o.shape]
        if o.datatype in ("FP32", "FP16") and len(shape) == 4 and shape[-2:] == [height, width]:
            return o.name, False
    described = ", ".join(f"{o.name} {o.datatype} {list(o.shape)}" for o in metadata.outputs)
    fail(f"model '{metadata.name}' has no class map [N, {height}, {width}] or scores [N, C, {height}, {width}] "
         f"output (it has {described})")


def segment(client, args):
    import numpy as np
    import tritonclient.grpc as grpcclient
    from PIL import Image
    from tritonclient.utils import InferenceServerException
    input_name, height, width, metadata = classify.model_input(client, args.model)
    output, is_class_map = class_map_output(metadata, height, width)
    pixels = classify.load_image(args.image, height, width, args.crop_fraction)
    if args.send == "photo":
        tensor = grpcclient.InferInput(input_name, [1], "BYTES")
        tensor.set_data_from_numpy(np.array([pathlib.Path(args.image).read_bytes()], dtype=np.object_))
    else:
        tensor = grpcclient.InferInput(input_name, [1, height, width, 3], "UINT8")
        tensor.set_data_from_numpy(pixels[None])
    sent = time.monotonic()
    try:
        result = client.infer(args.model, [tensor], outputs=[grpcclient.InferRequestedOutput(output)],
                              client_timeout=args.timeout)
    except InferenceServerException as e:
        print(f"{args.image}: FAILED: {e.message()}")
        return 1
    seconds = time.monotonic() - sent
    answer = result.as_numpy(output)[0]
    classes = answer.astype(np.int64) if is_class_map else np.argmax(answer, axis=0)
    labels = args.labels.read_text().splitlines() if args.labels else []
    count = max(int(classes.max()) + 1, len(labels), 1)
    palette = voc_palette(max(count, 256))
    tinted = (1 - args.alpha) * pixels.astype(np.float32) + args.alpha * palette[classes].astype(np.float32)
    Image.fromarray(np.clip(np.rint(tinted), 0, 255).astype(np.uint8)).save(args.overlay)
    if args.mask:
        mask = Image.fromarray(classes.astype(np.uint8), mode="P")
        mask.putpalette(palette[:256].reshape(-1).tolist())
        mask.save(args.mask)
    print(f"{args.image}: ({args.model}, {height}x{width} {'class map' if is_class_map else 'scores'}, "
          f"{seconds * 1000:.0f} ms) -> {args.overlay}{f' and {args.mask}' if args.mask else ''}")
    values, counts = np.unique(classes, return_counts=True)
    for k, n in sorted(zip(values.tolist(), counts.tolist()), key=lambda kn: (-kn[1], kn[0])):
        label = labels[k] if k < len(labels) else "(no label)"
        print(f"  {100.0 * n / classes.size:5.1f}%  {label}  [class {k}]")
    return 0


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    classify.import_client_libraries()
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    client = grpcclient.InferenceServerClient(args.url)
    try:
        client.is_server_live()
    except InferenceServerException as e:
        fail(f"cannot reach a server at {args.url} ({e.message()}); is it running? (tools/run_server.sh)")
    if not pathlib.Path(args.image).is_file():
        fail(f"cannot read image {args.image}: no such file")
    return segment(client, args)


if __name__ == "__main__":
    sys.exit(main())
