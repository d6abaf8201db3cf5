#!/bin/bash
# issue 40: the raw events of an idle PipeWire graph beside PipeWire's profiler, to check the
# `pipewire` cycle rule miss by miss. The private PipeWire of server.sh (Dummy-Driver, quantum
# 128 at 48 kHz), bench/jack/xrun_client.c through pw-jack working 30 % of each cycle, no
# competitor. For SECONDS: `pw-profiler` logging, and a tracefs instance of its own
# recording (CLOCK_MONOTONIC) sched_switch, sched_waking and a uprobe on libc's timerfd_settime
# with its arguments (fd, flags, the new it_value and it_interval), the event the `pipewire`
# marker records without them. Leaves OUT/report.txt (the instance's `trace`),
# OUT/profiler.log, OUT/threads.txt (the server's and the client's threads: pid, tid, policy, rt priority, name) and
# OUT/rtlab.trace (`rtlab trace record --comm xrun_client --cycle-marker pipewire` over the
# same window, for `rtlab trace analyze --cycle-rule pipewire`).
# RECORDER=bpf records OUT/rtlab.trace with the BPF recorder (default tracefs).
# The uprobe is removed at exit. Run as root under the measurement lock:
#   flock -o /work/measure.lock bench/pipewire/idle-capture.sh OUT [SECONDS]
set -euo pipefail
out=$(realpath "$1")
seconds=${2:-10}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/pipewire/server.sh
source "$here/server.sh"
pipewire_bench_setup
tracefs=/sys/kernel/tracing
group=pwidle_$$
instance=pwidle_$$
libc=$(grep -m1 -o '/[^ ]*libc.so.6' /proc/self/maps)
offset=$(python3 - "$libc" <<'PY'
import subprocess, sys
# The file offset of timerfd_settime: its address in the executable segment minus the
# segment's address plus its file offset (readelf's program headers).
path = sys.argv[1]
address = next(int(l.split()[0], 16) for l in subprocess.run(["nm", "-D", path], capture_output=True, text=True).stdout.splitlines() if l.endswith(" timerfd_settime@@GLIBC_2.8") or l.split()[-1] == "timerfd_settime")
lines = subprocess.run(["readelf", "-lW", path], capture_output=True, text=True).stdout.splitlines()
for line in lines:
    fields = line.split()
    if fields and fields[0] == "LOAD":
        file_offset, virtual = int(fields[1], 16), int(fields[2], 16)
        size = int(fields[4], 16)
        if virtual <= address < virtual + size:
            print(hex(address - virtual + file_offset)); break
PY
)
cleanup_probe() {
  # The instance first (it disables its events), then the probe no instance records any more.
  if [[ -d $tracefs/instances/$instance ]]; then rmdir "$tracefs/instances/$instance" || true; fi
  echo "-:$group/tfd" >> "$tracefs/uprobe_events" 2>/dev/null || true
}
trap 'cleanup_probe; kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT
echo "p:$group/tfd $libc:$offset fd=%di:s32 flags=%si:s32 interval_sec=+0(%dx):s64 interval_nsec=+8(%dx):s64 value_sec=+16(%dx):s64 value_nsec=+24(%dx):s64" >> "$tracefs/uprobe_events"
pipewire_server "$work" &
sleep 1
for _ in 1 2 3; do pipewire_force_quantum && break; sleep 1; done
pw-jack "$work/xrun_client" -n jackload -w -l 30 -d $((seconds + 6)) > /dev/null 2>&1 &
sleep 2
(cd "$work" && exec pw-profiler -o "$out/profiler.log" > "$out/profiler.out" 2>&1) & profiler=$!
sleep 1
for pid in $(pgrep -x pipewire -n) $(pgrep -x xrun_client -n) $(pgrep -x pw-profiler -n); do
  for task in /proc/"$pid"/task/*; do
    # pid tid policy priority comm (policy 0 SCHED_OTHER, 1 SCHED_FIFO, 2 SCHED_RR: /proc's stat
    # fields 41 and 40, read past the comm's closing parenthesis)
    echo "$pid $(basename "$task") $(sed 's/.*) //' "$task/stat" | awk '{print $39, $38}') $(cat "$task/comm")"
  done
done > "$out/threads.txt"
"$rtlab" trace record --comm xrun_client --recorder "${RECORDER:-tracefs}" --cycle-marker pipewire \
  -D "$((seconds + 1))s" -o "$out/rtlab.trace" 2> "$out/record.err" & recorder=$!
sleep 0.5
directory=$tracefs/instances/$instance
mkdir "$directory"
echo mono > "$directory/trace_clock"
echo 16384 > "$directory/buffer_size_kb"
for event in "$group/tfd" sched/sched_switch sched/sched_waking; do echo 1 > "$directory/events/$event/enable"; done
echo 1 > "$directory/tracing_on"
sleep "$seconds"
echo 0 > "$directory/tracing_on"
cat "$directory/trace" > "$out/report.txt"
for event in "$group/tfd" sched/sched_switch sched/sched_waking; do echo 0 > "$directory/events/$event/enable"; done
kill "$profiler"; wait "$profiler" || true
wait "$recorder" || { cat "$out/record.err"; exit 3; }
echo "$(grep -c tfd: "$out/report.txt") timerfd_settime calls, $(grep -c '^[0-9]' "$out/profiler.log" || true) profiler lines"
