# shellcheck shell=bash disable=SC2034 # sets what the sourcing script reads
# The set-up of the RealtimeKit1 demotion benches (share_demotion.sh, canary_demotion.sh):
# sourced after `set -euo pipefail` with `here` (this directory) set. Makes `work` (a temporary
# directory, removed at exit), and `start_bus_and_daemon CONFIG` starts the tests' private system
# bus (private-system-bus.conf, with rtlab's policy) and `rtlab daemon --rtkit` on it with the
# TOML text CONFIG, returning once the daemon owns org.freedesktop.RealtimeKit1 (exit 3 with its
# log if it does not). At exit the daemon gets SIGTERM and the bus is stopped.
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
nobody=(setpriv --reuid nobody --regid nogroup --clear-groups)

start_bus_and_daemon() {
  sed -e "s|@SOCKET@|$work/bus|" -e "s|@SERVICEDIR@||" \
      -e "s|@INCLUDE@|$here/../../packaging/dbus/org.freedesktop.RealtimeKit1.conf|" \
      "$here/private-system-bus.conf" > "$work/bus.conf"
  dbus-daemon --config-file="$work/bus.conf" --nofork --nopidfile & bus_pid=$!
  while [ ! -S "$work/bus" ]; do sleep 0.05; done
  export DBUS_SYSTEM_BUS_ADDRESS="unix:path=$work/bus"
  printf 'state_dir = "%s/state"\n%s\n' "$work" "$1" > "$work/rtlabd.toml"
  "$rtlab" daemon --rtkit --config "$work/rtlabd.toml" --socket "$work/rtlabd.sock" \
    2> "$work/daemon.log" & daemon_pid=$!
  for _ in $(seq 200); do
    grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" && break
    kill -0 "$daemon_pid" 2>/dev/null || { cat "$work/daemon.log" >&2; exit 3; }
    sleep 0.05
  done
  grep -q "owns org.freedesktop.RealtimeKit1" "$work/daemon.log" \
    || { cat "$work/daemon.log" >&2; exit 3; }
}
