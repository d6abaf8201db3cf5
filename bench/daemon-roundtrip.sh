#!/bin/sh
# The reserve/release round trip through a real rtlab daemon (as root):
#   cargo build --release -p rtlab --bin rtlab && cargo build --release -p rtlab-client --examples
#   flock /work/measure.lock bench/daemon-roundtrip.sh [ITERATIONS]
# RTLAB_BENCH_PLACEMENT=false: deadline reservations under global EDF instead of a cpuset partition
# each. RTLAB_BENCH_LINGER=DURATION: the daemon's placement_linger (default: the daemon's, 2 s;
# "0s" makes and removes the partition with every reservation, a rebuild of the scheduling
# domains each time). RTLAB_BENCH_COLD=0 skips the cold dispatch case (50 ms per round trip).
# Cases: ping alone; `deadline` only with RTLAB_BENCH_DEADLINE=1 (see below); `dispatch` cold (the enforcer starts
# and stops its dispatcher threads with the only dispatch reservation) and warm (another dispatch
# reservation holds them up). The daemon runs on a socket and a state directory in a temporary
# directory and is stopped at the end (SIGTERM: every thread it managed gets its policy back).
set -eu
cd "$(dirname "$0")/.."
iterations=${1:-1000}
# The enforcer syncs its journal on every change: keep it on tmpfs, as /run is on a systemd
# machine (RTLAB_BENCH_STATE=/path to measure another filesystem).
work=$(mktemp -d -p "${RTLAB_BENCH_STATE:-/dev/shm}")
sleeper=
cleanup() {
  [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
  kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
printf 'state_dir = "%s/state"\ndeadline_placement = %s\n' "$work" "${RTLAB_BENCH_PLACEMENT:-true}" > "$work/rtlabd.toml"
if [ -n "${RTLAB_BENCH_LINGER:-}" ]; then
  printf 'placement_linger = "%s"\n' "$RTLAB_BENCH_LINGER" >> "$work/rtlabd.toml"
fi
export RTLAB_SOCKET="$work/rtlabd.sock"
: > "$work/daemon.log"
target/release/rtlab daemon --config "$work/rtlabd.toml" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do grep -q "listening on" "$work/daemon.log" && break; sleep 0.1; done
grep "listening on" "$work/daemon.log"
if [ "${RTLAB_BENCH_DEADLINE:-0}" = 1 ]; then
  # Off by default: kernel 6.18 leaks the admission bandwidth of a blocked SCHED_DEADLINE thread
  # switched straight back to another policy (the calling thread is blocked in read() while the
  # daemon reverts it); rtlab-sys shrinks such a thread first, but a build without that fix
  # would use up the machine's deadline bandwidth here.
  echo "== default backend (the daemon's choice per request), 25 ms pause between round trips"
  target/release/examples/roundtrip "$iterations" default 25
  echo "== deadline, 25 ms pause between round trips"
  target/release/examples/roundtrip "$iterations" deadline 25
fi
if [ "${RTLAB_BENCH_COLD:-1}" != 0 ]; then
  echo "== dispatch, cold (no other dispatch reservation)"
  target/release/examples/roundtrip "$iterations" dispatch
fi
echo "== dispatch, warm (another dispatch reservation held)"
sleep 600 & sleeper=$!
target/release/rtlab reserve 1ms/100ms --tid "$sleeper" --backend dispatch >/dev/null
target/release/examples/roundtrip "$iterations" dispatch
