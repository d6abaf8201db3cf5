#!/bin/bash
# issue 40's PipeWire table: a private PipeWire 0.3.65 (Dummy-Driver, quantum forced to 128 at
# 48 kHz, no session manager; the tests' configuration, tests/common/pipewire.rs), the JACK
# client bench/jack/xrun_client.c through pw-jack working 30 % of each cycle, the SCHED_FIFO 95
# competitor (6 ms every 20 ms on both CPUs, bursts aligned: -A). Per round, 20 s of `rtlab
# trace watch --comm xrun_client --summary-json`, which prints PipeWire's profiler count beside
# rtlab's for the same window (judged by PipeWire's cycle: it takes --cycle-marker pipewire for
# a PipeWire client): idle, beside the competitor, and beside it after `rtlab reserve --auto
# --pid CLIENT` (3 s observing, its check, then the competitor), with the CPU the reservations
# took against what they asked. Run as root under the measurement lock:
#   flock -o /work/measure.lock bench/pipewire/pipewire-count.sh ROUNDS
set -euo pipefail
rounds=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/pipewire/server.sh
source "$here/server.sh"
pipewire_bench_setup
pipewire_bench_daemon_and_server
client() { pw-jack "$work/xrun_client" -n jackload -w -l 30 -d "$1" > /dev/null 2>&1 & }
watch() {
  "$rtlab" trace watch --comm xrun_client -D 20s --summary-json "$work/$1.json" > /dev/null 2> "$work/$1.err" || { echo "watch failed: $(tail -3 "$work/$1.err")"; return; }
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1])); p = d.get("pipewire", {})
if p.get("status") != "counted": print("PipeWire: %s" % p); sys.exit()
top = p.get("top_competitor") or {}
print("PipeWire %d, rtlab %d (ratio %.2f, %d naming %s) in %.1f s" % (p["pipewire_unfinished"],
  d["misses"], d["misses"] / max(p["pipewire_unfinished"], 1), top.get("misses", 0),
  top.get("label", "-"), d["seconds"]))' "$work/$1.json"
}
for round in $(seq "$rounds"); do
  client 24; pid=$!; sleep 2
  idle=$(watch idle); wait "$pid" || true; echo "round $round: idle: $idle"
  client 24; pid=$!; sleep 1
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d 22 & hog=$!
  sleep 1
  unreserved=$(watch competitor); wait "$pid" || true; wait "$hog" || true; echo "round $round: competitor: $unreserved"
  client 40; pid=$!; sleep 2
  "$rtlab" reserve --auto --pid "$(pgrep -n -x xrun_client)" --observe 3s --json "$work/auto.json" > /dev/null
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d 22 & hog=$!
  sleep 1
  reserved=$(watch reserved); wait "$hog" || true; kill "$pid" 2>/dev/null || true; wait "$pid" || true
  shares=$(python3 -c '
import json
d = json.load(open("'"$work"'/auto.json"))
print(d["outcome"], "; ".join("%s %s: asked %.1f %%, took %.1f %% (%s)" % (r["name"], r["tid"], 100*r["asked_share"], 100*(r["granted_share"] or 0), r["backend"]) for r in d["reservations"]))')
  echo "round $round: idle: $idle | competitor: $unreserved | competitor + reserve --auto: $reserved | $shares"
  "$rtlab" release --all-mine > /dev/null 2>&1 || true
  sleep 2
done
