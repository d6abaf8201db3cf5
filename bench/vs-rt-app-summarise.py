#!/usr/bin/env python3
"""Summarises bench/vs-rt-app.sh: per tool and run, per thread the activations, deadline misses
and response-time percentiles (µs), and the runner's CPU cost = process CPU − the configured work.

rt-app's log has one line per period: response = c_period − slack (slack < 0 is a miss).
rtlab's record has per thread a `response` series and `workload.threads[].deadline_misses`."""
import glob, json, os, sys

out, runs = sys.argv[1], int(sys.argv[2])
WORK = {"t1ms": 250, "t4ms": 1200, "t10ms": 3000}

def percentile(values, q):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(q * len(values)))]

def cpu_seconds(path):
    elapsed, user, system = open(path).read().split()[-3:]
    return float(user) + float(system)

print(f"{'tool':<6} {'run':>3} {'thread':<6} {'acts':>6} {'misses':>6} {'p50':>7} {'p99':>7} {'max':>7}   (response µs)")
cost = {"rt-app": [], "rtlab": []}
for run in range(1, runs + 1):
    total_work_us, total_acts = 0, 0
    for log in sorted(glob.glob(f"{out}/rt-app-{run}/rt-app-*.log")):
        name = os.path.basename(log)[len("rt-app-"):-len(".log")].rsplit("-", 1)[0]
        responses, misses = [], 0
        for line in open(log):
            if line.startswith("#") or not line.strip():
                continue
            fields = line.split()
            slack, c_duration, c_period = int(fields[7]), int(fields[8]), int(fields[9])
            responses.append(c_period - slack)
            misses += slack < 0
            total_work_us += c_duration
        total_acts += len(responses)
        print(f"{'rt-app':<6} {run:>3} {name:<6} {len(responses):>6} {misses:>6} {percentile(responses, .5):>7} {percentile(responses, .99):>7} {max(responses):>7}")
    record = json.load(open(f"{out}/rtlab-{run}/record.json"))
    total_work_us, total_acts = 0, 0
    for thread in record["workload"]["threads"]:
        series = next(s for s in record["series"] if s["class"] == thread["name"] and s["metric"] == "response")
        p = series["percentiles"]
        print(f"{'rtlab':<6} {run:>3} {thread['name']:<6} {thread['activations']:>6} {thread['deadline_misses']:>6} {p['50']//1000:>7} {p['99']//1000:>7} {series['max_ns']//1000:>7}")
        total_work_us += thread["activations"] * WORK[thread["name"]]
        total_acts += thread["activations"]
print()
print("runner cost (the task set with 10 µs of work per activation, no calibration phase):")
for run in range(1, runs + 1):
    acts = sum(1 for log in glob.glob(f"{out}/cost-rt-app-{run}/rt-app-*.log") for line in open(log) if line.strip() and not line.startswith("#"))
    rt_app = cpu_seconds(f"{out}/cost-rt-app-{run}/time") - acts * 10e-6
    record = json.load(open(f"{out}/cost-rtlab-{run}/record.json"))
    rtlab_acts = sum(thread["activations"] for thread in record["workload"]["threads"])
    rtlab = cpu_seconds(f"{out}/cost-rtlab-{run}/time") - rtlab_acts * 10e-6
    print(f"run {run}: rt-app {rt_app*1e6/acts:6.2f} µs CPU per activation ({acts}), rtlab {rtlab*1e6/rtlab_acts:6.2f} µs ({rtlab_acts}), ratio rtlab/rt-app {rtlab/rtlab_acts/(rt_app/acts):.2f}")
