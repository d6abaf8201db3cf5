#!/usr/bin/env bash
# Episodes the BPF ring buffer had no room for (BENCHMARKS.md "Lost episodes"), with episodes as
# tails (the default) and as whole 1024-event windows (RTLAB_BPF_WHOLE_WINDOW=1, what every
# episode was before), interleaved, under `stress-ng --cpu 2 --io 1 --vm 1` so the explainer's
# reader is starved: the late wake-ups, the episodes kept and the episodes lost per run.
#
# usage: bench/explain-ring.sh [SECONDS=10] [ROUNDS=4]   (needs root; run under
#        flock /work/measure.lock)
. "$(dirname "$0")/lib.sh"
seconds=${1:-10}
rounds=${2:-4}
bench_start explain-ring
stress-ng --cpu 2 --io 1 --vm 1 --vm-bytes 256M --timeout "$(( (seconds + 3) * rounds * 2 + 10 ))s" \
    > "$out/stress.txt" 2>&1 &
stress=$!
trap 'kill "$stress" 2>/dev/null; wait "$stress" 2>/dev/null || true' EXIT
sleep 2
for round in $(seq 1 "$rounds"); do
    for mode in tail window; do
        env=()
        [ "$mode" = window ] && env=(RTLAB_BPF_WHOLE_WINDOW=1)
        env "${env[@]}" "$rtlab" run --explain --explain-recorder bpf --duration "${seconds}s" \
            --warmup 1s --no-store ${RUN_FLAGS:-} --json "$out/$mode-$round.json" > "$out/$mode-$round.txt" 2>&1
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
totals = {}
for round in range(1, rounds + 1):
    for mode in ("tail", "window"):
        record = json.load(open(f"{out}/{mode}-{round}.json"))
        explain = record["config"].get("explain", {})
        kept = len(record["episodes"])
        lost = explain.get("lost_events", 0)
        late = (record["config"].get("explain_trace") or {}).get("late_samples", 0)
        total = totals.setdefault(mode, [0, 0, 0])
        total[0] += late
        total[1] += kept
        total[2] += lost
        print(f"{mode:<7}{round:<3} late samples {late:>6}  episodes kept {kept:>6}  lost {lost:>6}")
for mode, (late, kept, lost) in totals.items():
    print(f"{mode:<7}all late samples {late:>6}  episodes kept {kept:>6}  lost {lost:>6}")
PY
echo "raw: $out"
