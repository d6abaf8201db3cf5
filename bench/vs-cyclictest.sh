#!/usr/bin/env bash
# rtlab vs cyclictest, side by side (issue 2, BENCHMARKS.md "probe").
#
# Same CPUs (all online), SCHED_FIFO 90, 1 ms period, same duration, cpu_dma_latency 0 for both,
# runs interleaved A B A B …, first idle and then under `stress-ng --cpu 2 --io 1`. Both tools
# write a cyclictest-format histogram (1 µs buckets), which bench/summarise.py reads the same way,
# so the medians and p99s compared are the same quantity at the same resolution. CPU time of each
# tool (all its threads, ns resolution) is perf stat's task-clock, divided by the samples the tool
# recorded; the CPU cost ratio is taken pair by pair (round N's rtlab over round N's cyclictest, run
# back to back under the same load) and the median of the pairs is reported. cyclictest runs with
# `-d 0` so every thread uses the same 1 ms interval as rtlab (its default distance of 500 µs would
# give thread N an interval of 1 ms + N·500 µs; `-h` also forces 0, the flag makes it explicit).
#
# Then the period sweep, idle: rtlab's rt-high thread on every CPU at 1 ms … 20 µs, counting
# samples, missed periods and lost samples; cyclictest at the same periods, whose shortfall of
# samples against duration/period is the periods it skipped without saying so.
#
# usage: bench/vs-cyclictest.sh [SECONDS_PER_RUN=30] [ROUNDS=3]   (needs root, rt-tests, stress-ng)
#        SWEEP=0 skips the period sweep. On a shared machine run it under the measurement lock:
#        flock /work/measure.lock bench/vs-cyclictest.sh 20 3
. "$(dirname "$0")/lib.sh"
seconds=${1:-30}
rounds=${2:-3}
bench_start vs-cyclictest
command -v cyclictest >/dev/null || { echo "cyclictest missing: apt-get install rt-tests" >&2; exit 2; }
command -v perf >/dev/null || { echo "perf missing: apt-get install linux-perf" >&2; exit 2; }
command -v stress-ng >/dev/null || { echo "stress-ng missing: apt-get install stress-ng" >&2; exit 2; }

stress_pid=
cleanup() { [ -n "$stress_pid" ] && kill "$stress_pid" 2>/dev/null || true; }
trap cleanup EXIT

for load in idle stress; do
  if [ "$load" = stress ]; then
    stress-ng --cpu 2 --io 1 --timeout $(( (seconds + 5) * rounds * 2 + 30 ))s >/dev/null 2>&1 &
    stress_pid=$!
    sleep 3
  fi
  for round in $(seq "$rounds"); do
    echo "== $load round $round: cyclictest"
    perf stat -x, -e task-clock -o "$out/cyclictest-$load-$round.time" \
      cyclictest -m -p 90 -i 1000 -d 0 -t -a -D "${seconds}s" -q -h 20000 \
      --histfile="$out/cyclictest-$load-$round.hist" >/dev/null
    echo "== $load round $round: rtlab"
    perf stat -x, -e task-clock -o "$out/rtlab-$load-$round.time" \
      "$rtlab" run --classes rt-high --no-handoff --period 1ms --duration "${seconds}s" --warmup 0s \
      --cpu-dma-latency 0 --no-store --histogram 20000 --histfile "$out/rtlab-$load-$round.hist" \
      --json "$out/rtlab-$load-$round.json" >/dev/null
  done
  cleanup; stress_pid=
done

echo "== period sweep (idle, 10 s each)"
[ "${SWEEP:-1}" = 0 ] && { python3 bench/summarise.py "$out"; exit 0; }
for period_us in 1000 500 200 100 50 20; do
  "$rtlab" run --classes rt-high --no-handoff --period "${period_us}us" --duration 10s --warmup 0s \
    --cpu-dma-latency 0 --no-store --json "$out/sweep-${period_us}us.json" >/dev/null
  cyclictest -m -p 90 -i "$period_us" -d 0 -t -a -D 10s -q -h 1 \
    --histfile="$out/sweep-cyclictest-${period_us}us.hist" >/dev/null
done

python3 bench/summarise.py "$out"
