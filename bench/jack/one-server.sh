# shellcheck shell=bash disable=SC2034,SC2153 # sets what the sourcing script reads; NAME is its own
# The set-up of the benches that watch one JACK server's threads (counters-vs-trace-means.sh,
# observe-without-trace.sh): sourced after `set -euo pipefail` with HERE (the bench/ directory)
# and NAME set. Sets rtlab, work (a directory removed at exit), server (jackd -n NAME<pid>, dummy
# driver, 128 frames at 48 kHz, already running) and jackd_pid; at exit everything started is
# killed (bench/jack/harness.sh's cleanup).
rtlab=${RTLAB:-$HERE/../target/debug/rtlab}
work=$(mktemp -d)
OUT=$work BIN=$work
export JACK_NO_AUDIO_RESERVATION=1
# bench/jack/harness.sh: compiles the client, starts jackd ($JACKPID), kills what it started.
# shellcheck source=bench/jack/harness.sh
source "$HERE/jack/harness.sh"
trap 'kill $(jobs -p) 2>/dev/null || true; cleanup; rm -rf "$work"' EXIT
SERVER=$NAME$$
server=$SERVER
start_jack 128 jackd
jackd_pid=$JACKPID
sleep 2
