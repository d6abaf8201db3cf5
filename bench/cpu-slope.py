#!/usr/bin/env python3
"""Summarises bench/cpu-slope.sh: CPU per sample at the margin and the fixed cost, per tool."""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarise import cpu_seconds, read_histfile  # noqa: E402


def run(directory, tool, load, round_, seconds):
    stem = os.path.join(directory, f"{tool}-{load}-{round_}-{seconds}s")
    counts, overflows = read_histfile(stem + ".hist")
    return cpu_seconds(stem + ".time"), sum(counts.values()) + overflows


def main(directory, short, long):
    rounds = sorted({int(os.path.basename(path).split("-")[2])
                     for path in glob.glob(os.path.join(directory, "rtlab-idle-*-*s.hist"))})
    print(f"runs: {directory} ({short} s and {long} s per tool and round)")
    print("| load | tool | CPU per 1000 samples, margin (µs) | fixed cost (ms) | whole long run per 1000 samples (µs) |")
    print("|---|---|---|---|---|")
    ratios = {}
    for load in ("idle", "stress"):
        slopes = {"cyclictest": [], "rtlab": []}
        fixed = {"cyclictest": [], "rtlab": []}
        whole = {"cyclictest": [], "rtlab": []}
        for round_ in rounds:
            for tool in slopes:
                cpu_short, samples_short = run(directory, tool, load, round_, short)
                cpu_long, samples_long = run(directory, tool, load, round_, long)
                slope = (cpu_long - cpu_short) / (samples_long - samples_short)
                slopes[tool].append(slope)
                fixed[tool].append(cpu_short - slope * samples_short)
                whole[tool].append(cpu_long / samples_long)
        ratios[load] = [r / c for r, c in zip(slopes["rtlab"], slopes["cyclictest"])]
        for tool in slopes:
            print(f"| {load} | {tool} | {statistics.median(slopes[tool]) * 1e9:.0f} "
                  f"| {statistics.median(fixed[tool]) * 1e3:.1f} "
                  f"| {statistics.median(whole[tool]) * 1e9:.0f} |")
    print()
    print("| load | margin ratio rtlab/cyclictest per round | median |")
    print("|---|---|---|")
    for load, values in ratios.items():
        print(f"| {load} | {', '.join(f'{value:.2f}' for value in values)} | {statistics.median(values):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
