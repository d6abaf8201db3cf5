#!/usr/bin/env python3
"""Summarises bench/vs-cyclictest.sh output: median, p99, CPU time per 1000 samples, sweep."""
import glob
import json
import os
import statistics
import sys


def read_histfile(path):
    """Pooled per-µs counts over all columns of a cyclictest-format histogram, plus overflows."""
    counts = {}
    overflows = 0
    with open(path) as handle:
        for line in handle:
            if line.startswith("# Histogram Overflows:"):
                overflows = sum(int(value) for value in line.split(":")[1].split())
            if line.startswith("#") or not line.strip():
                continue
            fields = line.split()
            bucket = int(fields[0])
            counts[bucket] = counts.get(bucket, 0) + sum(int(value) for value in fields[1:])
    return counts, overflows


def quantile(counts, overflows, q):
    total = sum(counts.values()) + overflows
    rank = q * total
    seen = 0
    for bucket in sorted(counts):
        seen += counts[bucket]
        if seen >= rank:
            return bucket
    return float("inf")


def cpu_seconds(path):
    """task-clock from `perf stat -x,` output (milliseconds), as seconds."""
    with open(path) as handle:
        for line in handle:
            fields = line.strip().split(",")
            if len(fields) > 2 and fields[2] == "task-clock":
                return float(fields[0]) / 1000.0
    raise ValueError(f"{path}: no task-clock line")


def main(directory):
    rows = []
    pair_ratios = {}
    for load in ("idle", "stress"):
        # CPU cost rtlab ÷ cyclictest of each round: the two ran back to back under the same load.
        ratios = []
        for hist in sorted(glob.glob(os.path.join(directory, f"rtlab-{load}-*.hist"))):
            other = hist.replace(f"{os.sep}rtlab-", f"{os.sep}cyclictest-")
            if not os.path.exists(other):
                continue
            costs = []
            for path in (hist, other):
                counts, overflows = read_histfile(path)
                costs.append(cpu_seconds(path.replace(".hist", ".time")) / (sum(counts.values()) + overflows))
            ratios.append(costs[0] / costs[1])
        pair_ratios[load] = ratios
    for load in ("idle", "stress"):
        per_tool = {}
        for tool in ("cyclictest", "rtlab"):
            medians, p99s, costs = [], [], []
            for hist in sorted(glob.glob(os.path.join(directory, f"{tool}-{load}-*.hist"))):
                counts, overflows = read_histfile(hist)
                samples = sum(counts.values()) + overflows
                medians.append(quantile(counts, overflows, 0.5))
                p99s.append(quantile(counts, overflows, 0.99))
                cpu = cpu_seconds(hist.replace(".hist", ".time"))
                costs.append(cpu / samples * 1000 * 1e6)  # µs of CPU per 1000 samples
            per_tool[tool] = (statistics.median(medians), statistics.median(p99s), statistics.median(costs), len(medians))
        rows.append((load, per_tool))
    print(f"runs: {directory}")
    print("| load | tool | runs | median (µs) | p99 (µs) | CPU per 1000 samples (µs) |")
    print("|---|---|---|---|---|---|")
    for load, per_tool in rows:
        for tool, (median, p99, cost, runs) in per_tool.items():
            print(f"| {load} | {tool} | {runs} | {median} | {p99} | {cost:.0f} |")
    print()
    print("| load | median ratio rtlab/cyclictest | p99 ratio | CPU cost ratio (medians) | CPU cost ratio per pair | median of pairs |")
    print("|---|---|---|---|---|---|")
    for load, per_tool in rows:
        c, r = per_tool["cyclictest"], per_tool["rtlab"]
        ratio = lambda a, b: f"{a / b:.2f}" if b else "n/a"
        pairs = pair_ratios[load]
        listed = ", ".join(f"{value:.2f}" for value in pairs) or "n/a"
        middle = f"{statistics.median(pairs):.2f}" if pairs else "n/a"
        print(f"| {load} | {ratio(r[0], c[0])} | {ratio(r[1], c[1])} | {ratio(r[2], c[2])} | {listed} | {middle} |")
    print()
    print("| period | rtlab samples | rtlab missed (counted) | rtlab lost | rtlab worst (µs) | cyclictest samples | cyclictest periods skipped silently |")
    print("|---|---|---|---|---|---|---|")
    for period_us in (1000, 500, 200, 100, 50, 20):
        path = os.path.join(directory, f"sweep-{period_us}us.json")
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            record = json.load(handle)
        wakeups = [s for s in record["series"] if s["metric"] == "wakeup"]
        expected = len(wakeups) * record["duration_ns"] // (period_us * 1000)
        cyclic = "n/a"
        cyclic_skipped = "n/a"
        hist = os.path.join(directory, f"sweep-cyclictest-{period_us}us.hist")
        if os.path.exists(hist):
            counts, overflows = read_histfile(hist)
            cyclic_samples = sum(counts.values()) + overflows
            cyclic = str(cyclic_samples)
            cyclic_skipped = str(max(0, expected - cyclic_samples))
        print(
            f"| {period_us} µs | {sum(s['count'] for s in wakeups)} | {sum(s['missed'] for s in wakeups)}"
            f" | {sum(s['lost'] for s in wakeups)} | {max(s['max_ns'] for s in wakeups) / 1000:.1f}"
            f" | {cyclic} | {cyclic_skipped} |"
        )


if __name__ == "__main__":
    main(sys.argv[1])
