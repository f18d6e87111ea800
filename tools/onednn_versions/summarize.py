#!/usr/bin/env python3
"""Per-layer summary of a `PER_LAYER=1 tools/onednn_versions/run.sh` log: each layer's fastest time over the rounds
for each build and mode, the weighted sums, and 3.2 over 2.6 (ideal mode) per layer.

  PER_LAYER=1 ZP=0 ROUNDS=5 tools/onednn_versions/run.sh 2 "1 8" > run.log; tools/onednn_versions/summarize.py < run.log
"""
import argparse
import collections
import re
import sys


def main():
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    best = collections.defaultdict(lambda: float("inf"))
    impl, count, pending = {}, {}, []
    for line in sys.stdin:
        m = re.match(r"\s+(c\d+ k\d+ r\d+ h\d+ s\d+) x(\d+): ([\d.]+) ms\s+(\S+)", line)
        if m:
            pending.append((m.group(1), int(m.group(2)), float(m.group(3)), m.group(4)))
            continue
        m = re.match(r"oneDNN (\S+) mode (\S+) batch (\d+)", line)
        if m:
            run = (m.group(1), m.group(2), int(m.group(3)))
            for layer, uses, ms, name in pending:
                best[run + (layer,)] = min(best[run + (layer,)], ms)
                impl[run + (layer,)] = name
                count[layer] = uses
            pending = []
    batches = sorted({key[2] for key in best})
    for batch in batches:
        old, new = ("2.6", "ideal", batch), ("3.2", "ideal", batch)
        layers = [layer for layer in count if old + (layer,) in best and new + (layer,) in best]
        if not layers:
            continue
        total_old = sum(best[old + (layer,)] * count[layer] for layer in layers)
        total_new = sum(best[new + (layer,)] * count[layer] for layer in layers)
        print(f"batch {batch}: each layer's fastest over the rounds, times its use count: 2.6 {total_old:.3f} ms, "
              f"3.2 {total_new:.3f} ms, 3.2 / 2.6 {total_new / total_old:.2f}")
        for layer in layers:
            a, b = best[old + (layer,)], best[new + (layer,)]
            print(f"  {layer} x{count[layer]}: 2.6 {a:.3f} {impl[old + (layer,)]:<34} 3.2 {b:.3f} "
                  f"{impl[new + (layer,)]:<30} {b / a:.2f}")


if __name__ == "__main__":
    main()
