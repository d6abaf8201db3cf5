#!/usr/bin/env python3
"""Summarise bench/forecast-vs-jack.sh: per cell, JACK's xruns beside `rtlab forecast`.

    bench/forecast-vs-jack.py [OUT_DIR]      (default bench/out/forecast-vs-jack)

For each cell (f<FRAMES>-l<LOAD>-<CONDITION>) it asks `rtlab forecast RUN --buffers 2 --buffer T
--compute C --chain 2 --json -` (the response model) and `--model per-period` (the model before
issue 27) and prints a Markdown table: observed xruns and rate, the forecast rate with its 90 %
interval, forecast/observed, and whether the observation lies inside the forecast's interval
widened by the observation's own Poisson noise (5 %-95 % of a Poisson count at the interval's
ends over the client's duration).

JACK often calls the xrun callback twice for one failed cycle, 10-70 µs apart (the dummy
driver's own late-cycle xrun and the engine's "client was not finished"): the xrun log's times
within 1 ms of each other are one glitch ("events"), which is what the forecast counts; both
counts are in the table.
"""
import json
import math
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "forecast-vs-jack")
RTLAB = os.environ.get("RTLAB", os.path.join(HERE, "..", "target", "debug", "rtlab"))


def poisson_quantile(mean, q):
    """Smallest k with P(K <= k) >= q for K ~ Poisson(mean)."""
    k, term = 0, math.exp(-mean)
    total = term
    while total < q:
        k += 1
        term *= mean / k
        total += term
        if k > 100000:
            break
    return k


def forecast(run, period_ns, compute_ns, model):
    command = [RTLAB, "forecast", run, "--buffers", "2", "--buffer", f"{period_ns}ns",
               "--compute", f"{compute_ns}ns", "--chain", "2", "--model", model, "--json", "-"]
    result = subprocess.run(command, capture_output=True, text=True)
    if not result.stdout.strip():
        raise RuntimeError(result.stderr.strip())
    row = json.loads(result.stdout)["rows"][0]
    row = row.get("forecast", row)
    mttf = row["mttf_s"]
    low_mttf, high_mttf = row["mttf_ci_s"]
    rate = 1.0 / mttf if mttf else 0.0
    high = 1.0 / low_mttf if low_mttf else float("inf")
    low = 1.0 / high_mttf if high_mttf else 0.0
    return rate, low, high, row


def main():
    cells = sorted(name[: -len(".client.json")] for name in os.listdir(OUT) if name.endswith(".client.json"))
    print("| cell | JACK xrun callbacks | glitches (callbacks within 1 ms merged) | observed glitches/s | forecast /s (90 % CI) | forecast/observed | inside | per-period model /s |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | ---: |")
    inside_count = total = 0
    for cell in cells:
        run = os.path.join(OUT, cell + ".run.json")
        try:
            client = json.load(open(os.path.join(OUT, cell + ".client.json")))
        except (OSError, ValueError):
            continue
        if not os.path.exists(run):
            continue
        frames = int(cell.split("-")[0][1:])
        load = int(cell.split("-")[1][1:])
        period_ns = frames * 1_000_000_000 // 48_000
        compute_ns = period_ns * load // 100
        seconds = client["duration_ns"] / 1e9
        raw_xruns = client["xruns"]
        times = sorted(int(line) for line in open(os.path.join(OUT, cell + ".xruns")) if line.strip())
        xruns = sum(1 for index, at in enumerate(times) if index == 0 or at - times[index - 1] > 1_000_000)
        observed = xruns / seconds
        try:
            rate, low, high, _ = forecast(run, period_ns, compute_ns, "response")
            old, _, _, _ = forecast(run, period_ns, compute_ns, "per-period")
        except (RuntimeError, ValueError, KeyError) as error:
            print(f"| {cell} | {raw_xruns} | {xruns} | {observed:.3f} | error: {error} | | | |")
            continue
        count_low = poisson_quantile(low * seconds, 0.05)
        count_high = poisson_quantile(high * seconds, 0.95) if math.isfinite(high) else float("inf")
        inside = count_low <= xruns <= count_high
        total += 1
        inside_count += inside
        ratio = f"{rate / observed:.2f}" if observed > 0 else "-"
        print(f"| {cell} | {raw_xruns} | {xruns} | {observed:.3f} | {rate:.3f} ({low:.3f}–{high:.3f}) | {ratio} | "
              f"{'yes' if inside else 'NO'} | {old:.3f} |")
    print(f"\n{inside_count} of {total} cells inside the forecast's widened 90 % interval")


if __name__ == "__main__":
    main()
