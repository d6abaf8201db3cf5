#!/bin/sh
# The catch-up producer of issue 35 (item 4): a producer that catches up after a stall (SCHED_FIFO
# 50 on one CPU, woken by an absolute 1 ms timer, 0.1 ms of work a buffer: `rtlab
# buffer-experiment`, whose device counts a buffer finished after its slot as an underrun, for
# n = 2 and 4 at once) under `stress-ng --cpu 2 --io 1`, with `rtlab run --cpus CPU --classes
# rt-high` beside it for the same time. Then `rtlab forecast RUN --buffers n --buffer 1ms
# --compute 100us` counted both ways (--counts restart, --counts catch-up) against the
# producer's underruns.
# Run as root, under the shared lock:  flock -o /work/measure.lock bench/forecast-catch-up.sh
# Output: $OUT/{run,producer}.json, $OUT/forecast-n*-*.json and the table on stdout.
# About DURATION + 10 s. Everything it starts stops on its own (stress-ng's --timeout, -D).
set -eu
RTLAB=${RTLAB:-target/debug/rtlab}
OUT=${OUT:-bench/out/forecast-catch-up}
DURATION=${DURATION:-40}
CPU=${CPU:-1}
mkdir -p "$OUT"
stress-ng --cpu 2 --io 1 --timeout $((DURATION + 5))s -q &
LOADPID=$!
trap 'kill "$LOADPID" 2>/dev/null || true' EXIT INT TERM
sleep 2
"$RTLAB" run --cpus "$CPU" --classes rt-high -D "${DURATION}s" --no-store --json "$OUT/run.json" >/dev/null 2>&1 &
RUNPID=$!
"$RTLAB" buffer-experiment --producer fifo:50 --producer-cpu "$CPU" --period 1ms --compute 100us \
  --buffers 2,4 -D "${DURATION}s" --no-store --json "$OUT/producer.json" >/dev/null 2>&1
wait "$RUNPID"
wait "$LOADPID" || true
for n in 2 4; do
  for counts in restart catch-up; do
    "$RTLAB" forecast "$OUT/run.json" --buffers "$n" --buffer 1ms --compute 100us \
      --counts "$counts" --json "$OUT/forecast-n$n-$counts.json" >/dev/null 2>&1 || true
  done
done
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
producer = json.load(open(f"{out}/producer.json"))["config"]["buffer_experiment"]
seconds = producer["periods"] * producer["buffer_period_ns"] / 1e9
print("| n | producer's underruns | observed /s | counts | forecast /s (90 % CI) | forecast ÷ observed |")
print("| ---: | ---: | ---: | --- | --- | ---: |")
for n in ("2", "4"):
    underruns = producer["underruns"][n]["underruns"]
    observed = underruns / seconds
    for counts in ("restart", "catch-up"):
        forecast = json.load(open(f"{out}/forecast-n{n}-{counts}.json"))
        row = forecast["rows"][0]
        rate = 1 / row["mttf_s"] if row["mttf_s"] else 0.0
        low, high = row["mttf_ci_s"]
        interval = f"{1 / high if high else 0:.3f}–{1 / low if low else float('inf'):.3f}"
        ratio = f"{rate / observed:.2f}" if observed else "-"
        print(f"| {n} | {underruns} | {observed:.3f} | {counts} | {rate:.3f} ({interval}) | {ratio} |")
for found in forecast.get("periodic", []):
    print("periodic:", found["text"])
PY
