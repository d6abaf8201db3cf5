#!/usr/bin/env bash
# `rtlab trace analyze` against JACK's own xrun count (issue 26), ROUNDS rounds (default 6)
# alternating the recorders (bpf, tracefs), each recording `--cycle-marker jack` and the
# client's callback's return as its work-done marker (set MARKER= to record without markers,
# judged by the inferred rule). One round: jackd (dummy
# driver, 128 frames at 48 kHz), xrun_client at 30 % of each period logging every xrun (-x), the
# issue's competitor (fifo_hog FIFO 95, 6 ms every 20 ms, bursts aligned on every CPU) 1.5 s
# later, `rtlab trace record --pid CLIENT -D 10s`, then `rtlab trace analyze --json`. Prints one
# line per round: JACK's xruns in the trace's window, the client thread's late activations, the
# ratio, and how many of the listed late activations name the competitor.
# usage: flock /work/measure.lock bench/jack/trace-vs-xruns.sh [ROUNDS]
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-6}
MARKER=${MARKER-jack}
RTLAB=${RTLAB:-$HERE/../target/debug/rtlab}
OUT=${OUT:-/tmp/rtlab-trace-vs-xruns}
BIN=$OUT/bin
SERVER=tvx$$
source "$HERE/jack/harness.sh"
for round in $(seq 1 "$ROUNDS"); do
  recorder=$([ $((round % 2)) = 1 ] && echo bpf || echo tracefs)
  start_cell 128:30:fifo-6ms 14 12 -A
  "$RTLAB" trace record --recorder "$recorder" \
    ${MARKER:+--cycle-marker "$MARKER" --work-done-marker "$BIN/xrun_client:process"} \
    --pid "$CLIENTPID" -D 10s -o "$OUT/$name.rtlt" 2>"$OUT/$name.record.err"
  end_cell
  "$RTLAB" trace analyze --json "$OUT/$name.json" "$OUT/$name.rtlt" >/dev/null
  python3 - "$OUT/$name" "$round" "$recorder" <<'PY'
import json, sys
prefix, round_, recorder = sys.argv[1:4]
analysis = json.load(open(prefix + ".json"))
client = json.load(open(prefix + ".client.json"))
xruns = [int(line) for line in open(prefix + ".xruns") if line.strip()]
in_window = sum(1 for t in xruns if analysis["first_ns"] <= t <= analysis["last_ns"])
row = next(r for r in analysis["threads"] if r["tid"] == client["process_tid"])
listed = [l for l in analysis["late_activations"] if l["thread"]["tid"] == client["process_tid"]]
qhog = sum(1 for l in listed if (l.get("culprit") or {}).get("name", "").startswith("qhog"))
late = row["late_activations"]
print(f"round {round_} {recorder} {analysis['deadline_source']}: JACK xruns {in_window}, "
      f"late {late} (missed periods {row['missed_periods']}), ratio {late / max(in_window, 1):.2f}, "
      f"names qhog {qhog} of {len(listed)}")
PY
done
