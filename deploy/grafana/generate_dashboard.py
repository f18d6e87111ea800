#!/usr/bin/env python3
"""Writes the Convoy Grafana dashboard (dashboards/convoy.json) from the metric list in deploy/metrics.yaml.

    python3 deploy/grafana/generate_dashboard.py           # rewrite dashboards/convoy.json
    python3 deploy/grafana/generate_dashboard.py --check   # exit 1 if the committed file is out of date

Panels name metrics by role ({m[request_latency]}), never by name, so a renamed metric is one edit in metrics.yaml.
The output is deterministic (sorted keys, fixed ids) so the test can compare it with the committed file.
"""
import argparse
import json
import pathlib
import sys

import yaml

HERE = pathlib.Path(__file__).resolve().parent
METRICS_FILE = HERE.parent / "metrics.yaml"
OUTPUT = HERE / "dashboards" / "convoy.json"
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
MODEL = 'model=~"$model"'

# (title, unit, kind, [(legend, PromQL template)], width). kind: timeseries | heatmap | stat.
PANELS = [
    ("Throughput (inferences/s)", "ops", "timeseries", [
        ("{{model}} inferences", 'sum by (model) (rate({m[inference_count]}{{%s}}[1m]))' % MODEL),
        ("{{model}} requests", 'sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % MODEL),
    ], 12),
    ("Throughput per replica (inferences/s)", "ops", "timeseries", [
        # One line per scraped server: shows how evenly a balancer spreads the load over scaled-out replicas.
        ("{{instance}}", 'sum by (instance) (rate({m[inference_count]}{{%s}}[1m]))' % MODEL),
    ], 12),
    ("Request latency p50 / p99", "s", "timeseries", [
        ("{{model}} p50", 'histogram_quantile(0.5, sum by (le, model) (rate({m[request_latency]}_bucket{{%s}}[1m])))' % MODEL),
        ("{{model}} p99", 'histogram_quantile(0.99, sum by (le, model) (rate({m[request_latency]}_bucket{{%s}}[1m])))' % MODEL),
    ], 12),
    ("Queue vs compute time p99", "s", "timeseries", [
        ("{{model}} queue p99", 'histogram_quantile(0.99, sum by (le, model) (rate({m[queue_latency]}_bucket{{%s}}[1m])))' % MODEL),
        ("{{model}} compute p99", 'histogram_quantile(0.99, sum by (le, model) (rate({m[compute_latency]}_bucket{{%s}}[1m])))' % MODEL),
    ], 12),
    ("Batch size distribution", "short", "heatmap", [
        ("{{le}}", 'sum by (le) (increase({m[batch_size]}_bucket{{%s}}[1m]))' % MODEL),
    ], 12),
    ("Average batch size", "short", "timeseries", [
        ("{{model}}", 'sum by (model) (rate({m[inference_count]}{{%s}}[1m])) / sum by (model) (rate({m[exec_count]}{{%s}}[1m]))' % (MODEL, MODEL)),
    ], 8),
    ("Queue depth (pending requests)", "short", "timeseries", [
        ("{{model}}", 'sum by (model) ({m[pending_requests]}{{%s}})' % MODEL),
    ], 8),
    ("Failures by reason", "reqps", "timeseries", [
        ("{{model}} {{reason}}", 'sum by (model, reason) (rate({m[request_failure]}{{%s}}[1m]))' % MODEL),
    ], 8),
    ("Time split per request (Triton counters)", "µs", "timeseries", [
        ("{{model}} queue", 'sum by (model) (rate({m[queue_duration_us]}{{%s}}[1m])) / sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % (MODEL, MODEL)),
        ("{{model}} input", 'sum by (model) (rate({m[compute_input_duration_us]}{{%s}}[1m])) / sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % (MODEL, MODEL)),
        ("{{model}} infer", 'sum by (model) (rate({m[compute_infer_duration_us]}{{%s}}[1m])) / sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % (MODEL, MODEL)),
        ("{{model}} output", 'sum by (model) (rate({m[compute_output_duration_us]}{{%s}}[1m])) / sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % (MODEL, MODEL)),
        ("{{model}} total", 'sum by (model) (rate({m[request_duration_us]}{{%s}}[1m])) / sum by (model) (rate({m[request_success]}{{%s}}[1m]))' % (MODEL, MODEL)),
    ], 12),
    ("Model load time p99", "s", "timeseries", [
        ("{{model}}", 'histogram_quantile(0.99, sum by (le, model) (rate({m[model_load_time]}_bucket{{%s}}[1h])))' % MODEL),
    ], 12),
    ("GPU memory", "bytes", "timeseries", [
        ("{{gpu_uuid}} used", 'max by (gpu_uuid) ({m[gpu_memory_used]})'),
        ("{{gpu_uuid}} total", 'max by (gpu_uuid) ({m[gpu_memory_total]})'),
    ], 8),
    ("GPU utilization", "percentunit", "timeseries", [
        ("{{gpu_uuid}}", 'avg by (gpu_uuid) ({m[gpu_utilization]})'),
    ], 8),
    ("Algorithm cache", "short", "timeseries", [
        ("hits/s", 'sum(rate({m[algorithm_cache_hits]}[5m]))'),
        ("misses/s", 'sum(rate({m[algorithm_cache_misses]}[5m]))'),
        ("hit ratio", 'sum(rate({m[algorithm_cache_hits]}[5m])) / (sum(rate({m[algorithm_cache_hits]}[5m])) + sum(rate({m[algorithm_cache_misses]}[5m])))'),
        ("tuning s/s", 'sum(rate({m[algorithm_tuning_seconds]}[5m]))'),
    ], 8),
    ("Batcher hold, return time and target", "s", "timeseries", [
        ("{{model}} hold of the latest batch", 'max by (model) ({m[batcher_wait]}{{%s}})' % MODEL),
        ("{{model}} client return time", 'max by (model) ({m[batcher_return_time]}{{%s}})' % MODEL),
        ("{{model}} latency target", 'max by (model) ({m[batcher_target_latency]}{{%s}})' % MODEL),
    ], 12),
    ("Batcher load estimates", "short", "timeseries", [
        ("{{model}} arrivals/s", 'sum by (model) ({m[batcher_arrivals]}{{%s}})' % MODEL),
        ("{{model}} clients", 'sum by (model) ({m[batcher_clients]}{{%s}})' % MODEL),
        ("{{model}} batch limit", 'max by (model) ({m[batcher_batch_limit]}{{%s}})' % MODEL),
    ], 12),
]


def load_metric_names(path=METRICS_FILE):
    """role -> metric name, from deploy/metrics.yaml."""
    entries = yaml.safe_load(path.read_text())["metrics"]
    return {e["role"]: e["name"] for e in entries}


def panel(index, x, y, title, unit, kind, targets, width, names):
    p = {
        "id": index + 1,
        "title": title,
        "type": kind,
        "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": width, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr.format(m=names),
             "legendFormat": legend, **({"format": "heatmap"} if kind == "heatmap" else {})}
            for i, (legend, expr) in enumerate(targets)
        ],
    }
    if kind == "heatmap":
        p["options"] = {"calculate": False, "yAxis": {"unit": "short"}, "cellGap": 1}
    return p


def build_dashboard(names):
    panels, x, y = [], 0, 0
    for i, (title, unit, kind, targets, width) in enumerate(PANELS):
        if x + width > 24:
            x, y = 0, y + 8
        panels.append(panel(i, x, y, title, unit, kind, targets, width, names))
        x += width
    return {
        "uid": "convoy-overview",
        "title": "Convoy inference server",
        "tags": ["convoy", "inference"],
        "timezone": "browser",
        "schemaVersion": 39,
        "version": 1,
        "editable": True,
        "refresh": "10s",
        "time": {"from": "now-30m", "to": "now"},
        "templating": {"list": [
            {"name": "datasource", "type": "datasource", "query": "prometheus", "label": "Data source",
             "current": {"text": "Prometheus", "value": "prometheus"}},
            {"name": "model", "type": "query", "label": "Model", "datasource": DATASOURCE,
             "query": "label_values(%s, model)" % names["inference_count"], "includeAll": True, "multi": True,
             "allValue": ".*", "refresh": 2, "current": {"text": "All", "value": "$__all"}},
        ]},
        "panels": panels,
    }


def render(names=None):
    return json.dumps(build_dashboard(names or load_metric_names()), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if dashboards/convoy.json is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUTPUT.exists() or OUTPUT.read_text() != text:
            print(f"{OUTPUT} is out of date: run python3 deploy/grafana/generate_dashboard.py", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
