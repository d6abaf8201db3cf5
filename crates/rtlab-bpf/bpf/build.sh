#!/bin/sh
# Compiles a BPF program of this folder into its committed object, byte-reproducibly: the source
# directory is mapped to a fixed name in the debug info, so the object does not depend on where the
# repository is checked out. Without a SOURCE it builds rtlab.bpf.c (the explain recorder);
# build-apptrace.sh builds apptrace.bpf.c through it, so both objects get the same flags.
# `.ci/bpf-check` runs both scripts and compares the results with the committed objects.
# usage: crates/rtlab-bpf/bpf/build.sh [OUTPUT=crates/rtlab-bpf/bpf/rtlab.bpf.o [SOURCE=rtlab.bpf.c]]
# (a relative OUTPUT or SOURCE is taken from this folder)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/rtlab.bpf.o}
program=${2:-rtlab.bpf.c}
cd "$here"
exec clang -target bpf -O2 -g -Wall -Werror \
    -fdebug-prefix-map="$here"=rtlab-bpf -fno-ident \
    -c "$program" -o "$out"
