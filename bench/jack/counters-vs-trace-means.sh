#!/bin/bash
# issue 37, item 1: where the kernel's counters and the trace part for a JACK thread. For each
# real-time thread of jackd (dummy driver, 128 frames at 48 kHz) and of a client working 30 % of
# each period: run time ÷ voluntary switches from /proc (read before and after) against the mean
# and p99 CPU per activation `rtlab trace analyze` finds in a 3 s `rtlab trace record` between
# the two reads. Run as root under the measurement lock:
#   flock -o /work/measure.lock bench/jack/counters-vs-trace-means.sh ROUNDS
set -euo pipefail
rounds=${1:-2}
HERE=$(cd "$(dirname "$0")/.." && pwd)
NAME=means
# shellcheck source=bench/jack/one-server.sh
source "$HERE/jack/one-server.sh"
"$work/xrun_client" -s "$server" -w -l 30 -d $((rounds * 20 + 10)) > /dev/null &
client_pid=$!
sleep 3
for round in $(seq "$rounds"); do
  for pid in "$jackd_pid" "$client_pid"; do
    fifo=$(for task in /proc/"$pid"/task/*; do
      if [ "$(awk '{print $41}' "$task/stat")" = 1 ]; then echo "${task##*/}"; fi; done)
    snapshot() { for tid in $fifo; do
      echo "$tid $(cut -d' ' -f1 /proc/"$tid"/schedstat) $(awk '/^voluntary_ctxt/ {print $2}' /proc/"$tid"/status)"; done; }
    snapshot > "$work/before"
    "$rtlab" trace record --pid "$pid" -D 3s -o "$work/t.trace" > /dev/null 2>&1
    snapshot > "$work/after"
    "$rtlab" trace analyze "$work/t.trace" --json - > "$work/analysis.json" 2> /dev/null
    python3 - "$work" "$round" <<'PY'
import json, sys
work, round_ = sys.argv[1], sys.argv[2]
read = lambda name: {line.split()[0]: list(map(int, line.split()[1:])) for line in open(f"{work}/{name}")}
before, after = read("before"), read("after")
rows = {str(row["tid"]): row for row in json.load(open(f"{work}/analysis.json"))["threads"]}
for tid, (run0, switches0) in before.items():
    run, switches = after[tid][0] - run0, after[tid][1] - switches0
    row = rows.get(tid)
    if row is None or switches == 0:
        continue
    cpu = row["cpu_per_activation_ns"]
    print("round %s %s (%s): counters %.1f us per switch (%d switches); trace mean %.1f us, p99 %.1f us (%d activations); mean ratio %.3f" % (
        round_, row["name"], tid, run / switches / 1e3, switches, cpu["mean"] / 1e3,
        cpu["p99"] / 1e3, row["activations"], run / switches / max(1, cpu["mean"])))
PY
  done
done
