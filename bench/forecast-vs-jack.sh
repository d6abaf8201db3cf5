#!/bin/sh
# Forecast against a real application (issue 27): Debian's jackd2 (dummy driver, 48 kHz), a client
# burning L % of each period (bench/jack/xrun_client.c, JACK's own xrun callback is the truth) and
# `rtlab run --classes rt-high --compute 100us` measuring at the same time (the probe works 100 µs
# after each wake-up to see the stalls that land during a compute; RUN_ARGS replaces those
# arguments, e.g. RUN_ARGS= for a default run and its verdict), under an optional load.
# For each cell it keeps the client's JSON, its xrun log and the Run record; bench/forecast-vs-jack.py
# puts the observed xruns beside `rtlab forecast`'s rate and 90 % interval.
#
#   flock /work/measure.lock bench/forecast-vs-jack.sh [CELL ...]
#   RUNS=8 LOCK=/work/measure.lock bench/forecast-vs-jack.sh [CELL ...]
#
# A CELL is FRAMES:LOAD%:CONDITION, CONDITION one of idle, stress (stress-ng --cpu 2 at nice 0),
# fifo-long (FIFO 95, 2.2 ms every 50 ms on both CPUs), fifo-short (FIFO 95, 1.5 ms every 30 ms),
# fifo-6ms (FIFO 95, 6 ms every 20 ms: bench/jack/README.md's competitor, longer than a period),
# or pin-B-P (issue 35's validation: FIFO 95, B µs every P µs on CPU 1 only, the client on CPU 1,
# jackd -- the dummy driver's clock -- on CPU 0, the client burning CPU time (xrun_client -c) and
# `rtlab run --classes rt-high --cpus 1`: a clock that runs on while the competitor holds every
# CPU the client may use).
# Default cells: the prioritised grid of BENCHMARKS.md. DURATION (default 30) seconds per cell.
# RUNS (default 1) runs of every cell, round by round (run k of every cell, then run k + 1), each
# with its own jackd and competitor (a fresh phase) and named ...-rK. With LOCK set, each run takes
# that lock (flock -o) for itself alone, so a long matrix never holds it for more than one run.
# The dummy driver has no periods option (`jackd -d dummy --help`): a JACK period count cannot
# be set with it, so every cell is JACK's n = 2 (async engine: one period to finish).
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RTLAB=${RTLAB:-$HERE/../target/debug/rtlab}
OUT=${OUT:-$HERE/out/forecast-vs-jack}
DURATION=${DURATION:-30}
BIN=${BIN:-$OUT/bin}
. "$HERE/jack/harness.sh"
CELLS=${*:-"128:30:idle 128:30:fifo-long 128:30:fifo-short 128:30:stress 128:10:idle 128:60:idle 64:30:idle 256:30:idle 128:10:fifo-long 128:60:fifo-long 64:30:fifo-long 256:30:fifo-long 64:30:fifo-short 256:30:fifo-short 128:60:stress"}
SERVER=rtlabfvj$$
RUNS=${RUNS:-1}
if [ -n "${LOCK:-}" ] || [ "$RUNS" -gt 1 ]; then
  run=1
  while [ "$run" -le "$RUNS" ]; do
    for cell in $CELLS; do
      if [ -n "${LOCK:-}" ]; then
        # The run takes the lock; the script it runs must not take it again (LOCK='').
        # shellcheck disable=SC2097,SC2098
        RUN=$run RUNS=1 LOCK='' RTLAB=$RTLAB OUT=$OUT BIN=$BIN DURATION=$DURATION \
          flock -o "$LOCK" "$0" "$cell" || true
      else
        RUN=$run RUNS=1 RTLAB=$RTLAB OUT=$OUT BIN=$BIN DURATION=$DURATION "$0" "$cell" || true
      fi
    done
    run=$((run + 1))
  done
  exit 0
fi
for cell in $CELLS; do
  start_cell "$cell" $((DURATION + 3)) $((DURATION + 2))
  # Pinned: the probe on the client's CPU alone, without --compute (its 100 µs a wake-up would
  # take 10 % of the CPU from the client it measures beside).
  args="--classes rt-high --compute 100us"
  if pinned "$condition"; then args="--classes rt-high --cpus 1"; fi
  # shellcheck disable=SC2086
  "$RTLAB" run ${RUN_ARGS-$args} --warmup 0s -D "${DURATION}s" \
    --no-store --json "$OUT/$name.run.json" >/dev/null 2>"$OUT/$name.run.err" || true
  end_cell
  printf '%s %s\n' "$name" "$(cat "$OUT/$name.client.json")"
done
