#!/bin/sh
# `rtlab forecast --trace` against a real application (issue 27, item 3): Debian's jackd2 (dummy
# driver, 48 kHz), a client burning L % of each period (bench/jack/xrun_client.c; JACK's own xrun
# callback is the truth), a SCHED_FIFO competitor, and `rtlab trace record --pid CLIENT -D 10s`.
# For each cell it keeps the client's JSON, its xrun log, the trace and `rtlab forecast --trace
# --rate 48000 --json`; bench/forecast-trace-vs-jack.py puts JACK's glitches in the trace's window
# (xrun callbacks within 1 ms merged) beside the forecast at the recorded buffering, and a cell at
# other frames beside the forecast the 128-frame trace of the same condition made for it.
#
#   flock /work/measure.lock bench/forecast-trace-vs-jack.sh [CELL ...]
#
# A CELL is FRAMES:LOAD%:CONDITION, CONDITION one of idle, stress (stress-ng --cpu 2), fifo-long (FIFO 95, 2.2 ms every 50 ms
# on both CPUs), fifo-short (FIFO 95, 1.5 ms every 30 ms), fifo-6ms (6 ms every 20 ms, aligned).
# DURATION (default 10) seconds of trace per cell.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RTLAB=${RTLAB:-$HERE/../target/debug/rtlab}
OUT=${OUT:-$HERE/out/forecast-trace-vs-jack}
DURATION=${DURATION:-10}
BIN=${BIN:-$OUT/bin}
. "$HERE/jack/harness.sh"
CELLS=${*:-"128:30:fifo-long 256:30:fifo-long 64:30:fifo-long 128:30:fifo-short 256:30:fifo-short 128:30:idle"}
SERVER=rtlabftj$$
for cell in $CELLS; do
  start_cell "$cell" $((DURATION + 4)) $((DURATION + 2)) -A
  "$RTLAB" trace record --pid "$CLIENTPID" -D "${DURATION}s" -o "$OUT/$name.rtlt" \
    >/dev/null 2>"$OUT/$name.record.err" || true
  end_cell
  "$RTLAB" forecast --trace "$OUT/$name.rtlt" --rate 48000 --json "$OUT/$name.forecast.json" \
    >"$OUT/$name.forecast.txt" 2>&1 || true
  printf '%s %s\n' "$name" "$(cat "$OUT/$name.client.json")"
done
