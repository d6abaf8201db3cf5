#!/usr/bin/env bash
# Overhead of `rtlab run --explain` (issues 4 and 12, BENCHMARKS.md "What --explain costs the
# probe" and "The BPF recorder against tracefs").
#
# The same run plain and with --explain through each recorder and event set, in many short
# rounds; within a round the modes run back to back, in an order that rotates from round to round
# (plain/bpf, bpf/plain, …), so the VM's drift between rounds hits every mode alike and a drift
# within a round does not always favour the same one. Modes: plain; bpf, bpf-full
# (--explain-recorder bpf, standard/full events); tracefs, tracefs-full (--explain-recorder
# tracefs; `standard` and `full` are their old names); bpf-reuse and bpf-every (the clock read on
# every event but the timer's own two, or on every event: RTLAB_BPF_CLOCK=reuse|every),
# bpf-window (every episode the whole window, RTLAB_BPF_WHOLE_WINDOW=1). Runs: every online CPU,
# rt-high/rt-mid/normal classes, 1 ms period, default threshold (each series' p99.9).
#
# Per run it prints the median over CPUs of the rt-high and normal wake-up p50 and p99 (µs), the
# episodes explained and the events recorded (tracefs: decoded; BPF: counted in the kernel). The
# shift of a mode: per round and CPU the series' p50 divided by plain's p50 on the same CPU in
# the same round, the geometric mean of those over CPUs is the round's ratio, and the shift is
# the median of the rounds' ratios, with a 95 % bootstrap confidence interval (the rounds
# resampled with replacement, 10 000 times, percentile interval; seeded, so a re-analysis gives
# the same interval) and the sign test's distribution-free 95 % interval beside it.
#
# usage: bench/explain-overhead.sh [SECONDS_PER_RUN=2] [ROUNDS=40]   (needs root and tracefs)
#        MODES="plain bpf tracefs" bench/explain-overhead.sh …  (the modes, default "plain bpf")
#        RUN_FLAGS="--classes rt-high --no-handoff" bench/explain-overhead.sh …  (extra run flags)
#        RTLAB=/path/to/rtlab (default target/release/rtlab; built when missing);
#        mode bpf-alt runs the BPF recorder of RTLAB_ALT=/path/to/other/rtlab (two builds compared)
#        bench/explain-overhead.sh --analyse bench/out/explain-overhead-…  (re-analyse old records)
# The default (2 modes × 40 rounds × 2 s, plus a 1 s warm-up and start-up per run) takes about
# 5 minutes; run it under `flock -o /work/measure.lock` on a shared machine.
. "$(dirname "$0")/lib.sh"
if [ "${1:-}" = --analyse ]; then
    # Re-analyse: the modes and rounds are read back from the records' names.
    out=${2:?usage: bench/explain-overhead.sh --analyse DIRECTORY}
    read -r -a mode_list < "$out/modes"
    modes=${mode_list[*]}
    rounds=$(cat "$out/rounds")
else
seconds=${1:-2}
rounds=${2:-40}
modes=${MODES:-plain bpf}
read -r -a mode_list <<< "$modes"
bench_start explain-overhead
echo "$modes" > "$out/modes"
echo "$rounds" > "$out/rounds"
echo "$(date -u +%FT%TZ) $rounds rounds of ${seconds}s, modes: $modes; load average: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/started"
for round in $(seq 1 "$rounds"); do
    # This round's order: the modes rotated by the round number.
    count=${#mode_list[@]}
    for step in $(seq 0 $((count - 1))); do
        mode=${mode_list[$(((step + round) % count))]}
        flags=()
        case $mode in
        plain) ;;
        bpf) flags=(--explain --explain-recorder bpf) ;;
        bpf-full) flags=(--explain --explain-recorder bpf --explain-events full) ;;
        # What each clock saving and the episode tails are worth.
        bpf-reuse | bpf-every | bpf-window) flags=(--explain --explain-recorder bpf) ;;
        # The floor: the standard set attached, every program returning at once.
        bpf-floor) flags=(--explain --explain-recorder bpf) ;;
        # The BPF recorder of another build (RTLAB_ALT), to compare two builds' recorders.
        bpf-alt) flags=(--explain --explain-recorder bpf) ;;
        tracefs | standard) flags=(--explain --explain-recorder tracefs) ;;
        tracefs-full | full) flags=(--explain --explain-recorder tracefs --explain-events full) ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
        esac
        clock=(env)
        [ "$mode" = bpf-reuse ] && clock=(env RTLAB_BPF_CLOCK=reuse)
        [ "$mode" = bpf-every ] && clock=(env RTLAB_BPF_CLOCK=every)
        [ "$mode" = bpf-window ] && clock=(env RTLAB_BPF_WHOLE_WINDOW=1)
        [ "$mode" = bpf-floor ] && clock=(env RTLAB_BPF_ATTACH_ONLY=1)
        binary=$rtlab
        [ "$mode" = bpf-alt ] && binary=${RTLAB_ALT:?bpf-alt needs RTLAB_ALT=/path/to/rtlab}
        # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
        "${clock[@]}" "$binary" run --duration "${seconds}s" --warmup 1s --no-store ${RUN_FLAGS:-} "${flags[@]}" \
            --json "$out/$mode-$round.json" > "$out/$mode-$round.txt"
    done
