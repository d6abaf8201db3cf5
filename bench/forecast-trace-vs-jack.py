#!/usr/bin/env python3
"""Summarises bench/forecast-trace-vs-jack.sh: JACK's glitches in each trace's window (xrun
callbacks within 1 ms merged: JACK calls the callback twice for one failed cycle) beside
`rtlab forecast --trace` at the recorded buffering, and, for a cell at other frames, beside the
forecast the 128-frame trace of the same load and condition made for that buffering."""
import json
import os
import sys

OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "out", "forecast-trace-vs-jack")


def glitches(path, first, last):
    times = sorted(int(line) for line in open(path) if line.strip())
    merged, previous = 0, None
    for time in times:
        if previous is None or time - previous > 1_000_000:
            if first <= time <= last:
                merged += 1
        previous = time
    raw = sum(1 for time in times if first <= time <= last)
    return merged, raw


def row_for(forecast, frames, buffers=2):
    for row in forecast["rows"]:
        if row["frames"] == frames and row["buffers"] == buffers:
            return row
    return None


def fmt(row, seconds):
    if row is None or row["glitches"] is None:
        return "not forecast"
    low, high = row["per_minute_low"] * seconds / 60, row["per_minute_high"] * seconds / 60
    cut = "+ (list cut: a lower bound)" if row["lower_bound"] else ""
    return f"{row['per_minute'] * seconds / 60:.1f}{cut} ({low:.1f}–{high:.1f})"


cells = {}
for name in sorted(os.listdir(OUT)):
    if name.endswith(".forecast.json"):
        cell = name[: -len(".forecast.json")]
        cells[cell] = json.load(open(os.path.join(OUT, name)))
print("| cell | trace s | JACK glitches (raw callbacks) | forecast from its own trace (90 % CI) | forecast from the 128-frame trace |")
print("| --- | ---: | ---: | --- | --- |")
for cell, forecast in cells.items():
    frames = int(cell.split("-")[0][1:])
    first, last = forecast["first_ns"], forecast["last_ns"]
    seconds = (last - first) / 1e9
    merged, raw = glitches(os.path.join(OUT, cell + ".xruns"), first, last)
    own = fmt(row_for(forecast, frames), seconds)
    base = "f128-" + cell.split("-", 1)[1]
    other = "—"
    if frames != 128 and base in cells:
        other = fmt(row_for(cells[base], frames), seconds)
    print(f"| {cell} | {seconds:.1f} | {merged} ({raw}) | {own} | {other} |")
