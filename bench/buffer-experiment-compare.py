#!/usr/bin/env python3
"""Observed underruns of `rtlab buffer-experiment` against `rtlab forecast`.

usage: compare.py RTLAB EXPERIMENT.json [PROBE.json SERIES]
Without PROBE, the forecast reads the experiment's own record (the producer's wake-up latencies);
with PROBE, it reads SERIES of an independent `rtlab run` made under the same load just before.
"""
import json, subprocess, sys

rtlab, experiment_path = sys.argv[1], sys.argv[2]
source = sys.argv[3] if len(sys.argv) > 3 else experiment_path
series = ["--series", sys.argv[4]] if len(sys.argv) > 4 else []
record = json.load(open(experiment_path))
experiment = record["config"]["buffer_experiment"]
period_ms = experiment["buffer_period_ns"] / 1e6
compute_ms = experiment["compute_ns"] / 1e6
fmt = lambda value: "-" if value is None else ("%.3g s" % value)
for buffers, counts in sorted(experiment["underruns"].items(), key=lambda item: int(item[0])):
    out = subprocess.run(
        [rtlab, "forecast", source, *series, "--buffers", buffers, "--buffer-ms", str(period_ms),
         "--compute-ms", str(compute_ms), "--json", "-"],
        check=True, capture_output=True, text=True).stdout
    row = json.loads(out)["rows"][0]
    checked, underruns = counts["checked"], counts["underruns"]
    observed = period_ms / 1e3 * checked / underruns if underruns else None
    forecast = row["mttf_s"]
    low, high = row["mttf_ci_s"]
    ratio = "%.2f" % (forecast / observed) if (forecast and observed) else "-"
    print(f"| {period_ms:g} ms | {buffers} | {checked} | {underruns} | {fmt(observed)} | "
          f"{fmt(forecast)} ({fmt(low)} – {fmt(high)}) | {ratio} |")
```
