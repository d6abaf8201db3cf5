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
cc -O2 -o "$work/spinner" "$here/napping_spinner.c"
# The tests' private system bus (bench/rtkit/private-system-bus.conf), with rtlab's policy.
sed -e "s|@SOCKET@|$work/bus|" -e "s|@SERVICEDIR@||" \
    -e "s|@INCLUDE@|$here/../../packaging/dbus/org.freedesktop.RealtimeKit1.conf|" \
    "$here/private-system-bus.conf" > "$work/bus.conf"
dbus-daemon --config-file="$work/bus.conf" --nofork --nopidfile & bus_pid=$!
while [ ! -S "$work/bus" ]; do sleep 0.05; done
export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus"
printf 'state_dir = "%s/state"\n[rtkit]\nuser_share_refusal = "1s"\n' "$work" > "$work/rtlabd.toml"
"$rtlab" daemon --rtkit --config "$work/rtlabd.toml" --socket "$work/rtlabd.sock" 2> "$work/daemon.log" & daemon_pid=$!
for _ in $(seq 200); do
  grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" && break
  kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 3; }
  sleep 0.05
done
grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" || { cat "$work/daemon.log" >&2; exit 3; }
nobody=(setpriv --reuid nobody --regid nogroup --clear-groups)
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
