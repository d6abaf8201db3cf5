#!/bin/bash
# issue 40, item 1: rtlab's count by PipeWire's cycle (`trace watch`, which takes
# `--cycle-marker pipewire` for a PipeWire client) against PipeWire's own (its profiler, the
# same window). A private PipeWire 0.3.65 (the tests' configuration: Dummy-Driver, quantum 128
# at 48 kHz), bench/jack/xrun_client.c through pw-jack working 30 % of each cycle, the
# SCHED_FIFO 95 competitor (6 ms every 20 ms on every CPU, bursts aligned: -A). Per round:
# SECONDS of watch beside the competitor; prints PipeWire's unfinished cycles, rtlab's misses,
# their ratio and how many misses name the competitor. Run as root under the measurement lock:
#   flock -o /work/measure.lock bench/pipewire/pipewire-marker.sh ROUNDS [SECONDS] [WATCH FLAGS…]
set -euo pipefail
rounds=${1:-5}
seconds=${2:-20}
shift $(( $# < 2 ? $# : 2 ))
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/pipewire/server.sh
source "$here/server.sh"
pipewire_bench_setup
pipewire_server "$work" &
sleep 1
pipewire_force_quantum
for round in $(seq "$rounds"); do
  pw-jack "$work/xrun_client" -n jackload -w -l 30 -d $((seconds + 4)) > /dev/null 2>&1 & client=$!
  sleep 1
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d $((seconds + 3)) & hog=$!
  sleep 1
  "$rtlab" trace watch --comm xrun_client -D "${seconds}s" --summary-json "$work/summary.json" \
    --json "$work/misses.jsonl" "$@" > /dev/null 2> "$work/watch.err" || { cat "$work/watch.err"; exit 1; }
  wait "$hog" || true; wait "$client" || true
  python3 - "$work/summary.json" "$work/misses.jsonl" "$round" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); p = d.get("pipewire", {})
if p.get("status") != "counted":
    print("round %s: PipeWire: %s" % (sys.argv[3], p)); sys.exit()
def competitor(c): return c.get("kind") == "thread" and str(c.get("name", "")).startswith("qhog")
misses = [json.loads(l) for l in open(sys.argv[2])]
during = [m for m in misses if any(competitor(c) for s in m.get("critical_path", []) for c in s.get("culprits", []))]
naming = sum(1 for m in during if competitor(m.get("culprit") or {}))
hyper = sum(1 for m in misses if (m.get("culprit") or {}).get("kind") == "hypervisor")
pw, rt = p["pipewire_unfinished"], d["misses"]
print("round %s: PipeWire %d, rtlab %d: ratio %.2f in %.1f s; %d of %d late activations during the competitor's bursts name it, %d blamed on the hypervisor"
      % (sys.argv[3], pw, rt, rt / max(pw, 1), d["seconds"], naming, len(during), hyper))
PY
  sleep 1
done
