#!/usr/bin/env python3
"""The CPU reservations take against the CPU their threads use, over time (issue 37, "the CPU
taken against the CPU needed for the audio pair").

    reserve-shares.py RTLAB OUT [INTERVAL_S]

Every INTERVAL_S (default 0.25 s) until SIGTERM or SIGINT: `RTLAB reservations --json -` (the
daemon of $RTLAB_SOCKET), and for each reservation's threads their run time so far
(/proc/TID/schedstat, first field). Writes one JSON line per sample to OUT:
{"t_ns": CLOCK_MONOTONIC, "taken": {TID: share the kernel holds}, "run_ns": {TID: ns}}.
`summarise(OUT, START_NS, END_NS)` (also `reserve-shares.py --summary OUT START END`) gives, over
that span, the mean of the summed shares the kernel held and the summed CPU the reserved threads
used (their run time's growth over the span), both in % of a CPU, and the ratio taken ÷ used.
"""
import json
import signal
import subprocess
import sys
import time


def run_ns(tid):
    try:
        with open("/proc/%d/schedstat" % tid) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def sample(rtlab):
    out = subprocess.run([rtlab, "reservations", "--json", "-"], capture_output=True, text=True)
    taken = {}
    if out.returncode == 0:
        for reservation in json.loads(out.stdout).get("reservations", []):
            held = reservation.get("kernel_held") or {}
            tid = held.get("tid")
            if tid is None:
                threads = reservation.get("threads") or []
                tid = threads[0].get("tid") if threads else None
            if tid is not None:
                taken[str(tid)] = taken.get(str(tid), 0.0) + float(held.get("share") or 0.0)
    runs = {tid: run_ns(int(tid)) for tid in taken}
    return {
        "t_ns": time.monotonic_ns(),
        "taken": taken,
        "run_ns": {tid: ns for tid, ns in runs.items() if ns is not None},
    }


def record(rtlab, path, interval):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with open(path, "w") as out:
        while not stop:
            out.write(json.dumps(sample(rtlab)) + "\n")
            out.flush()
            time.sleep(interval)


def summarise(path, start_ns, end_ns):
    """(taken %, used %, ratio) over [start_ns, end_ns), or None without two samples in it."""
    samples = [json.loads(line) for line in open(path) if line.strip()]
    samples = [s for s in samples if start_ns <= s["t_ns"] < end_ns]
    if len(samples) < 2:
        return None
    taken = sum(sum(s["taken"].values()) for s in samples) / len(samples)
    used_ns = 0
    # A thread's use: its run time's growth between consecutive samples that both hold it.
    for before, after in zip(samples, samples[1:]):
        for tid, ns in after["run_ns"].items():
            if tid in before["run_ns"]:
                used_ns += max(ns - before["run_ns"][tid], 0)
    used = used_ns / (samples[-1]["t_ns"] - samples[0]["t_ns"])
    return 100 * taken, 100 * used, (taken / used if used > 0 else float("inf"))


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--summary":
        figures = summarise(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        print("no samples" if figures is None else "took %.1f %% for %.1f %% used: %.2fx" % figures)
    else:
        record(sys.argv[1], sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 0.25)
