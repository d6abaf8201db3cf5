#!/bin/bash
# A private PipeWire 0.3.65 with the tests' configuration (crates/rtlab/tests/common/pipewire.rs)
# in DIRECTORY (its runtime directory DIRECTORY/run must exist and be XDG_RUNTIME_DIR and
# PIPEWIRE_RUNTIME_DIR); runs until killed. Used by bench/pipewire/*.sh.
set -euo pipefail
work=$1
cat > "$work/pipewire.conf" <<'CONF'
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
exec pipewire -c "$work/pipewire.conf" > /dev/null 2>&1
