#!/usr/bin/env bash
# CPU per sample split by thread: the measuring threads against the rest, rtlab and cyclictest
# (issue 10). bench/vs-cyclictest.sh and bench/cpu-slope.sh read each tool's whole task-clock;
# here `perf record -e task-clock` samples every 50 µs of CPU time, and each sample is charged
# to the thread it hit. The measuring threads (cyclictest's per-CPU threads, rtlab's
# `rtlab-t-*`) are what a sample costs; the rest is the main thread: cyclictest's wakes every
# 10 ms to print or not, rtlab's starts the run and does the after-run analysis and output.
# Same flags as the other two scripts (SCHED_FIFO 90, 1 ms, every CPU, cpu_dma_latency 0, a
# 20,000-bucket histfile); rounds interleave the tools, idle and then under
# `stress-ng --cpu 2 --io 1`.
#
# usage: bench/cpu-threads.sh [SECONDS=20] [ROUNDS=5]   (root; rt-tests, linux-perf, stress-ng)
#        flock -o /work/measure.lock bench/cpu-threads.sh
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-20}
rounds=${2:-5}
rtlab=${RTLAB:-target/release/rtlab}
. bench/cpu-peers.sh

threads() {  # perf.data -> "tid comm share%" lines, and the event count (ns) on the last line
  perf report -i "$1" --sort pid --stdio -g none --no-children 2>/dev/null |
    awk '/^#.*Event count/ {count = $NF} /^ *[0-9.]+%/ {sub("%", "", $1); split($2, t, ":"); print t[1], t[2], $1} END {print "total", count}'
}

for load in idle stress; do
  if [ "$load" = stress ]; then
    start_stress $(( (seconds + 6) * rounds * 2 + 30 ))
  fi
  for round in $(seq "$rounds"); do
    name="$load-$round"
    echo "== $name: cyclictest, rtlab"
    peer_commands "$seconds" "$name"
    perf record -q -e task-clock -c 50000 -o "$out/cyclictest-$name.data" \
      "${cyclictest_command[@]}" >/dev/null 2>&1
    threads "$out/cyclictest-$name.data" > "$out/cyclictest-$name.threads"
    perf record -q -e task-clock -c 50000 -o "$out/rtlab-$name.data" "${rtlab_command[@]}" >/dev/null
    threads "$out/rtlab-$name.data" > "$out/rtlab-$name.threads"
    rm -f "$out/cyclictest-$name.data" "$out/rtlab-$name.data"
  done
  cleanup; stress_pid=
done

python3 bench/cpu-threads.py "$out"
