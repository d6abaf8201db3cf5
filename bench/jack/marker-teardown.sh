#!/usr/bin/env bash
# Does recording disturb the program it records? JACK (dummy driver, 128 frames, 2.667 ms) and
# xrun_client at 30 % of each period, idle, recorded for 4 s by `rtlab trace record --pid CLIENT`
# in each MODE (default: all, ROUNDS times each): bpf and tracefs, without markers, with
# `--cycle-marker jack`, and with the client's work-done marker too. Prints the client's xruns
# during and just after each recording (from the recording's start to 3 s after it ended), with
# their times from its start: an xrun just after 4 s is the recorder's teardown.
# usage: flock /work/measure.lock bench/jack/marker-teardown.sh [ROUNDS] [MODE…]
set -euo pipefail
HERE=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${1:-2}
shift || true
MODES=${*:-bpf bpf-cycle bpf-both tracefs tracefs-cycle tracefs-both}
RTLAB=${RTLAB:-$HERE/../target/debug/rtlab}
OUT=${OUT:-/tmp/rtlab-marker-teardown}
BIN=$OUT/bin
SERVER=mtd$$
source "$HERE/jack/harness.sh"
name=teardown
start_jack 128 "$name"
sleep 2
now() { python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC))'; }
for round in $(seq "$ROUNDS"); do
  for mode in $MODES; do
    load=30
    start_client 9
    sleep 1.5
    recorder=${mode%%-*}
    markers=()
    case $mode in
      *-cycle) markers=(--cycle-marker jack) ;;
      *-both) markers=(--cycle-marker jack --work-done-marker "$BIN/xrun_client:process") ;;
    esac
    start=$(now)
    "$RTLAB" trace record --recorder "$recorder" "${markers[@]}" --pid "$CLIENTPID" -D 4s \
      -o "$OUT/$mode.rtlt" 2>"$OUT/$mode.record.err"
    ended=$(now)
    wait "$CLIENTPID" || true
    CLIENTPID=
    python3 - "$OUT/$name.xruns" "$start" "$ended" "$mode" "$round" <<'PY'
import sys
path, start, ended, mode, round_ = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
xruns = [int(line) for line in open(path) if line.strip()]
near = [(t - start) / 1e9 for t in xruns if start <= t <= ended + 3_000_000_000]
print(f"round {round_} {mode:14} xruns {len(near)} at {', '.join(f'{t:.3f}' for t in near) or '-'} s; the recorder stopped at {(ended - start) / 1e9:.3f} s")
PY
  done
done
