#!/usr/bin/env bash
# `rtlab trace record` through the BPF and the tracefs recorder, recording a scheduler storm
# (`hackbench -g 2 -l 5000 -T`, 80 threads passing messages), ROUNDS rounds each, alternating,
# with a plain hackbench run in each round as the baseline. Prints one line per run: recorder,
# hackbench's own time, events recorded, events lost, file size, and bytes per event.
# Run under the shared lock: flock /work/measure.lock bench/trace-record-recorders.sh [ROUNDS]
# RTLAB defaults to target/release/rtlab.
set -euo pipefail
rounds=${1:-3}
rtlab=${RTLAB:-target/release/rtlab}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
hackbench=(hackbench -g 2 -l 5000 -T)
printf '%-8s %8s %10s %8s %10s %8s\n' recorder hb_s events lost bytes B/event
for round in $(seq "$rounds"); do
  plain=$("${hackbench[@]}" | awk '/^Time:/ {print $2}')
  printf '%-8s %8s %10s %8s %10s %8s\n' none "$plain" - - - -
  for recorder in bpf tracefs; do
    file="$out/$recorder.rtrace"
    log=$("$rtlab" trace record --recorder "$recorder" -o "$file" -- "${hackbench[@]}" 2>&1)
    seconds=$(awk '/^Time:/ {print $2}' <<<"$log")
    events=$(sed -n 's/.*recorded \([0-9]*\) events.*/\1/p' <<<"$log")
    lost=$(sed -n 's/.*; \([0-9]*\) events LOST.*/\1/p' <<<"$log")
    bytes=$(stat -c %s "$file")
    printf '%-8s %8s %10s %8s %10s %8.1f\n' "$recorder" "$seconds" "$events" "${lost:-0}" "$bytes" \
      "$(echo "$bytes / $events" | bc -l)"
    rm -f "$file"
  done
done
