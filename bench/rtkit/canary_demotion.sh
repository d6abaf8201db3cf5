#!/usr/bin/env bash
# How long the RealtimeKit1 canary of `rtlab daemon --rtkit` takes to demote a runaway pair
# (bench/rtkit/runaway.c) that starves one CPU while staying inside RLIMIT_RTTIME: a private
# system bus in a temporary directory, the daemon on it, the pair started as nobody with
# `prlimit --rttime=200000` and made SCHED_RR 5 through busctl. Prints one runaway JSON line per
# run (rtkit.user_share is set out of reach: the canary alone is measured, and runs 1.2 s apart
# would use up the default share). Needs root.
# Usage: canary_demotion.sh [RUNS] [CPU]   (run it under flock /work/measure.lock)
set -euo pipefail
runs=${1:-10}
cpu=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/rtkit/bus-and-daemon.sh
source "$here/bus-and-daemon.sh"
cc -O2 -pthread -o "$work/runaway" "$here/runaway.c"
start_bus_and_daemon $'[rtkit]\ncanary_refusal = "1s"\nuser_share = 4.0'
for _ in $(seq "$runs"); do
  coproc RUNAWAY { "${nobody[@]}" prlimit --rttime=200000 "$work/runaway" -c "$cpu" -d 8; }
  read -r _ pid first second <&"${RUNAWAY[0]}"
  for tid in "$first" "$second"; do
    "${nobody[@]}" busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" call org.freedesktop.RealtimeKit1 \
      /org/freedesktop/RealtimeKit1 org.freedesktop.RealtimeKit1 MakeThreadRealtimeWithPID ttu \
      "$pid" "$tid" 5
  done
  read -r result <&"${RUNAWAY[0]}"
  echo "$result"
  wait "$RUNAWAY_PID" || true
  sleep 1.2 # rtkit.canary_refusal
done
