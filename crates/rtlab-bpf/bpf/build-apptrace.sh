#!/bin/sh
# Compiles apptrace.bpf.c (the `rtlab trace record` recorder) into the committed apptrace.bpf.o,
# byte-reproducibly, by build.sh (the explain recorder's build, so both share their flags).
# `.ci/bpf-check` runs both and compares the results with the committed objects.
# usage: crates/rtlab-bpf/bpf/build-apptrace.sh [OUTPUT=crates/rtlab-bpf/bpf/apptrace.bpf.o]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
exec "$here/build.sh" "${1:-$here/apptrace.bpf.o}" apptrace.bpf.c
