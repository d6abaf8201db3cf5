#!/bin/bash
# issue 26's table: JACK (dummy driver, 128 frames, 2.667 ms), a client working 30 % of each
# period, a SCHED_FIFO 95 competitor (6 ms every 20 ms on every CPU). Per round: xruns idle
# (client 20 s), unreserved under the competitor (client 20 s, competitor 20 s), and with
# `rtlab reserve --auto --pid CLIENT` made before the competitor starts (client 30 s: 3 s
# observing, 3 s checking, then the competitor's 20 s), with the CPU the reservations took
# against what they asked. Run as root under the measurement lock:
#   flock /work/measure.lock bench/jack/reserve-auto.sh ROUNDS
set -euo pipefail
rounds=${1:-3}
here=$(cd "$(dirname "$0")" && pwd)
rtlab=${RTLAB:-$here/../../target/debug/rtlab}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
cc -O2 -o "$work/xrun_client" "$here/xrun_client.c" -ljack -lpthread
cc -O2 -o "$work/fifo_hog" "$here/fifo_hog.c" -lpthread
export JACK_NO_AUDIO_RESERVATION=1 RTLAB_SOCKET=$work/rtlabd.sock
printf 'state_dir = "%s/state"\n' "$work" > "$work/rtlabd.toml"
"$rtlab" daemon --config "$work/rtlabd.toml" --socket "$RTLAB_SOCKET" 2> "$work/daemon.log" &
server=bench$$
jackd -n "$server" -R -P 70 -d dummy -r 48000 -p 128 > /dev/null 2>&1 &
jackd_pid=$!
sleep 2
client() { "$work/xrun_client" -s "$server" -w -l 30 -d "$1" | python3 -c 'import json,sys; print(json.load(sys.stdin)["xruns"])'; }
for round in $(seq "$rounds"); do
  idle=$(client 20)
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d 20 &
  hog=$!
  unreserved=$(client 20)
  wait "$hog" || true
  rm -f "$work/xruns.log"
  "$work/xrun_client" -s "$server" -w -l 30 -d 30 -x "$work/xruns.log" > "$work/reserved.json" &
  pid=$!
  sleep 1
  "$rtlab" reserve --auto --pid "$pid" --observe 3s --json "$work/auto.json" > /dev/null
  hog_start=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))')
  "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d 20 &
  hog=$!
  wait "$pid"
  wait "$hog" || true
  # xruns while the competitor ran (20 s), as in the unreserved round.
  reserved=$(awk -v start="$hog_start" '$1 >= start { n++ } END { print n + 0 }' "$work/xruns.log")
  total=$(python3 -c 'import json; print(json.load(open("'"$work"'/reserved.json"))["xruns"])')
  shares=$(python3 -c '
import json
d = json.load(open("'"$work"'/auto.json"))
print(d["outcome"], "; ".join("%s %s: asked %.1f %%, took %.1f %% (%s, %d periods/window)" % (r["name"], r["tid"], 100*r["asked_share"], 100*(r["granted_share"] or 0), r["backend"], r["periods_per_window"]) for r in d["reservations"]))')
  echo "round $round: idle $idle, unreserved $unreserved, reserve --auto $reserved ($total in the client's 30 s; $shares)"
  "$rtlab" release --pid "$jackd_pid" > /dev/null || true
  sleep 2
done
