#!/bin/bash
# issue 37's table on PipeWire: bench/jack/reserve-follow.sh with the JACK client run through
# pw-jack on the private PipeWire 0.3.65 of server.sh (Dummy-Driver, quantum 128 at 48 kHz,
# 2.667 ms), counted by PipeWire's own profiler (a pw-jack client gets no xrun callback on
# 0.3.65). The client's work per cycle steps 20 % → 50 % → 30 % of the period (10 s each), then
# keeps its work while the quantum changes 128 → 256 frames (`pw-metadata -n settings 0
# clock.force-quantum 256`: 30 % of the new 5.333 ms, 10 s), beside the SCHED_FIFO 95 competitor
# (6 ms every 20 ms on both CPUs, aligned). Modes, each a fresh client:
#   idle      no competitor, no reservation
#   none      the competitor, no reservation
#   oneshot   `rtlab reserve --auto --pid CLIENT` made at 20 % before the competitor starts
#   follow    `rtlab reserve --auto --follow --pid CLIENT`, the same, then following
# Per mode, one line: PipeWire's unfinished cycles per step (profile-steps.py) and, for the
# reserving modes, per step the CPU the reservations took (the kernel's runtime ÷ window, summed
# over the client and PipeWire's data thread, its waker) against the CPU those threads used
# (bench/reserve-shares.py). Run as root under the measurement lock, one round per hold (about
# 4 minutes):
#   flock -o /work/measure.lock bench/pipewire/reserve-follow.sh [MODES...]
# FOLLOW_WINDOW sets --follow's window (its default otherwise); KEEP=DIRECTORY keeps the client's
# JSON, the reservations' samples and `reserve --auto`'s JSON of each mode, and the stamped profile.
set -euo pipefail
modes=("${@:-idle none oneshot follow}")
# shellcheck disable=SC2206
modes=(${modes[*]})
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/pipewire/server.sh
source "$here/server.sh"
pipewire_bench_setup
pipewire_bench_daemon_and_server
mkfifo "$work/profile.fifo"
python3 "$here/profile-steps.py" record "$work/profile.fifo" "$work/profile.tsv" &
(mkdir "$work/profiler" && cd "$work/profiler" && exec pw-profiler -o "$work/profile.fifo" > /dev/null 2>&1) &
sleep 1
steps() { # client JSON → "start end start end ..." of its four steps
  python3 -c '
import json, sys
s = json.load(open(sys.argv[1]))["step_starts_ns"]
print(" ".join("%d %d" % (a, b) for a, b in zip(s, s[1:] + [s[-1] + 10_000_000_000])))' "$1"
}
for mode in "${modes[@]}"; do
  pw-jack "$work/xrun_client" -n jackstep -w -l 20 -S 20,50,30,60 -t 10 -W \
    > "$work/client.json" 2> "$work/client.err" &
  client=$!
  until grep -q active "$work/client.err" 2>/dev/null; do sleep 0.1; done
  sleep 1
  follower=
  case $mode in
    oneshot)
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
  (sleep 30; timeout 10 pw-metadata -n settings 0 clock.force-quantum 256 > /dev/null) &
  resize=$!
  wait "$client"
  wait "$resize" || true
  pipewire_force_quantum
  [ -n "$hog" ] && { wait "$hog" || true; }
  [ -n "$shares" ] && { kill -TERM "$shares"; wait "$shares" || true; }
  if [ -n "$follower" ]; then
    # PipeWire's data thread (reserved as the client's waker) outlives the client: Ctrl-C ends
    # the follow, which releases what it made.
    kill -INT "$follower" 2>/dev/null || true
    wait "$follower" || true
  fi
  sleep 0.5 # the profiler's last batch of the steps
  read -r -a spans <<< "$(steps "$work/client.json")"
  counts=$(python3 "$here/profile-steps.py" count "$work/profile.tsv" "${spans[@]}" | awk '{printf "%s%s", sep, $2; sep=" / "}')
  echo "$mode: PipeWire's unfinished cycles per step (20 % / 50 % / 30 % / 30 % at 256 frames): $counts"
  if [ -n "$shares" ]; then
    for i in 0 2 4 6; do
      echo "  step $((i / 2 + 1)): $(python3 "$here/../reserve-shares.py" --summary "$work/shares.jsonl" "${spans[i]}" "${spans[i + 1]}")"
    done
    python3 - "$work/auto.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for r in d["reservations"]:
    print("  %s %s: %s, asked %.1f %% (%s, %d periods/window), took %.1f %%" % (r["name"], r["tid"], d["outcome"], 100 * r["asked_share"], r["backend"], r["periods_per_window"], 100 * (r["granted_share"] or 0)))
for line in d.get("follow", []):
    print("  " + line)
EOF
    "$rtlab" release --all-mine > /dev/null 2>&1 || true
    if "$rtlab" reservations --json - | python3 -c 'import json,sys; sys.exit(1 if json.load(sys.stdin)["reservations"] else 0)' 2>/dev/null; then :; else
      echo "  left behind:"; "$rtlab" reservations
    fi
  fi
  if [ -n "${KEEP:-}" ]; then
    mkdir -p "$KEEP"
    cp "$work/client.json" "$KEEP/$mode-client.json"
    [ -n "$shares" ] && cp "$work/shares.jsonl" "$work/auto.json" "$KEEP/" && mv "$KEEP/shares.jsonl" "$KEEP/$mode-shares.jsonl" && mv "$KEEP/auto.json" "$KEEP/$mode-auto.json"
  fi
  sleep 2
done
[ -n "${KEEP:-}" ] && cp "$work/profile.tsv" "$KEEP/"
