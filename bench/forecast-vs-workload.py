#!/usr/bin/env python3
"""Summarises bench/forecast-vs-workload.sh: per (n, t, c) the underruns the device really had
beside the per-period model's prediction (duration / MTTF) and the backlog model's
(backlog_underruns_per_s x duration), both from the probe's series of the same run."""
import glob
import json
import os
import sys

out = sys.argv[1]
rows = []
for path in sorted(glob.glob(os.path.join(out, "n*-t*us-c*us.json"))):
    if path.endswith(".forecast.json"):
        continue
    name = os.path.basename(path)[:-5]
    record = json.load(open(path))
    duration_s = record["duration_ns"] / 1e9
    devices = record["workload"]["devices"]
    real = devices[0]["underruns"] if devices else None
    forecast_path = os.path.join(out, name + ".forecast.json")
    per_period = backlog = None
    if os.path.exists(forecast_path):
        document = json.load(open(forecast_path))
        rows_of = document.get("rows") or document.get("forecasts") or []
        row = rows_of[0] if rows_of else document
        forecast = row.get("forecast", row)
        if forecast.get("mttf_s"):
            per_period = duration_s / forecast["mttf_s"]
        if forecast.get("backlog_underruns_per_s") is not None:
            backlog = forecast["backlog_underruns_per_s"] * duration_s
    n, t, c = name.split("-")
    rows.append((int(n[1:]), int(t[1:-2]), int(c[1:-2]), real, per_period, backlog))

def fmt(value):
    return "-" if value is None else f"{value:.1f}"

print(f"{'n':>2} {'t ms':>5} {'c ms':>5} {'real':>6} {'per-period':>11} {'backlog':>8}")
for n, t, c, real, per_period, backlog in sorted(rows):
    print(f"{n:>2} {t/1000:>5.1f} {c/1000:>5.1f} {fmt(real):>6} {fmt(per_period):>11} {fmt(backlog):>8}")