done
echo "$(date -u +%FT%TZ) done; load average: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/finished"
fi
python3 - "$out" "$rounds" $modes <<'PY'
import json, math, random, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
CLASSES = ("rt-high", "normal")
def sign_interval(values):
    # The sign test's 95 % interval for a median: order statistics k and n + 1 - k, k the
    # largest with P(Binomial(n, 1/2) < k) <= 2.5 %.
    values = sorted(values)
    n = len(values)
    k, cumulative = 0, 0.0
    for j in range(n):
        cumulative += math.comb(n, j) / 2 ** n
        if cumulative > 0.025:
            break
        k = j + 1
    return (values[0], values[-1]) if k == 0 else (values[k - 1], values[n - k])
def bootstrap_interval(values, resamples=10000):
    # Percentile bootstrap of the median: the rounds resampled with replacement.
    generator = random.Random(12)
    n = len(values)
    medians = sorted(statistics.median(generator.choices(values, k=n)) for _ in range(resamples))
    return medians[int(0.025 * resamples)], medians[int(0.975 * resamples) - 1]
def mode_of(path):
    return path.rsplit("/", 1)[1].rsplit("-", 1)[0]
def recorder_of(path):
    return "bpf" if mode_of(path).startswith("bpf") else "tracefs"
def figures(path):
    record = json.load(open(path))
    row = {"per cpu": {}}
    for klass in CLASSES:
        series = [s for s in record["series"] if s["metric"] == "wakeup" and s["class"] == klass]
        for s in series:
            row["per cpu"][(klass, s["cpu"])] = s["percentiles"]["50"]
        if not series:
            row[klass + " p50"] = row[klass + " p99"] = float("nan")
            continue
        row[klass + " p50"] = statistics.median(s["percentiles"]["50"] for s in series) / 1000
        row[klass + " p99"] = statistics.median(s["percentiles"]["99"] for s in series) / 1000
    trace = record["config"].get("explain_trace", {})
    row["episodes"] = len(record["episodes"])
    row["events/s"] = trace.get("decoded_events", 0) / (record["duration_ns"] / 1e9)
    row["lost"] = trace.get("lost_events", 0)
    if mode_of(path) != "plain" and record["config"].get("explain", {}).get("recorder") not in (None, recorder_of(path)):
        sys.exit(f"{path}: recorded with {record['config']['explain']['recorder']}, not {recorder_of(path)}")
    return row
keys = ["rt-high p50", "rt-high p99", "normal p50", "normal p99", "episodes", "events/s", "lost"]
print("run          " + "".join(f"{key:>13}" for key in keys))
rows = {mode: [] for mode in modes}
for round in range(1, rounds + 1):
    for mode in modes:
        row = figures(f"{out}/{mode}-{round}.json")
        rows[mode].append(row)
        print(f"{mode:<9}{round:<4}" + "".join(f"{row[key]:>13.1f}" for key in keys))
for mode in modes:
    print(f"{mode:<9}mean" + "".join(f"{statistics.mean(row[key] for row in rows[mode]):>13.1f}" for key in keys))
def round_ratio(row, base, klass):
    # Geometric mean over CPUs of the paired per-CPU p50 ratios; None when no CPU pairs up.
    logs = [math.log(value / base["per cpu"][key]) for key, value in row["per cpu"].items()
            if key[0] == klass and base["per cpu"].get(key, 0) > 0 and value > 0]
    return math.exp(statistics.mean(logs)) if logs else None
def percent(ratio):
    return f"{100 * (ratio - 1):+.1f}"
if "plain" in rows:
    print()
    for mode in modes:
        if mode == "plain":
            continue
        for klass in CLASSES:
            ratios = [r for r in (round_ratio(row, base, klass)
                                  for row, base in zip(rows[mode], rows["plain"])) if r]
            if not ratios:
                continue
            median = statistics.median(ratios)
            low, high = bootstrap_interval(ratios)
            sign_low, sign_high = sign_interval(ratios)
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            print(f"{mode} {klass} p50: shift {percent(median)} % "
                  f"(95 % CI {percent(low)} … {percent(high)} %, bootstrap; "
                  f"sign test {percent(sign_low)} … {percent(sign_high)} %; "
                  f"quartiles {percent(quartiles[0])} … {percent(quartiles[2])} %; "
                  f"{len(ratios)} rounds)")
        for key in ("rt-high p99", "normal p99"):
            pairs = [(row[key], base[key]) for row, base in zip(rows[mode], rows["plain"])
                     if row[key] == row[key] and base[key] == base[key]]
            if pairs:
                ratios = [a / b for a, b in pairs]
                print(f"{mode} {key}: shift {percent(statistics.median(ratios))} % (median of the rounds)")
PY
echo "raw records: $out"
