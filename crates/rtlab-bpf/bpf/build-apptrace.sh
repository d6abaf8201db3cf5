#!/bin/sh
# Compiles apptrace.bpf.c (the `rtlab trace record` recorder) into the committed apptrace.bpf.o,
# byte-reproducibly, with the same flags as build.sh (the explain recorder's). `.ci/bpf-check`
# runs both and compares the results with the committed objects.
# usage: crates/rtlab-bpf/bpf/build-apptrace.sh [OUTPUT=crates/rtlab-bpf/bpf/apptrace.bpf.o]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/apptrace.bpf.o}
cd "$here"
exec clang -target bpf -O2 -g -Wall -Werror \
    -fdebug-prefix-map="$here"=rtlab-bpf -fno-ident \
    -c apptrace.bpf.c -o "$out"
