#!/bin/sh
# `rtlab forecast --trace` across buffer sizes against one competitor (issue 27, item 3): two JACK
# servers at once (dummy driver, 48 kHz, FRAMES_A and FRAMES_B frames), a client on each working
# LOAD % of its period, one SCHED_FIFO competitor for both, and each client recorded with `rtlab
# trace record`. The FRAMES_A trace's forecast for FRAMES_B × 2 is then held against the FRAMES_B
# client's own glitches in the same window: the same stalls, at another buffer size.
#
#   flock /work/measure.lock bench/forecast-trace-pair.sh [CONDITION]
#
# CONDITION: fifo-long (default), fifo-short, fifo-6ms, stress or idle (as forecast-trace-vs-jack.sh).
# FRAMES_A (128), FRAMES_B (256), LOAD (30), DURATION (5) seconds of trace.
set -eu
HERE=$(cd "$(dirname "$0")" && pwd)
RTLAB=${RTLAB:-$HERE/../target/debug/rtlab}
OUT=${OUT:-$HERE/out/forecast-trace-pair}
DURATION=${DURATION:-5}
FRAMES_A=${FRAMES_A:-128}
FRAMES_B=${FRAMES_B:-256}
LOAD=${LOAD:-30}
BIN=${BIN:-$OUT/bin}
condition=${1:-fifo-long}
mkdir -p "$OUT" "$BIN"
[ -x "$BIN/xrun_client" ] || cc -O2 -o "$BIN/xrun_client" "$HERE/jack/xrun_client.c" -ljack -lpthread
[ -x "$BIN/fifo_hog" ] || cc -O2 -o "$BIN/fifo_hog" "$HERE/jack/fifo_hog.c" -lpthread
PIDS=
cleanup() { for pid in $PIDS; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM
name="$condition-$FRAMES_A-$FRAMES_B-l$LOAD"
rm -f "$OUT/$name".*
for frames in "$FRAMES_A" "$FRAMES_B"; do
  JACK_NO_AUDIO_RESERVATION=1 jackd -n "rtlabpair$$-$frames" -R -P 70 -d dummy -r 48000 -p "$frames" \
    >"$OUT/$name.$frames.jackd.log" 2>&1 &
  PIDS="$PIDS $!"
done
sleep 1
for frames in "$FRAMES_A" "$FRAMES_B"; do
  "$BIN/xrun_client" -s "rtlabpair$$-$frames" -w -l "$LOAD" -d $((DURATION + 4)) \
    -x "$OUT/$name.$frames.xruns" >"$OUT/$name.$frames.client.json" 2>"$OUT/$name.$frames.client.err" &
  eval "CLIENT_$frames=$!"
done
sleep 1
case $condition in
  idle) ;;
  stress) stress-ng --cpu 2 --timeout $((DURATION + 2))s >/dev/null 2>&1 & PIDS="$PIDS $!" ;;
  fifo-long) "$BIN/fifo_hog" -p 95 -b 2200 -P 50000 -d $((DURATION + 2)) >/dev/null 2>&1 & PIDS="$PIDS $!" ;;
  fifo-short) "$BIN/fifo_hog" -p 95 -b 1500 -P 30000 -d $((DURATION + 2)) >/dev/null 2>&1 & PIDS="$PIDS $!" ;;
  fifo-6ms) "$BIN/fifo_hog" -p 95 -b 6000 -P 20000 -A -d $((DURATION + 2)) >/dev/null 2>&1 & PIDS="$PIDS $!" ;;
  *) echo "unknown condition $condition" >&2; exit 2 ;;
esac
for frames in "$FRAMES_A" "$FRAMES_B"; do
  eval "client=\$CLIENT_$frames"
  "$RTLAB" trace record --pid "$client" -D "${DURATION}s" -o "$OUT/$name.$frames.rtlt" \
    >/dev/null 2>"$OUT/$name.$frames.record.err" &
  eval "RECORD_$frames=$!"
done
for frames in "$FRAMES_A" "$FRAMES_B"; do
  eval "wait \$RECORD_$frames" || true
  eval "wait \$CLIENT_$frames" || true
done
cleanup
PIDS=
for frames in "$FRAMES_A" "$FRAMES_B"; do
  "$RTLAB" forecast --trace "$OUT/$name.$frames.rtlt" --rate 48000 \
    --json "$OUT/$name.$frames.forecast.json" >"$OUT/$name.$frames.forecast.txt" 2>&1 || true
done
python3 - "$OUT" "$name" "$FRAMES_A" "$FRAMES_B" <<'PY'
import json, os, sys
out, name, a, b = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def load(frames):
    path = os.path.join(out, f"{name}.{frames}.forecast.json")
    return json.load(open(path)) if os.path.exists(path) else None
def glitches(frames, first, last):
    times = sorted(int(l) for l in open(os.path.join(out, f"{name}.{frames}.xruns")) if l.strip())
    count, previous = 0, None
    for time in times:
        if (previous is None or time - previous > 1_000_000) and first <= time <= last:
            count += 1
        previous = time
    return count
fa, fb = load(a), load(b)
if fa is None:
    sys.exit(f"no forecast from the {a}-frame trace: " + open(os.path.join(out, f"{name}.{a}.forecast.txt")).read())
first, last = fa["first_ns"], fa["last_ns"]
minutes = (last - first) / 60e9
for frames in (a, b):
    row = next((r for r in fa["rows"] if r["frames"] == frames and r["buffers"] == 2), None)
    observed = glitches(frames, first, last)
    if row is None or row["glitches"] is None:
        print(f"{name} {frames}x2: JACK {observed}, forecast from the {a}-frame trace: none")
        continue
    cut = "+" if row["lower_bound"] else ""
    print(f"{name} {frames}x2: JACK {observed} glitches in {(last - first) / 1e9:.1f} s; forecast from the {a}-frame trace {row['per_minute'] * minutes:.1f}{cut} ({row['per_minute_low'] * minutes:.1f}-{row['per_minute_high'] * minutes:.1f})")
if fb is not None:
    row = next(r for r in fb["rows"] if r["recorded"])
    fb_minutes = (fb["last_ns"] - fb["first_ns"]) / 60e9
    observed = glitches(b, fb["first_ns"], fb["last_ns"])
    print(f"{name} {b}x2 from its own trace: JACK {observed}; forecast {row['glitches']}{'+' if row['lower_bound'] else ''} ({row['per_minute_low'] * fb_minutes:.1f}-{row['per_minute_high'] * fb_minutes:.1f})")
PY
