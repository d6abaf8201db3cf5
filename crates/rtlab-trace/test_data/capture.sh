#!/usr/bin/env bash
# Captures a trace-cmd trace.dat of a command the way `trace-cmd record` would, on machines where
# `trace-cmd record` cannot enable ftrace (this VM: /proc/sys/kernel/ftrace_enabled is read-only):
# a private tracefs instance with the events `rtlab trace analyze` uses, then `trace-cmd extract`.
# Touches nothing outside its own instance, which it removes on every exit.
# With SLIM=1 the kallsyms are left out (trace-cmd reads an empty /proc/kallsyms in a private
# mount namespace): the fixtures' way to stay small.
# BUFFER_KB sets the ring per CPU (default 4096); CLOCK the trace clock (default local; mono to
# compare the times with CLOCK_MONOTONIC ones).
# Usage: [SLIM=1] [BUFFER_KB=N] capture.sh OUT.dat COMMAND [ARGS...]
set -euo pipefail
out=$1; shift
tracefs=/sys/kernel/tracing
[ -d "$tracefs/instances" ] || tracefs=/sys/kernel/debug/tracing
name=apptrace-capture-$$
instance=$tracefs/instances/$name
cleanup() { [ -d "$instance" ] && { echo 0 > "$instance/tracing_on"; rmdir "$instance"; } || true; }
trap cleanup EXIT
mkdir "$instance"
echo 0 > "$instance/tracing_on"
echo "${BUFFER_KB:-4096}" > "$instance/buffer_size_kb"
echo "${CLOCK:-local}" > "$instance/trace_clock"
for event in sched/sched_switch sched/sched_waking sched/sched_wakeup_new sched/sched_process_fork \
    sched/sched_process_exit sched/sched_migrate_task sched/sched_pi_setprio \
    syscalls/sys_enter_futex syscalls/sys_exit_futex irq/irq_handler_entry irq/irq_handler_exit \
    irq/softirq_entry irq/softirq_exit irq_vectors/local_timer_entry irq_vectors/local_timer_exit \
    irq_vectors/reschedule_entry irq_vectors/reschedule_exit; do
  echo 1 > "$instance/events/$event/enable"
done
echo 1 > "$instance/tracing_on"
status=0
"$@" || status=$?
echo 0 > "$instance/tracing_on"
if [ "${SLIM:-0}" = 1 ]; then
  unshare -m sh -c 'mount --bind /dev/null /proc/kallsyms && exec trace-cmd "$@"' sh \
    extract -B "$name" -o "$out" >/dev/null 2>&1
else
  trace-cmd extract -B "$name" -o "$out" >/dev/null 2>&1
fi
exit $status
