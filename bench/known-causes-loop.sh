#!/usr/bin/env bash
# How often a root test of rtlab-explain's known_causes fails, and how many of the probe's late
# samples the BPF recorder left without a kernel episode, run after run under a load (the numbers
# in CHANGELOG's entry on the BPF recorder's wake-ups whose target had passed).
# Each run takes the measurement lock for itself (the load, then one run of the test, ~10 s), so a
# long loop never holds it for long. Prints one line a run, then the totals.
#
# usage: bench/known-causes-loop.sh [RUNS=10] [LOAD=idle|cpu|io|fixtures]
#            [TEST=a_fifo_95_spinner_is_named_with_the_full_event_set_too]   (needs root)
#        LOCK=/work/measure.lock by default.
set -euo pipefail
runs=${1:-10}
load=${2:-idle}
test=${3:-a_fifo_95_spinner_is_named_with_the_full_event_set_too}
lock=${LOCK:-/work/measure.lock}
cd "$(dirname "$0")/.."
build() { realpath "$(nice -n 19 cargo test -p rtlab-explain --test "$1" --no-run 2>&1 |
    sed -n 's/.*Executable tests\/'"$1"'\.rs (\(.*\))/\1/p' | tail -1)"; }
binary=$(build known_causes)
fixtures=$(build fixtures)
logs=$(mktemp -d)
failed=0
unexplained=0
for run in $(seq 1 "$runs"); do
    log=$logs/$run.log
    status=0
    flock -o "$lock" bash -c '
        load=$1; fixtures=$2; binary=$3; test=$4; log=$5
        case $load in
            cpu) stress-ng --cpu 2 --timeout 60s --quiet & ;;
            io) stress-ng --io 2 --timeout 60s --quiet & ;;
            fixtures) (end=$((SECONDS + 60)); while [ $SECONDS -lt $end ]; do
                          "$fixtures" >/dev/null 2>&1; done) & ;;
        esac
        pid=$!
        trap "[ $load = idle ] || kill $pid 2>/dev/null" EXIT
        sleep 1
        cd crates/rtlab-explain && "$binary" --ignored --exact "$test" --nocapture >"$log" 2>&1
        ' _ "$load" "$fixtures" "$binary" "$test" "$log" || status=$?
    missing=$(sed -n 's/.*without a kernel episode \([0-9]*\).*/\1/p' "$log" | tail -1)
    [ "$status" = 0 ] || failed=$((failed + 1))
    unexplained=$((unexplained + ${missing:-0}))
    echo "run $run: $([ "$status" = 0 ] && echo passed || echo "FAILED: $(grep -m1 -A1 panicked "$log" | tail -1 | cut -c1-120)"); late samples without a kernel episode: ${missing:-?}"
done
echo "$load: $failed of $runs runs failed; $unexplained late samples without a kernel episode (logs: $logs)"
