#!/bin/bash
# issue 37, item 1: the CPU per activation (p99, as `reserve --auto` sizes it) and the period
# from the kernel's per-task counters (`--observe-with schedstat`, sampled every millisecond)
# against the trace's, on the same 3 s of the same threads (both observers run at once).
# JACK: dummy driver, 128 frames at 48 kHz (2.667 ms), a client working LOAD % of each period.
# `--dry-run --json` reports each chosen thread's need (p99 + 20 %, at least 10 µs) and period;
# the ratio of the needs is the ratio of the p99s. SEQUENTIAL=1 observes one after the other
# instead (each without the other's cost, on different 3 s). Run as root under the lock:
#   flock -o /work/measure.lock bench/jack/observe-without-trace.sh ROUNDS LOAD
set -euo pipefail
rounds=${1:-5}
load=${2:-30}
HERE=$(cd "$(dirname "$0")/.." && pwd)
NAME=observe
# shellcheck source=bench/jack/one-server.sh
source "$HERE/jack/one-server.sh"
"$work/xrun_client" -s "$server" -n observed -w -l "$load" -d $((rounds * 8 + 10)) > /dev/null &
client_pid=$!
sleep 2
for round in $(seq "$rounds"); do
  for pid in "$client_pid" "$jackd_pid"; do
    "$rtlab" reserve --auto --pid "$pid" --observe 3s --dry-run --json "$work/trace.json" > /dev/null &
    traced=$!
    if [ "${SEQUENTIAL:-0}" = 1 ]; then wait "$traced" || true; fi
    "$rtlab" reserve --auto --pid "$pid" --observe 3s --dry-run --observe-with schedstat \
      --json "$work/counters.json" > /dev/null || true
    wait "$traced" || true
    python3 - "$work/trace.json" "$work/counters.json" "$round" <<'PY'
import json, sys
trace, counters = (json.load(open(path)) for path in sys.argv[1:3])
by_tid = {r["tid"]: r for r in counters["reservations"]}
for r in trace["reservations"]:
    if r["why_thread"].startswith("wakes "):
        continue  # the counters cannot find a waker
    c = by_tid.get(r["tid"])
    if c is None:
        print("round %s %s (%d): trace need %.1f us, counters found no periodic thread (%s)" % (
            sys.argv[3], r["name"], r["tid"], r["need_per_activation_ns"] / 1e3,
            "; ".join(counters["passed_over"]) or counters.get("reason")))
        continue
    print("round %s %s (%d): need trace %.1f us, counters %.1f us (ratio %.3f); period trace %.1f us, counters %.1f us (ratio %.4f)" % (
        sys.argv[3], r["name"], r["tid"],
        r["need_per_activation_ns"] / 1e3, c["need_per_activation_ns"] / 1e3,
        c["need_per_activation_ns"] / r["need_per_activation_ns"],
        r["period_ns"] / 1e3, c["period_ns"] / 1e3, c["period_ns"] / r["period_ns"]))
PY
  done
done
