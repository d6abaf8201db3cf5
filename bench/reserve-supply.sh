#!/usr/bin/env bash
# The CPU a reserved CPU-bound thread really receives (issue 11, BENCHMARKS.md "Reservations:
# supply under RT load").
#
# For each X/Y and each way of protecting the thread (none, `chrt -f 50`, the deadline backend, the
# dispatch backend, and the default the enforcer picks per request), `crates/rtlab-sched/examples/supply.rs` runs the thread for SECONDS while
# SCHED_FIFO 95 spinners spin 900 ms of every second on every CPU and `stress-ng --cpu 2` runs,
# records its sched_switch events, and measures every sliding window of Y (10 µs steps): the share
# that held >= X, the minimum and the p1, the steal of every CPU over the run and around the worst
# window, and the dispatchers' own CPU time and lateness. The modes are interleaved per round so
# drifting background load hits every mode alike. Cells the backend refuses are shown as refused.
#
# Mode `daemon` reserves through a real `rtlab daemon` (started here on a temporary socket, its
# state on tmpfs, stopped at the end) with `rtlab reserve X/Y --tid TID`, as for a program rtlab has
# never seen; `deadline-global` is the deadline backend without per-CPU placement.
# Every cell reports two views of the same run: the thread's sched_switch events ("trace") and the
# thread's own stalls ("own": gaps >= 2 us between its clock reads); see BENCHMARKS.md for why.
# For dispatch grants it also reports where the time inside the owner's slots went (start delay and
# interior loss per slot, stalls >= 200 us) and, per cell, the windows missed, how many of them hold
# such a stall and how many fall near steal.
#
# usage: flock /work/measure.lock bench/reserve-supply.sh [SECONDS=3] [ROUNDS=1]   (needs root)
#        RATES="2ms/10ms" MODES="deadline dispatch" bench/reserve-supply.sh …
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-3}
rounds=${2:-1}
rates=${RATES:-500us/2ms 1ms/10ms 2ms/10ms 5ms/20ms}
modes=${MODES:-none fifo50 deadline deadline-global dispatch default daemon}
out=bench/out/reserve-supply-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
cargo build --release -q -p rtlab-sched --example supply
supply=target/release/examples/supply
daemon=
case " $modes " in
*" daemon "*)
    cargo build --release -q -p rtlab --bin rtlab
    work=$(mktemp -d -p /dev/shm)
    # placement_linger 0: a partition kept after the cell's thread exits would hold the cpuset
    # hierarchy (and stop load balancing) into the next cells.
    printf 'state_dir = "%s/state"\nplacement_linger = "0s"\n' "$work" > "$work/rtlabd.toml"
    export RTLAB_SOCKET="$work/rtlabd.sock"
    target/release/rtlab daemon --config "$work/rtlabd.toml" 2> "$out/daemon.log" &
    daemon=$!
    trap 'kill $daemon 2>/dev/null; wait $daemon 2>/dev/null; rm -rf "$work"' EXIT
    for _ in $(seq 100); do grep -q "listening on" "$out/daemon.log" && break; sleep 0.1; done
    ;;
esac
for round in $(seq 1 "$rounds"); do
    for rate in $rates; do
        for mode in $modes; do
            amount=${rate%/*}
            period=${rate#*/}
            # A cell that hangs must not hold the measurement lock: killed after a minute.
            case $mode in
            daemon) set -- --mode command --reserve-cmd "target/release/rtlab reserve $amount/$period --tid {tid}" ;;
            deadline-global) set -- --mode deadline --no-placement ;;
            *) set -- --mode "$mode" ;;
            esac
            if ! timeout 60 "$supply" "$@" --amount "$amount" --period "$period" \
                --duration "${seconds}s" --stress 2 > "$out/$mode-${amount}-${period}-$round.json" \
                2> "$out/$mode-${amount}-${period}-$round.err"; then
                echo "{\"mode\": \"$mode\", \"rate\": \"$rate\", \"refused\": $(python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().strip()))' < "$out/$mode-${amount}-${period}-$round.err")}" \
                    > "$out/$mode-${amount}-${period}-$round.json"
            fi
        done
    done
done
python3 bench/summarise-supply.py "$out"
