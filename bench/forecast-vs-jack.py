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
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "out", "forecast-vs-jack")
RTLAB = os.environ.get("RTLAB", os.path.join(HERE, "..", "target", "debug", "rtlab"))


def poisson_quantile(mean, q):
    """Smallest k with P(K <= k) >= q for K ~ Poisson(mean) (normal approximation above a mean
    of 500, where exp(-mean) underflows)."""
    if mean > 500:
        z = statistics.NormalDist().inv_cdf(q)
        return max(0, math.ceil(mean + z * math.sqrt(mean) - 0.5))
    k, term = 0, math.exp(-mean)
    total = term
    while total < q:
        k += 1
        term *= mean / k
        total += term
        if k > 100000:
            break
    return k


def forecast(run, period_ns, compute_ns, model, extra=()):
    command = [RTLAB, "forecast", run, "--buffers", "2", "--buffer", f"{period_ns}ns",
               "--compute", f"{compute_ns}ns", "--chain", "2", "--model", model, *extra, "--json", "-"]
    result = subprocess.run(command, capture_output=True, text=True)
    if not result.stdout.strip():
        raise RuntimeError(result.stderr.strip())
    output = json.loads(result.stdout)
    row = output["rows"][0]
    row = row.get("forecast", row)
    row["periodic_found"] = [found["text"] for found in output.get("periodic", [])]
    if row.get("refused"):
        raise RuntimeError("refused: " + row["refused"]["text"])
    mttf = row["mttf_s"]
    low_mttf, high_mttf = row["mttf_ci_s"]
    rate = 1.0 / mttf if mttf else 0.0
    high = 1.0 / low_mttf if low_mttf else float("inf")
    low = 1.0 / high_mttf if high_mttf else 0.0
    return rate, low, high, row


def glitches(cell, skip_s=0.0):
    """The client's JSON, its glitches (xrun callbacks within 1 ms merged) and seconds, leaving
    out the first skip_s seconds of the client's run."""
    client = json.load(open(os.path.join(OUT, cell + ".client.json")))
    begin = client["started_monotonic_ns"] + int(skip_s * 1e9)
    times = sorted(int(line) for line in open(os.path.join(OUT, cell + ".xruns")) if line.strip())
    times = [at for at in times if at >= begin]
    xruns = sum(1 for index, at in enumerate(times) if index == 0 or at - times[index - 1] > 1_000_000)
    return client, xruns, client["duration_ns"] / 1e9 - skip_s


def periodic_table(cells):
    """Issue 35's table: the pinned periodic cells, one row per cell over its runs."""
    groups = {}
    for cell in cells:
        match = re.fullmatch(r"(f\d+-l\d+-pin-\d+-\d+)-r(\d+)", cell)
        if match and os.path.exists(os.path.join(OUT, cell + ".run.json")):
            groups.setdefault(match.group(1), []).append((int(match.group(2)), cell))
    if not groups:
        return
    print("\n| cell | runs | observed glitches/s per run | stated range /s (each run's 90 % interval) | burst found per run, ms | inside | median observed /s | median forecast /s | forecast ÷ observed (medians) |")
    print("| --- | ---: | --- | --- | --- | ---: | ---: | ---: | ---: |")
    all_inside = all_runs = cells_within = 0
    for group in sorted(groups, key=lambda g: (int(g.split("-")[3]), int(g.split("-")[4]), int(g.split("-")[0][1:]))):
        frames = int(group.split("-")[0][1:])
        load = int(group.split("-")[1][1:])
        period_ns = frames * 1_000_000_000 // 48_000
        compute_ns = period_ns * load // 100
        observed, medians, lows, highs, inside, notes, found = [], [], [], [], 0, [], []
        for _, cell in sorted(groups[group]):
            try:
                # The competitor starts a second after the client (bench/jack/harness.sh).
                _, xruns, seconds = glitches(cell, 1.0)
                rate, low, high, row = forecast(os.path.join(OUT, cell + ".run.json"), period_ns,
                                                compute_ns, "response", ("--app-clock", "device"))
            except (OSError, ValueError, KeyError, RuntimeError) as error:
                notes.append(f"{cell}: {error}")
                continue
            burst = re.search(r"for ([0-9.–]+) ms every", " ".join(row["periodic_found"]))
            found.append(burst.group(1) if burst else "-")
            if not row.get("alignment"):
                notes.append(f"{cell}: no periodic interferer found ({'; '.join(row['periodic_found']) or 'none'})")
            count_low = poisson_quantile(low * seconds, 0.05)
            count_high = poisson_quantile(high * seconds, 0.95) if math.isfinite(high) else float("inf")
            inside += count_low <= xruns <= count_high
            observed.append(xruns / seconds)
            medians.append(rate)
            lows.append(low)
            highs.append(high)
        if not observed:
            print(f"| {group} | 0 | | | | | | | |")
            for note in notes:
                print(f"  {note}", file=sys.stderr)
            continue
        median_observed = statistics.median(observed)
        median_forecast = statistics.median(medians)
        ratio = median_forecast / median_observed if median_observed > 0 else float("inf") if median_forecast > 0 else 1.0
        cells_within += 0.5 <= ratio <= 2.0
        all_inside += inside
        all_runs += len(observed)
        ranges = ", ".join(f"{low:.2f}–{high:.2f}" for low, high in zip(lows, highs))
        print(f"| {group} | {len(observed)} | {', '.join(f'{rate:.2f}' for rate in observed)} | {ranges} | {', '.join(found)} | "
              f"{inside} of {len(observed)} | {median_observed:.2f} | {median_forecast:.2f} | {ratio:.2f} |")
        for note in notes:
            print(f"  {note}", file=sys.stderr)
    print(f"\n{all_inside} of {all_runs} runs inside their stated range ({100 * all_inside / max(all_runs, 1):.0f} %); "
          f"{cells_within} of {len(groups)} cells with the median within ×2")


def main():
    cells = sorted(name[: -len(".client.json")] for name in os.listdir(OUT) if name.endswith(".client.json"))
    periodic_table(cells)
    cells = [cell for cell in cells if "-pin-" not in cell]
    print()
    print("| cell | JACK xrun callbacks | glitches (callbacks within 1 ms merged) | observed glitches/s | forecast /s (90 % CI) | forecast/observed | inside | per-period model /s |")
    print("| --- | ---: | ---: | ---: | --- | ---: | --- | ---: |")
    inside_count = total = 0
    ratios = []
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
        if xruns >= 20:
            ratios.append(rate / observed)
        print(f"| {cell} | {raw_xruns} | {xruns} | {observed:.3f} | {rate:.3f} ({low:.3f}–{high:.3f}) | {ratio} | "
              f"{'yes' if inside else 'NO'} | {old:.3f} |")
    print(f"\n{inside_count} of {total} cells inside the forecast's widened 90 % interval")
    within = [ratio for ratio in ratios if 0.67 <= ratio <= 1.5]
    print(f"{len(within)} of {len(ratios)} cells with ≥ 20 glitches within 0.67–1.5 of observed")


if __name__ == "__main__":
    main()
