#!/usr/bin/env bash
# What single trace events cost the probe, kernel side only (BENCHMARKS.md "What --explain costs
# the probe"): plain `rtlab run` while a scratch tracefs instance records a given set of events
# into its ring with nobody reading it, interleaved with plain runs. The instance is created with
# the global record-cmd option off, as rtlab's own is, and removed after each run.
#
# Modes: plain; waking (sched_waking only); switch (sched_switch only); standard (the events of
# `--explain`'s standard set); full (those of `--explain-events full`). The shift of a mode is the
# median over rounds of its p50 divided by the same round's plain p50.
#
# usage: bench/trace-event-cost.sh [SECONDS_PER_RUN=3] [ROUNDS=14]   (needs root and tracefs)
. "$(dirname "$0")/lib.sh"
seconds=${1:-3}
rounds=${2:-14}
bench_start trace-event-cost
tracefs=/sys/kernel/tracing
instance=$tracefs/instances/bench-event-cost-$$
sched="sched/sched_switch sched/sched_waking"
irq="irq/irq_handler_entry irq/irq_handler_exit irq/softirq_entry irq/softirq_exit"
other="workqueue/workqueue_execute_start workqueue/workqueue_execute_end ipi/ipi_send_cpu ipi/ipi_send_cpumask"
for vector in reschedule call_function call_function_single irq_work x86_platform_ipi thermal_apic error_apic spurious_apic; do
    other="$other irq_vectors/${vector}_entry irq_vectors/${vector}_exit"
done
full_only="timer/hrtimer_expire_entry timer/hrtimer_expire_exit timer/hrtimer_start sched/sched_wakeup sched/sched_migrate_task irq_vectors/local_timer_entry irq_vectors/local_timer_exit"
declare -A sets=(
    [waking]="sched/sched_waking"
    [switch]="sched/sched_switch"
    [standard]="$sched $irq $other"
    [full]="$sched $irq $other $full_only"
)
modes=${MODES:-plain waking switch standard full}
cleanup() { [ -d "$instance" ] && rmdir "$instance"; true; }
trap cleanup EXIT
for round in $(seq 1 "$rounds"); do
    for mode in $modes; do
        if [ "$mode" != plain ]; then
            # Like rtlab: record-cmd off only for the mkdir, then back to what it was.
            previous=$(cat "$tracefs/options/record-cmd")
            echo 0 > "$tracefs/options/record-cmd"
            mkdir "$instance"
            echo "$previous" > "$tracefs/options/record-cmd"
            echo mono > "$instance/trace_clock"
            echo 8192 > "$instance/buffer_size_kb"
            for event in ${sets[$mode]}; do
                [ -e "$instance/events/$event/enable" ] && echo 1 > "$instance/events/$event/enable"
            done
            echo 1 > "$instance/tracing_on"
        fi
        "$rtlab" run --duration "${seconds}s" --warmup 500ms --no-store \
            --json "$out/$mode-$round.json" > /dev/null
        cleanup
    done
done
python3 - "$out" "$rounds" $modes <<'PY'
import json, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def p50(path, klass):
    record = json.load(open(path))
    return statistics.median(s["percentiles"]["50"] for s in record["series"]
                             if s["metric"] == "wakeup" and s["class"] == klass) / 1000
for mode in modes:
    line = f"{mode:<9}"
    for klass in ("rt-high", "normal"):
        values = [p50(f"{out}/{mode}-{r}.json", klass) for r in range(1, rounds + 1)]
        line += f"  {klass} p50 median {statistics.median(values):6.2f} µs"
        if mode != "plain" and "plain" in modes:
            ratios = [v / p50(f"{out}/plain-{r}.json", klass) for r, v in enumerate(values, 1)]
            q = statistics.quantiles(ratios, n=4)
            line += f" (paired shift {100 * (statistics.median(ratios) - 1):+5.1f} %, quartiles {100 * (q[0] - 1):+.1f} … {100 * (q[2] - 1):+.1f} %)"
    print(line)
PY
echo "raw records: $out"
