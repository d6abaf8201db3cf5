#!/usr/bin/env bash
# The BPF recorder's kernel-side cost during a real `rtlab run --explain` (BENCHMARKS.md
# "Kernel-side cost per event"), a figure the host's noise does not move: the kernel's own
# run-time statistics of each program (BPF_ENABLE_STATS, held by target/release/examples/
# bpf_program_cost for the run and dropped after it, so kernel.bpf_stats_enabled is never
# written), divided into the measuring threads' samples, and the part on a timer sample's own
# wake-up path (the hrtimer callback's entry and exit, the thread's waking, the switch to it)
# set against the run's median wake-up latency: the shift the recorder can add at most through
# its programs' own run time (the tracepoint's dispatch is not in run_time_ns).
#
# usage: bench/explain-kernel-cost.sh [SECONDS=10] [POLICIES="pending reuse every"]
#        (needs root; run under flock /work/measure.lock). POLICIES are RTLAB_BPF_CLOCK values.
. "$(dirname "$0")/lib.sh"
seconds=${1:-10}
policies=${POLICIES:-pending reuse every}
bench_start explain-kernel-cost
cost=${COST:-target/release/examples/bpf_program_cost}
[ -x "$cost" ] || cargo build --release -p rtlab-explain --example bpf_program_cost
for policy in $policies; do
    RTLAB_BPF_CLOCK=$policy "$rtlab" run --explain --explain-recorder bpf --duration "${seconds}s" \
        --warmup 1s --no-store ${RUN_FLAGS:-} --json "$out/$policy.json" > "$out/$policy.txt" &
    pid=$!
    # Counted from after the warm-up to a second before the end.
    sleep 2
    "$cost" "$((seconds - 2))" > "$out/$policy.cost"
    wait "$pid"
done
python3 - "$out" "$seconds" $policies <<'PY'
import json, statistics, sys
out, seconds, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
window = seconds - 2
# The kernel keeps 15 characters of a name: entry and exit of one tracepoint share theirs.
path = {"rtlab_hrtimer_e": 2, "rtlab_sched_wak": 1, "rtlab_sched_swi": 1}
for policy in policies:
    record = json.load(open(f"{out}/{policy}.json"))
    programs = {}
    for line in open(f"{out}/{policy}.cost"):
        name, runs, ns, _ = line.split()
        programs[name] = (int(runs), int(ns))
    total_runs = sum(r for r, _ in programs.values())
    total_ns = sum(n for _, n in programs.values())
    measured = [s for s in record["series"] if s["metric"] in ("wakeup", "handoff")]
    samples_per_s = sum(s["count"] for s in measured) / (record["duration_ns"] / 1e9)
    samples = samples_per_s * window
    on_path = sum(programs[name][1] / max(programs[name][0], 1) * times
                  for name, times in path.items() if name in programs)
    print(f"clock policy {policy}: {total_runs / window:,.0f} program runs/s, "
          f"{total_ns / max(total_runs, 1):.0f} ns per run, {total_ns / samples:,.0f} ns of "
          f"kernel time per measured sample ({samples_per_s:,.0f} samples/s)")
    for name, (runs, ns) in sorted(programs.items()):
        print(f"    {name:<16} {runs / window:>9,.0f} runs/s {ns / max(runs, 1):>6.0f} ns/run")
    for klass in ("rt-high", "normal"):
        p50 = statistics.median(s["percentiles"]["50"] for s in record["series"]
                                if s["metric"] == "wakeup" and s["class"] == klass)
        print(f"    on a timer sample's path: {on_path:.0f} ns = {100 * on_path / p50:.1f} % of the "
              f"{klass} median ({p50 / 1000:.1f} µs)")
PY
echo "raw: $out"
