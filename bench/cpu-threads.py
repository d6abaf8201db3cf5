#!/usr/bin/env python3
"""Summarises bench/cpu-threads.sh: CPU of the measuring threads per sample, and of the rest."""
import glob
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from summarise import read_histfile  # noqa: E402


def split(path, tool):
    """(measuring threads' ns, other threads' ns) from a `.threads` file."""
    rows, total = [], 0.0
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            fields = line.split()
            if fields[0] == "total":
                total = float(fields[1])
            else:
                rows.append((int(fields[0]), fields[1], float(fields[2])))
    if tool == "rtlab":
        measuring = sum(share for _, comm, share in rows if comm.startswith("rtlab-t-"))
    else:
        # cyclictest's main thread is the process itself: the lowest thread id.
        main_tid = min(tid for tid, _, _ in rows)
        measuring = sum(share for tid, _, share in rows if tid != main_tid)
    every = sum(share for _, _, share in rows)
    return total * measuring / 100.0, total * (every - measuring) / 100.0


def main(directory):
    rounds = sorted({int(os.path.basename(path).split("-")[2].split(".")[0])
                     for path in glob.glob(os.path.join(directory, "rtlab-idle-*.threads"))})
    print(f"runs: {directory} ({len(rounds)} rounds)")
    print("| load | tool | measuring threads, CPU per 1000 samples (µs) | other threads (ms) | whole process per 1000 samples (µs) |")
    print("|---|---|---|---|---|")
    ratios = {}
    for load in ("idle", "stress"):
        per_sample = {"cyclictest": [], "rtlab": []}
        others = {"cyclictest": [], "rtlab": []}
        whole = {"cyclictest": [], "rtlab": []}
        for round_ in rounds:
            for tool in per_sample:
                stem = os.path.join(directory, f"{tool}-{load}-{round_}")
                counts, overflows = read_histfile(stem + ".hist")
                samples = sum(counts.values()) + overflows
                measuring, other = split(stem + ".threads", tool)
                per_sample[tool].append(measuring / samples)
                others[tool].append(other)
                whole[tool].append((measuring + other) / samples)
        ratios[load] = (
            [r / c for r, c in zip(per_sample["rtlab"], per_sample["cyclictest"])],
            [r / c for r, c in zip(whole["rtlab"], whole["cyclictest"])],
        )
        for tool in per_sample:
            print(f"| {load} | {tool} | {statistics.median(per_sample[tool]):.0f} "
                  f"| {statistics.median(others[tool]) / 1e6:.1f} "
                  f"| {statistics.median(whole[tool]):.0f} |")
    print()
    print("| load | measuring threads, rtlab/cyclictest per round | median | whole process per round | median |")
    print("|---|---|---|---|---|")
    for load, (threads, whole) in ratios.items():
        print(f"| {load} | {', '.join(f'{value:.2f}' for value in threads)} | {statistics.median(threads):.2f} "
              f"| {', '.join(f'{value:.2f}' for value in whole)} | {statistics.median(whole):.2f} |")


if __name__ == "__main__":
    main(sys.argv[1])
