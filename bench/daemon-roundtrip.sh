#!/bin/sh
# The reserve/release round trip through a real rtlab daemon, for both backends (as root).
#   cargo build --release -p rtlab -p rtlab-client --bins --examples
#   flock /work/measure.lock bench/daemon-roundtrip.sh [ITERATIONS]
# The daemon runs on a socket and a state directory in a temporary directory and is stopped at
# the end (SIGTERM: every thread it managed gets its old policy back).
set -eu
cd "$(dirname "$0")/.."
iterations=${1:-2000}
work=$(mktemp -d)
trap 'kill "$daemon" 2>/dev/null; wait "$daemon" 2>/dev/null; rm -rf "$work"' EXIT
printf 'state_dir = "%s/state"\n' "$work" > "$work/rtlabd.toml"
export RTLAB_SOCKET="$work/rtlabd.sock"
: > "$work/daemon.log"
target/release/rtlab daemon --config "$work/rtlabd.toml" 2>"$work/daemon.log" &
daemon=$!
for _ in $(seq 100); do grep -q "listening on" "$work/daemon.log" && break; sleep 0.1; done
grep "listening on" "$work/daemon.log"
for backend in deadline dispatch; do
  target/release/examples/roundtrip "$iterations" "$backend"
done
