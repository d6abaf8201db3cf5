#!/usr/bin/env bash
# How long `rtlab daemon --rtkit` takes to demote a napping spinner (bench/rtkit/napping_spinner.c:
# spins 100 ms, naps 100 us, so neither RLIMIT_RTTIME nor the canary sees it) for its run time
# over rtkit.user_share (20 % of a CPU over 5 s): a private system bus in a temporary directory,
# the daemon on it, the spinner started as nobody with `prlimit --rttime=200000` and made SCHED_RR
# 5 through busctl. Prints one spinner JSON line per run. Needs root.
# Usage: share_demotion.sh [RUNS] [CPU]   (run it under flock /work/measure.lock)
set -euo pipefail
runs=${1:-10}
cpu=${2:-1}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/rtkit/bus-and-daemon.sh
source "$here/bus-and-daemon.sh"
cc -O2 -o "$work/spinner" "$here/napping_spinner.c"
start_bus_and_daemon $'[rtkit]\nuser_share_refusal = "1s"'
for _ in $(seq "$runs"); do
  coproc SPINNER { "${nobody[@]}" prlimit --rttime=200000 "$work/spinner" -c "$cpu" -d 10; }
  read -r _ pid tid <&"${SPINNER[0]}"
  "${nobody[@]}" busctl --address="$DBUS_SYSTEM_BUS_ADDRESS" call org.freedesktop.RealtimeKit1 \
    /org/freedesktop/RealtimeKit1 org.freedesktop.RealtimeKit1 MakeThreadRealtimeWithPID ttu \
    "$pid" "$tid" 5
  read -r result <&"${SPINNER[0]}"
  echo "$result"
  wait "$SPINNER_PID" || true
  sleep 6 # the run time leaves rtkit.user_share_window (5 s); rtkit.user_share_refusal is 1 s
done
