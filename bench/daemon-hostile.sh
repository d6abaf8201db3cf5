#!/bin/sh
# Hostile local users against the real rtlab daemon for DURATION seconds (default 600), as root:
#   cargo build -p rtlab -p rtlab-hostile
#   flock -o /work/measure.lock bench/daemon-hostile.sh [DURATION] [SEED]
# nobody and daemon (uid 1), four processes each (every second one in `unshare -Ur`), three sending
# threads a process, send seeded random valid and malformed requests on the daemon's socket
# (reserve, release of others' grants, Time Constraints with starts at 1 and in the far past and
# future, list, floods of pings and connections) and RealtimeKit1 calls on a private system bus
# (real-time and nice levels for their own and others' threads, bad ids and priorities, ResetKnown,
# ResetAll, Exit, properties, wrong arguments; threads made SCHED_RR spin in duty cycles) to a
# daemon with user_limit 0.2, while the checker reads the kernel every 100 ms: no victim thread
# changed, no user over 20 % (+5 points) of SCHED_DEADLINE, no user's SCHED_RR threads over 20 %
# of a CPU over 5 s (+ the demotion latency, with its SCHED_DEADLINE), root's ping
# (a fresh connection every 100 ms) answered within 100 ms — a late answer whose lateness the
# CPUs' steal time covers is counted apart as `hypervisor`, not a violation. It goes on after a
# violation, counting each (--keep-going); the first is replayed and shrunk at the end. Prints requests tried (RealtimeKit1 calls among them), violations, root's pings
# asked/answered, the worst, p99 and median answer and the late ones; the whole report as JSON in
# bench/out/daemon-hostile-SEED.json. Exit 1 on a
# violation (with the seed and the shrunk request sequence), 3 if the harness failed.
# RTLAB_BENCH_BUILD=release uses target/release (build those with --release). On a violation,
# RTLAB_HOSTILE_KEEP=DIR keeps the whole action log and the daemon's log in DIR; RTLAB_HOSTILE_FREEZE_TRACE=
# a tracefs instance (events on, clock mono) is marked at each root ping and stopped at the first
# late answer (src/root_ping.rs).
set -eu
cd "$(dirname "$0")/.."
duration=${1:-600}
seed=${2:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
build=${RTLAB_BENCH_BUILD:-debug}
mkdir -p bench/out
out="bench/out/daemon-hostile-$seed.json"
echo "daemon-hostile: $duration s, seed $seed, $build build, $(date -u +%FT%TZ), $(uname -r), $(nproc) CPUs"
status=0
"target/$build/rtlab-hostile" run --seconds "$duration" --seed "$seed" \
  --rtlab "target/$build/rtlab" --keep-going --json "$out" || status=$?
echo "report: $out"
exit $status
