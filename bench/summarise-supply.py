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
    mode = os.path.basename(path).split("-")[0]
    if os.path.basename(path).startswith("deadline-global"):
        mode = "deadline-global"
    record["mode"] = mode
    cells[(rate, mode)].append(record)

def rate_key(rate):
    amount, period = rate.split("/")
    scale = lambda text: float(text[:-2]) * (1e3 if text.endswith("ms") else 1)
    return (scale(period), scale(amount))

order = {"none": 0, "fifo50": 1, "deadline": 2, "deadline-global": 3, "dispatch": 4, "default": 5, "daemon": 6}
print("| X/Y | mode | own: windows >= X | own: min | own: p1 | own: windows missed (in a slot stall >= 200 us; steal in the same 100 ms) | trace: windows >= X | trace: min | stalled while on CPU | steal (run, by CPU) | dispatcher CPU | edge lateness mean / max | slot: planned, start delay p50 / p99.9 / max, lost inside |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
for (rate, mode) in sorted(cells, key=lambda key: (rate_key(key[0]), order.get(key[1], 9))):
    for record in cells[(rate, mode)]:
        if "refused" in record:
            reason = record["refused"].replace("supply: error: ", "").replace("|", "/")
            print(f"| {rate} | {mode} | refused: {reason} | | | | | | | | | | |")
            continue
        report = record["report"]
        steal = ", ".join(f"{value / 1e6:g} ms" for value in record["steal_ns_by_cpu"])
        near = ", ".join(f"{value / 1e6:g} ms" for value in record["steal_ns_by_cpu_around_worst_window"])
        dispatchers = [d for d in record["dispatchers"] if d["edges"] > 0]
        cpu = ", ".join(f"{d['cpu_share_of_run'] * 100:.2f} %" for d in dispatchers)
        lateness = ", ".join(f"{d['lateness_mean_ns'] / 1e3:.0f} / {d['lateness_max_ns'] / 1e3:.0f} us" for d in dispatchers)
        own = record.get("self_report", report)
        grant = record.get("grant") or {}
        shown = mode
        if mode in ("default", "deadline") and "backend" in grant:
            shown = f"{mode} ({grant['backend']}, CPU {grant['cpu']})" if grant.get("cpu") is not None else f"{mode} ({grant['backend']}, global)"
        if mode == "daemon":
            text = grant.get("output", "")
            shown = "daemon (" + ("deadline" if "deadline" in text else "dispatch" if "dispatch" in text else "?") + ")"
        slots = record.get("dispatch_slots")
        missed = ""
        if "missed_windows" in record:
            in_stall = slots["missed_windows_during_long_stall"] if slots else "-"
            missed = f"{record['missed_windows']} ({in_stall}; {record['missed_windows_near_steal']})"
        slot_text = ""
        if slots:
            delay = slots["start_delay"]
            slot_text = (
                f"{slots['slot_length_ns'] / 1e3:.0f} us every {grant['granted_period_ns'] / 1e6:g} ms,"
                f" {delay['p50_ns'] / 1e3:.0f} / {delay['p999_ns'] / 1e3:.0f} / {delay['max_ns'] / 1e3:.0f} us,"
                f" {slots['interior_share_of_slot_time'] * 100:.2f} %"
            )
        print(
            f"| {rate} | {shown} | {own['share_meeting'] * 100:.3f} % | {own['min_ns'] / 1e3:.0f} us | {own['p1_ns'] / 1e3:.0f} us | {missed}"
            f" | {report['share_meeting'] * 100:.2f} % | {report['min_ns'] / 1e3:.0f} us"
            f" | {record.get('stalled_while_on_cpu_ns', 0) / 1e6:.1f} ms | {steal} | {cpu} | {lateness} | {slot_text} |"
        )
