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
rtlab=${RTLAB:-$here/../../target/debug/rtlab}
work=$(mktemp -d)
chmod 755 "$work"
bus_pid=
daemon_pid=
cleanup() {
  [ -n "$daemon_pid" ] && kill -TERM "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  [ -n "$bus_pid" ] && kill "$bus_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
cc -O2 -pthread -o "$work/runaway" "$here/runaway.c"
# The tests' private system bus (bench/rtkit/private-system-bus.conf), with rtlab's policy.
sed -e "s|@SOCKET@|$work/bus|" -e "s|@SERVICEDIR@||" \
    -e "s|@INCLUDE@|$here/../../packaging/dbus/org.freedesktop.RealtimeKit1.conf|" \
    "$here/private-system-bus.conf" > "$work/bus.conf"
dbus-daemon --config-file="$work/bus.conf" --nofork --nopidfile & bus_pid=$!
while [ ! -S "$work/bus" ]; do sleep 0.05; done
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus"
printf 'state_dir = "%s/state"\n[rtkit]\ncanary_refusal = "1s"\nuser_share = 4.0\n' "$work" > "$work/rtlabd.toml"
"$rtlab" daemon --rtkit --config "$work/rtlabd.toml" --socket "$work/rtlabd.sock" 2> "$work/daemon.log" & daemon_pid=$!
for _ in $(seq 200); do
  grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 3; }
  sleep 0.05
done
grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" || { cat "$work/daemon.log" >&2; exit 3; }
nobody=(setpriv --reuid nobody --regid nogroup --clear-groups)
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
