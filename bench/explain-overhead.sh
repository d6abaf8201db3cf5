#!/usr/bin/env bash
# Overhead of `rtlab run --explain` (issue 4, BENCHMARKS.md "What --explain costs the probe").
#
# The same run plain and with --explain through each recorder and event set, interleaved
# plain/bpf/tracefs/…, plain/bpf/tracefs/… so drifting background load hits every mode alike.
# Modes: plain; bpf, bpf-full (--explain-recorder bpf, standard/full events); tracefs,
# tracefs-full (--explain-recorder tracefs; `standard` and `full` are their old names); bpf-reuse
# and bpf-every (the clock read on every event but the timer's own two, or on every event:
# RTLAB_BPF_CLOCK=reuse|every), bpf-window (every episode the whole window,
# RTLAB_BPF_WHOLE_WINDOW=1). Runs: every online CPU, rt-high/rt-mid/normal classes, 1 ms period, default threshold (each
# series' p99.9). Per run it prints the median over CPUs of the rt-high and normal wake-up p50 and
# p99 (µs), the episodes explained and the events recorded (tracefs: decoded; BPF: counted in the
# kernel). The shift of a mode is the median,
# over rounds, of its p50 divided by the plain p50 of the same round (paired, so a round in which
# the VM was slow counts against both), and the mean of the p50s beside it.
#
# usage: bench/explain-overhead.sh [SECONDS_PER_RUN=5] [ROUNDS=12]   (needs root and tracefs)
#        RUN_FLAGS="--classes rt-high --no-handoff" bench/explain-overhead.sh …  (extra run flags)
#        MODES="plain bpf tracefs" bench/explain-overhead.sh …  (the modes, default all five)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-5}
rounds=${2:-12}
modes=${MODES:-plain bpf bpf-full tracefs tracefs-full}
rtlab=${RTLAB:-target/release/rtlab}
out=bench/out/explain-overhead-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
[ -x "$rtlab" ] || cargo build --release -p rtlab
for round in $(seq 1 "$rounds"); do
    for mode in $modes; do
        flags=()
        case $mode in
        plain) ;;
        bpf) flags=(--explain --explain-recorder bpf) ;;
        bpf-full) flags=(--explain --explain-recorder bpf --explain-events full) ;;
        # What each clock saving and the episode tails are worth.
        bpf-reuse | bpf-every | bpf-window) flags=(--explain --explain-recorder bpf) ;;
        tracefs | standard) flags=(--explain --explain-recorder tracefs) ;;
        tracefs-full | full) flags=(--explain --explain-recorder tracefs --explain-events full) ;;
        *) echo "unknown mode $mode" >&2; exit 2 ;;
        esac
        # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
        clock=(env)
        [ "$mode" = bpf-reuse ] && clock=(env RTLAB_BPF_CLOCK=reuse)
        [ "$mode" = bpf-every ] && clock=(env RTLAB_BPF_CLOCK=every)
        [ "$mode" = bpf-window ] && clock=(env RTLAB_BPF_WHOLE_WINDOW=1)
        "${clock[@]}" "$rtlab" run --duration "${seconds}s" --warmup 1s --no-store ${RUN_FLAGS:-} "${flags[@]}" \
            --json "$out/$mode-$round.json" > "$out/$mode-$round.txt"
    done
done
python3 - "$out" "$rounds" $modes <<'PY'
import json, math, statistics, sys
out, rounds, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def interval(values):
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
def mode_of(path):
    return path.rsplit("/", 1)[1].rsplit("-", 1)[0]
def recorder_of(path):
    return "bpf" if mode_of(path).startswith("bpf") else "tracefs"
def figures(path):
    record = json.load(open(path))
    row = {}
    for klass in ("rt-high", "normal"):
        series = [s for s in record["series"] if s["metric"] == "wakeup" and s["class"] == klass]
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
if "plain" in rows:
    for mode in modes:
        if mode == "plain":
            continue
        for key in ("rt-high p50", "normal p50", "rt-high p99", "normal p99"):
            pairs = [(row[key], base[key]) for row, base in zip(rows[mode], rows["plain"])
                     if row[key] == row[key] and base[key] == base[key]]
            if not pairs:
                continue
            ratios = sorted(after / before for after, before in pairs)
            quartiles = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
            low, high = interval(ratios)
            mean_shift = statistics.mean(a for a, _ in pairs) / statistics.mean(b for _, b in pairs) - 1
            print(f"{mode} {key}: paired shift median {100 * (statistics.median(ratios) - 1):+.1f} % "
                  f"(95 % interval {100 * (low - 1):+.1f} … {100 * (high - 1):+.1f} %; "
                  f"quartiles {100 * (quartiles[0] - 1):+.1f} … {100 * (quartiles[2] - 1):+.1f} %), "
                  f"shift of the means {100 * mean_shift:+.1f} %")
PY
echo "raw records: $out"
