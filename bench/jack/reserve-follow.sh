#!/bin/bash
# issue 37's table: JACK (dummy driver, 128 frames, 2.667 ms), a client whose work per callback
# steps 20 % → 50 % → 30 % of the period (10 s each), then keeps its work while JACK's buffer
# changes 128 → 256 frames (`jack_bufsize`: 30 % of the new 5.333 ms period, 10 s), beside a
# SCHED_FIFO 95 competitor (6 ms every 20 ms on both CPUs, aligned), JACK's own xrun callback
# counted per step. Modes, each a fresh client:
#   idle      no competitor, no reservation
#   none      the competitor, no reservation
#   oneshot   `rtlab reserve --auto --pid CLIENT` made at 20 % before the competitor starts
#   follow    `rtlab reserve --auto --follow --pid CLIENT`, the same, then following
# The client holds 20 % until the reservation is made (3 s observing, 3 s checking), then the
# competitor starts and the steps begin (SIGUSR1). Prints one line per mode: xruns per step, and
# for follow its log of changes; for the reserving modes, per step, the CPU the reservations took
# (the kernel's runtime ÷ window, summed over the client and jackd's thread) against the CPU those
# threads used (bench/reserve-shares.py). Run as root under the measurement lock, one round per hold
# (about 2.5 minutes):
#   flock -o /work/measure.lock bench/jack/reserve-follow.sh [MODES...]
# FOLLOW_WINDOW=250ms sets --follow's window (default 1 s).
set -euo pipefail
modes=("${@:-idle none oneshot follow}")
# shellcheck disable=SC2206
modes=(${modes[*]})
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
per_step() { # xrun log, client JSON → "a b c"
  python3 - "$1" "$2" <<'EOF'
import json, sys
xruns = [int(line) for line in open(sys.argv[1]) if line.strip()]
starts = json.load(open(sys.argv[2]))["step_starts_ns"]
ends = starts[1:] + [starts[-1] + 10_000_000_000]
print(" ".join(str(sum(1 for x in xruns if s <= x < e)) for s, e in zip(starts, ends)))
EOF
}
for mode in "${modes[@]}"; do
  : > "$work/xruns.log"
  "$work/xrun_client" -s "$server" -w -l 20 -S 20,50,30,60 -t 10 -W -x "$work/xruns.log" \
    > "$work/client.json" 2> "$work/client.err" &
  client=$!
  until grep -q active "$work/client.err" 2>/dev/null; do sleep 0.1; done
  sleep 1
  follower=
  case $mode in
    oneshot)
      # A rollback (misses rose during the check) exits 1: reported below as its outcome.
      "$rtlab" reserve --auto --pid "$client" --observe 3s --json "$work/auto.json" > "$work/auto.out" || true ;;
    follow)
      "$rtlab" reserve --auto "--follow${FOLLOW_WINDOW:+=$FOLLOW_WINDOW}" --pid "$client" --observe 3s --json "$work/auto.json" > "$work/auto.out" &
      follower=$!
      until grep -q "^following " "$work/auto.out" 2>/dev/null; do
        kill -0 "$follower" 2>/dev/null || { echo "reserve --auto --follow ended early:"; cat "$work/auto.out"; break; }
        sleep 0.1
      done ;;
  esac
  shares=
  if [ "$mode" = oneshot ] || [ "$mode" = follow ]; then
    python3 "$here/../reserve-shares.py" "$rtlab" "$work/shares.jsonl" & shares=$!
  fi
  hog=
  if [ "$mode" != idle ]; then
    "$work/fifo_hog" -p 95 -b 6000 -P 20000 -A -d 41 &
    hog=$!
  fi
  kill -USR1 "$client"
  # The fourth step: the same work (60 % of the 128-frame period) at 256 frames.
  (sleep 30; JACK_DEFAULT_SERVER=$server jack_bufsize 256 > /dev/null) &
  resize=$!
  wait "$client"
  wait "$resize" || true
  JACK_DEFAULT_SERVER=$server jack_bufsize 128 > /dev/null
  [ -n "$hog" ] && { wait "$hog" || true; }
  [ -n "$shares" ] && { kill -TERM "$shares"; wait "$shares" || true; }
  if [ -n "$follower" ]; then
    # jackd's thread (reserved as the client's waker) outlives the client: Ctrl-C ends the
    # follow, which releases what it made.
    kill -INT "$follower" 2>/dev/null || true
    wait "$follower" || true
  fi
  echo "$mode: xruns per step (20 % / 50 % / 30 % / 30 % at 256 frames): $(per_step "$work/xruns.log" "$work/client.json")"
  if [ -n "$shares" ]; then
    read -r -a spans <<< "$(python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["step_starts_ns"]
print(" ".join("%d %d" % (a, b) for a, b in zip(s, s[1:] + [s[-1] + 10_000_000_000])))' "$work/client.json")"
    for i in 0 2 4 6; do
      echo "  step $((i / 2 + 1)): $(python3 "$here/../reserve-shares.py" --summary "$work/shares.jsonl" "${spans[i]}" "${spans[i + 1]}")"
    done
  fi
  if [ "$mode" = oneshot ] || [ "$mode" = follow ]; then
    python3 - "$work/auto.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["reservations"]:
    print("  %s %s: %s, asked %.1f %% (%s, %d periods/window), took %.1f %%" % (r["name"], r["tid"], d["outcome"], 100 * r["asked_share"], r["backend"], r["periods_per_window"], 100 * (r["granted_share"] or 0)))
for line in d.get("follow", []):
    print("  " + line)
EOF
    "$rtlab" release --pid "$jackd_pid" > /dev/null 2>&1 || true
    if "$rtlab" reservations --json - | python3 -c 'import json,sys; sys.exit(1 if json.load(sys.stdin)["reservations"] else 0)' 2>/dev/null; then :; else
      echo "  left behind:"; "$rtlab" reservations
    fi
  fi
  sleep 2
done
