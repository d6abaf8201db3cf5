#!/usr/bin/env bash
# Overhead of `rtlab run --explain` (issue 4, BENCHMARKS.md "explain").
#
# The same run with and without --explain, interleaved A B A B … so drifting background load hits
# both alike: every online CPU, rt-high/rt-mid/normal classes, 1 ms period, default threshold
# (each series' p99.9). Prints, per run, the median over CPUs of the rt-high and normal wake-up
# p50 and p99 (µs), the episodes explained and the trace events decoded, then the mean of each mode.
#
# usage: bench/explain-overhead.sh [SECONDS_PER_RUN=20] [ROUNDS=3]   (needs root and tracefs)
#        RUN_FLAGS="--classes rt-high --no-handoff" bench/explain-overhead.sh …  (extra run flags)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
rounds=${2:-3}
rtlab=${RTLAB:-target/release/rtlab}
out=bench/out/explain-overhead-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
[ -x "$rtlab" ] || cargo build --release -p rtlab
for round in $(seq 1 "$rounds"); do
    for mode in plain explain; do
        flags=()
        [ "$mode" = explain ] && flags=(--explain)
        # shellcheck disable=SC2086 # RUN_FLAGS is a list of flags
        "$rtlab" run --duration "${seconds}s" --warmup 1s --no-store ${RUN_FLAGS:-} "${flags[@]}" \
            --json "$out/$mode-$round.json" > "$out/$mode-$round.txt"
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
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
    row["events"] = trace.get("decoded_events", 0)
    row["lost"] = trace.get("lost_events", 0)
    return row
keys = ["rt-high p50", "rt-high p99", "normal p50", "normal p99", "episodes", "events", "lost"]
print("run        " + "".join(f"{key:>13}" for key in keys))
means = {}
for round in range(1, rounds + 1):
    for mode in ("plain", "explain"):
        row = figures(f"{out}/{mode}-{round}.json")
        means.setdefault(mode, []).append(row)
        print(f"{mode:<7}{round:<4}" + "".join(f"{row[key]:>13.1f}" for key in keys))
for mode, rows in means.items():
    print(f"{mode:<7}mean" + "".join(f"{statistics.mean(row[key] for row in rows):>13.1f}" for key in keys))
plain, explain = means["plain"], means["explain"]
for key in ("rt-high p50", "normal p50"):
    if any(row[key] != row[key] for row in plain):
        continue
    before = statistics.mean(row[key] for row in plain)
    after = statistics.mean(row[key] for row in explain)
    print(f"median shift {key}: {100 * (after - before) / before:+.1f} %")
PY
echo "raw records: $out"
