#!/usr/bin/env bash
# `rtlab tune` (issue 38, BENCHMARKS.md "rtlab tune").
#
#   bench/tune.sh placebo RUNS [ROUND=2s] [PAIRS=3] [PER_HOLD=10]
#       RUNS short tunes of the placebo alone (warm-up 500 ms): how often noise alone gets a
#       setting kept (the false-keep rate). PER_HOLD runs share one hold of the measurement lock
#       (about PER_HOLD x 2 x PAIRS x (ROUND + 0.5 s)), so other measurements go in between.
#   bench/tune.sh full [BUDGET=4m]
#       one whole `rtlab tune` under the lock: every setting's effect with its interval, and how
#       long it takes (keep BUDGET under 5 min on a shared machine).
#   bench/tune.sh dma [ROUND=8s] [PAIRS=3]
#       cpu_dma_latency and the placebo alone, as the issue measured by hand.
#   bench/tune.sh app [SETTINGS=cpu_dma_latency,placebo] [ROUND=5s] [PAIRS=3] [LOAD=30]
#       SETTINGS with --app jackd: jackd2 (dummy driver, 128 frames at 48 kHz) and the JACK
#       client bench/jack/xrun_client.c burning LOAD % of each period, started under the lock;
#       each round's jackd misses beside the probe, and JACK's own xrun count for the whole.
#
# Needs root. RTLAB=target/debug/rtlab measures a debug build (default: target/release/rtlab).
# LOCK=/work/measure.lock is the lock file (LOCK= runs without one).
. "$(dirname "$0")/lib.sh"
mode=${1:-placebo}
lock=${LOCK-/work/measure.lock}
locked() { if [ -n "$lock" ]; then flock -o "$lock" "$@"; else "$@"; fi; }
bench_start "tune-$mode"

summarise() {
    python3 - "$@" <<'PY'
import json, sys
runs = [json.load(open(path)) for path in sys.argv[1:]]
for run in runs:
    for s in run["settings"]:
        e = s["effect"]
        if e and e["difference_ci_ns"]:
            lo, hi = e["difference_ci_ns"]
            effect = f'{e["before_ns"]/1e3:8.1f} -> {e["after_ns"]/1e3:8.1f} us  {e["difference_ns"]/1e3:+8.1f} [{lo/1e3:+.1f}, {hi/1e3:+.1f}]'
        else:
            effect = "-"
        print(f'{s["name"]:20} {s["before"][:18]:18} -> {s["tried"][:22]:22} {effect:52} {"KEPT" if s["kept"] else "no":4}  {s["reason"][:70]}')
        app = s.get("app")
        if app:
            ci = app["difference_ci_per_minute"]
            ci = f'[{ci[0]:+.1f}, {ci[1]:+.1f}]' if ci else "(one pair)"
            counts = lambda rounds: ",".join(f'{r["misses"]}/{r["seconds"]:.1f}s' for r in rounds)
            print(f'    {app["comm"]} misses/min {app["per_minute_before"]:.1f} -> {app["per_minute_after"]:.1f}  {app["difference_per_minute"]:+.1f} {ci}  rounds A {counts(app["rounds_before"])}  B {counts(app["rounds_after"])}')
    print(f'# duration {run["duration_ns"]/1e9:.1f} s, rounds {run["rounds"]} x {run["round_ns"]/1e9:.1f} s')
placebo = [s for run in runs for s in run["settings"] if s["placebo"] and s["effect"]]
if placebo:
    kept = sum(s["kept"] for s in placebo)
    print(f"# placebo kept in {kept} of {len(placebo)} runs")
PY
}

case $mode in
placebo)
    runs=${2:?RUNS}
    round=${3:-2s}
    pairs=${4:-3}
    per_hold=${5:-10}
    batch() {
        for run in $(seq "$1" "$2"); do
            "$rtlab" tune --only placebo --round "$round" --rounds "$pairs" --warmup 500ms \
                --json "$out/placebo-$run.json" >/dev/null
        done
    }
    export -f batch; export rtlab round pairs out
    for first in $(seq 1 "$per_hold" "$runs"); do
        last=$((first + per_hold - 1)); [ "$last" -le "$runs" ] || last=$runs
        locked bash -c "batch $first $last"
    done
    summarise "$out"/placebo-*.json
    ;;
full)
    budget=${2:-4m}
    locked "$rtlab" tune --budget "$budget" --json "$out/full.json" | tee "$out/full.txt"
    summarise "$out/full.json"
    ;;
dma)
    round=${2:-8s}
    pairs=${3:-3}
    locked "$rtlab" tune --only cpu_dma_latency,placebo --round "$round" --rounds "$pairs" --json "$out/dma.json" >/dev/null
    summarise "$out/dma.json"
    ;;
app)
    settings=${2:-cpu_dma_latency,placebo}
    round=${3:-5s}
    pairs=${4:-3}
    load=${5:-30}
    export settings round pairs load out rtlab
    # Under one hold: jackd and the client live only as long as the tune (harness.sh kills them).
    locked bash -c '
        set -euo pipefail
        HERE=bench OUT=$out BIN=$out SERVER=tuneapp$$ name=client
        . bench/jack/harness.sh
        start_jack 128 tune
        sleep 2
        start_client 600
        sleep 3
        "$rtlab" tune --only "$settings" --round "$round" --rounds "$pairs" --app jackd             --json "$out/app.json" > "$out/app.txt"
        kill -INT "$CLIENTPID"; wait "$CLIENTPID" || true; CLIENTPID=
        echo "# JACK'"'"'s own count, whole run: $(cat "$out/client.client.json")"
    '
    summarise "$out/app.json"
    ;;
*)
    echo "usage: bench/tune.sh placebo RUNS [ROUND] [PAIRS] | full [BUDGET] | dma [ROUND] [PAIRS] | app [SETTINGS] [ROUND] [PAIRS] [LOAD]" >&2
    exit 2
    ;;
esac
echo "# records in $out"
