#!/bin/sh
# Compiles rtlab.bpf.c into the committed rtlab.bpf.o, byte-reproducibly: the source directory is
# mapped to a fixed name in the debug info, so the object does not depend on where the repository
# is checked out. `.ci/bpf-check` runs this and compares the result with the committed object.
# usage: crates/rtlab-bpf/bpf/build.sh [OUTPUT=crates/rtlab-bpf/bpf/rtlab.bpf.o]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here/rtlab.bpf.o}
cd "$here"
exec clang -target bpf -O2 -g -Wall -Werror \
    -fdebug-prefix-map="$here"=rtlab-bpf -fno-ident \
    -c rtlab.bpf.c -o "$out"
