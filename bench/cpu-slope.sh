#!/usr/bin/env bash
# CPU per sample at the margin: rtlab against cyclictest, fixed costs taken out (issue 10).
#
# bench/vs-cyclictest.sh divides each tool's whole task-clock by its samples, so a fixed cost
# (start-up, rtlab's tail projection and verdict after the run, writing the histogram) counts as
# if it were paid per sample. Here each tool runs at two durations back to back, same flags as
# that script (SCHED_FIFO 90, 1 ms, every CPU, cpu_dma_latency 0, a 20,000-bucket histfile), and
# the cost of a sample is the slope: (CPU of the long run − CPU of the short run) ÷ (samples of
# the long run − samples of the short run). The fixed cost is what the short run cost beyond its
# samples at that slope. Rounds interleave cyclictest and rtlab, idle and then under
# `stress-ng --cpu 2 --io 1`; the ratio is taken round by round and the median reported.
#
# usage: bench/cpu-slope.sh [SHORT_S=5] [LONG_S=25] [ROUNDS=3]   (root; rt-tests, linux-perf, stress-ng)
#        flock -o /work/measure.lock bench/cpu-slope.sh
set -euo pipefail
cd "$(dirname "$0")/.."
short=${1:-5}
long=${2:-25}
rounds=${3:-3}
rtlab=${RTLAB:-target/release/rtlab}
. bench/cpu-peers.sh

for load in idle stress; do
  if [ "$load" = stress ]; then
    start_stress $(( (short + long + 4) * rounds * 2 + 30 ))
  fi
  for round in $(seq "$rounds"); do
    for seconds in "$short" "$long"; do
      name="$load-$round-${seconds}s"
      echo "== $name: cyclictest, rtlab"
      peer_commands "$seconds" "$name"
      perf stat -x, -e task-clock -o "$out/cyclictest-$name.time" "${cyclictest_command[@]}" \
        >/dev/null 2>&1
      perf stat -x, -e task-clock -o "$out/rtlab-$name.time" "${rtlab_command[@]}" >/dev/null
    done
  done
  cleanup; stress_pid=
done

python3 bench/cpu-slope.py "$out" "$short" "$long"
