#!/bin/bash
# What bench/pipewire/*.sh share, sourced by them (`source "$here/server.sh"` with `here` their
# own folder): a private PipeWire 0.3.65 with the tests' configuration
# (crates/rtlab/tests/common/pipewire.rs), the JACK client and competitor they build, and the
# quantum they force. Run directly, `server.sh DIRECTORY` is the server alone (see
# pipewire_server), until killed.

# Makes the work directory `work` (removed at exit with every background job killed), builds
# bench/jack/xrun_client.c and fifo_hog.c into it, sets `rtlab` (RTLAB or the debug build) and
# exports XDG_RUNTIME_DIR and PIPEWIRE_RUNTIME_DIR as `$work/run`. Needs `here` set.
pipewire_bench_setup() {
  # shellcheck disable=SC2034 # read by the scripts that source this file
  rtlab=${RTLAB:-$here/../../target/debug/rtlab}
  work=$(mktemp -d)
  trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
  cc -O2 -o "$work/xrun_client" "$here/../jack/xrun_client.c" -ljack -lpthread
  cc -O2 -o "$work/fifo_hog" "$here/../jack/fifo_hog.c" -lpthread
  mkdir "$work/run"
  export XDG_RUNTIME_DIR=$work/run PIPEWIRE_RUNTIME_DIR=$work/run
}

# The private PipeWire in DIRECTORY (its runtime directory DIRECTORY/run must exist and be
# XDG_RUNTIME_DIR and PIPEWIRE_RUNTIME_DIR); replaces the shell it runs in, so start it in the
# background (`pipewire_server "$work" &`): it runs until killed.
pipewire_server() {
  local directory=$1
  cat > "$directory/pipewire.conf" <<'CONF'
context.properties = { core.daemon = true core.name = pipewire-0 link.max-buffers = 16
    default.clock.rate = 48000 default.clock.quantum = 128 default.clock.min-quantum = 16
    default.clock.max-quantum = 2048 mem.allow-mlock = false }
context.spa-libs = { audio.convert.* = audioconvert/libspa-audioconvert support.* = support/libspa-support }
context.modules = [
    { name = libpipewire-module-rt args = { rt.prio = 88 } flags = [ ifexists nofail ] }
    { name = libpipewire-module-protocol-native } { name = libpipewire-module-profiler }
    { name = libpipewire-module-metadata } { name = libpipewire-module-spa-node-factory }
    { name = libpipewire-module-client-node } { name = libpipewire-module-access args = { } }
    { name = libpipewire-module-adapter } { name = libpipewire-module-link-factory } ]
context.objects = [ { factory = spa-node-factory args = { factory.name = support.node.driver
    node.name = Dummy-Driver node.group = pipewire.dummy priority.driver = 20000 } } ]
CONF
  exec pipewire -c "$directory/pipewire.conf" > /dev/null 2>&1
}

# Forces the server's quantum to 128 frames, once; fails when pw-metadata does (10 s at most).
pipewire_force_quantum() {
  timeout 10 pw-metadata -n settings 0 clock.force-quantum 128 > /dev/null
}

# An rtlab daemon of the bench's own (state and socket in `work`, RTLAB_SOCKET exported) and the
# private server, its quantum forced (3 tries): what the benches that reserve start with.
pipewire_bench_daemon_and_server() {
  export RTLAB_SOCKET=$work/rtlabd.sock
  printf 'state_dir = "%s/state"\n' "$work" > "$work/rtlabd.toml"
  "$rtlab" daemon --config "$work/rtlabd.toml" --socket "$RTLAB_SOCKET" 2> "$work/daemon.log" &
  pipewire_server "$work" &
  sleep 1
  for _ in 1 2 3; do pipewire_force_quantum && break; sleep 1; done
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  pipewire_server "$1"
fi
