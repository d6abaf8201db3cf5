# Shared by the bench scripts that measure a release rtlab. Source it first thing, as
# `. "$(dirname "$0")/lib.sh"`: it sets bash's strict mode and goes to the repository root (the
# paths below are from there); then call `bench_start NAME`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Sets `rtlab`, the binary measured ($RTLAB, or target/release/rtlab, built when missing), and
# `out`, a fresh bench/out/NAME-<UTC time> directory for the run's records.
bench_start() {
    rtlab=${RTLAB:-target/release/rtlab}
    out=bench/out/$1-$(date -u +%Y%m%dT%H%M%SZ)
    mkdir -p "$out"
    [ -x "$rtlab" ] || cargo build --release -p rtlab
}
