#!/usr/bin/env python3
"""Summarises bench/reserve-supply.sh output as a markdown table (one row per rate and mode)."""
import glob
import json
import os
import sys
from collections import defaultdict

out = sys.argv[1]
cells = defaultdict(list)
for path in sorted(glob.glob(os.path.join(out, "*.json"))):
    with open(path) as handle:
        text = handle.read().strip()
    if not text:
        continue
    record = json.loads(text)
    if "refused" in record:
        cells[(record["rate"], record["mode"])].append(record)
        continue
    rate = f"{record['amount_ns'] / 1e3:g}us/{record['period_ns'] / 1e6:g}ms"
    cells[(rate, record["mode"])].append(record)

def rate_key(rate):
    amount, period = rate.split("/")
    scale = lambda text: float(text[:-2]) * (1e3 if text.endswith("ms") else 1)
    return (scale(period), scale(amount))

order = {"none": 0, "fifo50": 1, "deadline": 2, "dispatch": 3, "default": 4}
print("| X/Y | mode | windows >= X | min | p1 | mean | steal (run, by CPU) | steal near worst window | dispatcher CPU | edge lateness mean / max |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (rate, mode) in sorted(cells, key=lambda key: (rate_key(key[0]), order.get(key[1], 9))):
    for record in cells[(rate, mode)]:
        if "refused" in record:
            reason = record["refused"].replace("supply: error: ", "").replace("|", "/")
            print(f"| {rate} | {mode} | refused: {reason} | | | | | | | |")
            continue
        report = record["report"]
        steal = ", ".join(f"{value / 1e6:g} ms" for value in record["steal_ns_by_cpu"])
        near = ", ".join(f"{value / 1e6:g} ms" for value in record["steal_ns_by_cpu_around_worst_window"])
        dispatchers = [d for d in record["dispatchers"] if d["edges"] > 0]
        cpu = ", ".join(f"{d['cpu_share_of_run'] * 100:.2f} %" for d in dispatchers)
        lateness = ", ".join(f"{d['lateness_mean_ns'] / 1e3:.0f} / {d['lateness_max_ns'] / 1e3:.0f} us" for d in dispatchers)
        shown = mode if mode != "default" else f"default ({record['grant']['backend']})"
        print(
            f"| {rate} | {shown} | {report['share_meeting'] * 100:.2f} % | {report['min_ns'] / 1e3:.0f} us"
            f" | {report['p1_ns'] / 1e3:.0f} us | {report['mean_ns'] / 1e3:.0f} us | {steal} | {near} | {cpu} | {lateness} |"
        )
