// SPDX-License-Identifier: GPL-2.0
/* rtlab's application-trace recorder (`rtlab trace record --recorder bpf`): the full event
 * stream of an application's threads and of whatever preempts or wakes them, filtered in the
 * kernel, as 32-byte records in one ring buffer.
 *
 * The records have the layout of the rtlab trace file's records (crates/rtlab-trace/src/
 * file.rs: u64 time, u16 CPU, u8 kind, u8 0, i32 tid, 16 bytes of body), so user space writes
 * them as they come. The target threads are in `targets` (tid → their process and the CPU they
 * are running or queued on), their processes in `target_processes`; user space puts the threads
 * it finds in /proc there, and a thread a target process creates is added here at its fork (a
 * command rtlab starts is a target from its fork: its starting thread is in `spawners`).
 * `presence` counts per CPU the target threads running or queued there.
 *
 * What is kept (the tracefs recording keeps the same events, for every task):
 * - sched_switch when either side is a target thread or a target thread is on that CPU (so
 *   whoever holds the CPU while a target waits for it is seen), and on every CPU when either
 *   side is real-time (kernel prio below 100: SCHED_FIFO/RR/DEADLINE), so what held back the
 *   real-time thread that activates a target (a gap without activation) is seen too;
 * - sched_waking when the woken task or the waker is a target thread, or a target is on the
 *   waker's CPU or on the CPU the woken task is queued to, or the woken task is real-time;
 * - sched_wakeup_new, sched_process_fork/exit, sched_migrate_task, sched_pi_setprio of target
 *   threads (the PI change also when a target thread makes it);
 * - futex calls (raw sys_enter/sys_exit filtered to the futex syscall) of target threads;
 * - IRQ, softirq and the local-timer and reschedule vectors' spans on a CPU with a target on it
 *   (an exit when its entry was kept).
 * - before a switch of a target thread, its CPU time so far (`se.sum_exec_runtime`, which on a
 *   guest with paravirtual steal accounting leaves out the time the hypervisor took): a run far
 *   longer than the CPU time it got is the hypervisor's;
 * - with `--cycle-marker`, each entry of the function that begins the program's cycle (a uprobe
 *   user space attaches when asked; every process mapping the file): a cycle marker of the
 *   thread that called it; with `--work-done-marker`, each return of the function that ends a
 *   thread's cycle work: a work-done marker of that thread;
 * A task's name goes out (a name record) before the first record naming it and when it changes
 * (`names`, an LRU map of the names sent). A waking in an interrupt has waker 0.
 *
 * Records are written with BPF_RB_NO_WAKEUP; once a quarter of the ring is waiting, with
 * BPF_RB_FORCE_WAKEUP (user space also reads on a timer). Records the ring has no room for are
 * counted in `counters`. */
#include "apptrace_bpf.h"

char LICENSE[] SEC("license") = "GPL";

enum record_kind {
	KIND_SWITCH = 1,
	KIND_WAKING = 2,
	KIND_WAKEUP_NEW = 3,
	KIND_FORK = 4,
	KIND_EXIT = 5,
	KIND_MIGRATE = 6,
	KIND_PI_SETPRIO = 7,
	KIND_FUTEX_ENTER = 8,
	KIND_FUTEX_EXIT = 9,
	KIND_IRQ_ENTRY = 10,
	KIND_IRQ_EXIT = 11,
	KIND_SOFTIRQ_ENTRY = 12,
	KIND_SOFTIRQ_EXIT = 13,
	KIND_NAME = 14,
	/* 15..17 are written by user space (owner, thread info, other policy). */
	KIND_RUNTIME = 18,
	KIND_CYCLE_MARKER = 19,
	KIND_WORK_DONE = 20,
};

enum counter {
	COUNTER_RECORDS = 0,
	COUNTER_LOST = 1,
	COUNTERS = 4,
};

/* Kernel prio below this: a real-time task (include/linux/sched/prio.h). */
#define MAX_RT_PRIO 100

/* The irq number of an x86 vector's span (the trace file's −1). */
#define VECTOR_IRQ -1
/* Interrupt nesting remembered per CPU (bits of `kept`). */
#define MAX_DEPTH 16
/* Task states of the sched_switch tracepoint's prev_state (include/linux/sched.h). */
#define TASK_REPORT 0x7f
#define TASK_UNINTERRUPTIBLE 0x2
#define TASK_NOLOAD 0x400
#define TASK_IDLE (TASK_UNINTERRUPTIBLE | TASK_NOLOAD)
#define TASK_REPORT_IDLE 0x80
#define TASK_REPORT_MAX 0x100
#define TASK_RTLOCK_WAIT 0x1000
#define TASK_FROZEN 0x8000

struct app_record {
	__u64 ts;
	__u16 cpu;
	__u8 kind;
	__u8 zero;
	__s32 tid;
	union {
		__s32 word[4];
		__u64 dword[2];
		char comm[16];
	};
};

struct target {
	__s32 tgid;
	__s32 cpu; /* running or queued there; -1: blocked or not known */
};

struct cpu_state {
	__u32 depth; /* interrupt nesting */
	__u32 kept; /* bit d: the entry at depth d was recorded */
	__s32 watched; /* a non-target whose switch-in was recorded here: record its switch-out */
	__u32 pad;
};

_Static_assert(sizeof(struct app_record) == 32, "record layout: the trace file's");
_Static_assert(sizeof(struct target) == 8, "target layout: src/apptrace.rs");

/* Set by the loader. */
const volatile __u32 futex_nr = 202;
const volatile __u64 wakeup_bytes = 1 << 20;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct target);
} targets SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} target_processes SEC(".maps");

/* Threads (of rtlab) about to start the target command: the process their next fork creates is
 * a target from its first instant. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} spawners SEC(".maps");

/* Per CPU the target threads running or queued there; max_entries = possible CPUs (loader). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __s32);
} presence SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 32768);
	__type(key, __u32);
	__type(value, char[16]);
} names SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

/* Non-target threads recorded as woken or preempted that have not been seen running since: their
 * next switch-in is recorded wherever it happens, or the analysis would see them runnable (and
 * starving) until the next recorded event of theirs. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, __u8);
} announced SEC(".maps");

/* Its size is set by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 16 * 1024 * 1024);
} events SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &which);
	if (value)
		*value += 1;
}

static __always_inline void emit(struct app_record *record)
{
	__u64 flags = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA) >= wakeup_bytes
			      ? BPF_RB_FORCE_WAKEUP
			      : BPF_RB_NO_WAKEUP;
	if (bpf_ringbuf_output(&events, record, sizeof(*record), flags) == 0)
		count(COUNTER_RECORDS);
	else
		count(COUNTER_LOST);
}

static __always_inline void start_record(struct app_record *record, __u64 ts, __u32 cpu, __u8 kind,
					 __s32 tid)
{
	record->ts = ts;
	record->cpu = (__u16)cpu;
	record->kind = kind;
	record->zero = 0;
	record->tid = tid;
	record->dword[0] = 0;
	record->dword[1] = 0;
}

/* A name record for `tid` unless its name `comm` was sent already. */
static __always_inline void note_name(__s32 tid, const char *comm, __u64 ts, __u32 cpu)
{
	if (tid <= 0)
		return;
	struct app_record record;
	start_record(&record, ts, cpu, KIND_NAME, tid);
	bpf_probe_read_kernel(record.comm, 16, comm);
	if (record.comm[0] == 0)
		return;
	__u32 key = (__u32)tid;
	__u64 *sent = bpf_map_lookup_elem(&names, &key);
	if (sent && sent[0] == record.dword[0] && sent[1] == record.dword[1])
		return;
	bpf_map_update_elem(&names, &key, record.comm, BPF_ANY);
	emit(&record);
}

static __always_inline void note_current_name(__s32 tid, __u64 ts, __u32 cpu)
{
	if (tid <= 0)
		return;
	char comm[16] = {};
	bpf_get_current_comm(comm, sizeof(comm));
	note_name(tid, comm, ts, cpu);
}

static __always_inline struct target *target_of(__s32 tid)
{
	if (tid <= 0)
		return 0;
	__u32 key = (__u32)tid;
	return bpf_map_lookup_elem(&targets, &key);
}

static __always_inline bool cpu_has_target(__s32 cpu)
{
	if (cpu < 0)
		return 0;
	__u32 key = (__u32)cpu;
	__s32 *count = bpf_map_lookup_elem(&presence, &key);
	return count && *count > 0;
}

/* Moves a target's presence to `cpu` (-1: off every CPU). */
static __always_inline void place(struct target *target, __s32 cpu)
{
	__s32 old = target->cpu;
	if (old == cpu)
		return;
	if (old >= 0) {
		__u32 key = (__u32)old;
		__s32 *count = bpf_map_lookup_elem(&presence, &key);
		if (count)
			__sync_fetch_and_add(count, -1);
	}
	if (cpu >= 0) {
		__u32 key = (__u32)cpu;
		__s32 *count = bpf_map_lookup_elem(&presence, &key);
		if (count)
			__sync_fetch_and_add(count, 1);
		else
			cpu = -1;
	}
	target->cpu = cpu;
}

static __always_inline struct cpu_state *state_of_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

/* prev_state as the sched_switch tracepoint reports it (__trace_sched_switch_state). */
static __always_inline __u32 reported_state(bool preempt, __u32 prev_state, __u32 exit_state)
{
	if (preempt)
		return TASK_REPORT_MAX;
	__u32 state = (prev_state | exit_state) & TASK_REPORT;
	if ((prev_state & TASK_IDLE) == TASK_IDLE)
		state = TASK_REPORT_IDLE;
	if ((prev_state & TASK_RTLOCK_WAIT) || (prev_state & TASK_FROZEN))
		state = TASK_UNINTERRUPTIBLE;
	/* The highest bit set (fls), as the one state reported. */
	__u32 reported = 0;
	for (int bit = 7; bit >= 0; bit--) {
		if (state & (1u << bit)) {
			reported = 1u << bit;
			break;
		}
	}
	return reported;
}

SEC("tp_btf/sched_switch")
int apptrace_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 prev_state = (__u32)ctx[3];
	__u32 cpu = bpf_get_smp_processor_id();
	/* No interrupt nests across a switch: an entry whose exit was missed ends here. */
	struct cpu_state *cpu_state = state_of_cpu();
	if (cpu_state)
		cpu_state->depth = 0;
	__s32 prev_pid = prev->pid;
	__s32 next_pid = next->pid;
	struct target *prev_target = target_of(prev_pid);
	struct target *next_target = target_of(next_pid);
	/* Flags, not `prev_target || next_target`: the verifier refuses OR-ing two pointers. */
	__u32 keep = cpu_has_target((__s32)cpu);
	if (prev_target)
		keep = 1;
	barrier_var(keep);
	if (next_target)
		keep = 1;
	/* Real-time tasks are few and switch rarely: theirs are kept everywhere. */
	if (prev->prio < MAX_RT_PRIO || next->prio < MAX_RT_PRIO)
		keep = 1;
	/* A non-target announced by a recorded wake-up or preemption runs now: record its switch-in,
	 * and its switch-out (`watched`), so the analysis sees when it ran. */
	__u32 key_next = (__u32)next_pid;
	if (next_pid > 0 && !next_target && bpf_map_delete_elem(&announced, &key_next) == 0)
		keep = 1;
	if (cpu_state && prev_pid > 0 && cpu_state->watched == prev_pid)
		keep = 1;
	__u32 state = reported_state(preempt, prev_state, (__u32)prev->exit_state);
	if (prev_target) {
		if (state == 0 || state == TASK_REPORT_MAX)
			place(prev_target, (__s32)cpu);
		else
			place(prev_target, -1);
	}
	if (next_target)
		place(next_target, (__s32)cpu);
	if (!keep)
		return 0;
	if (cpu_state)
		cpu_state->watched = next_target ? 0 : next_pid;
	/* A non-target preempted in a recorded switch stays runnable: record its next switch-in. */
	if (prev_pid > 0 && !prev_target && (state == 0 || state == TASK_REPORT_MAX)) {
		__u32 key_prev = (__u32)prev_pid;
		__u8 one = 1;
		bpf_map_update_elem(&announced, &key_prev, &one, BPF_ANY);
	}
	__u64 ts = bpf_ktime_get_ns();
	note_name(prev_pid, prev->comm, ts, cpu);
	note_name(next_pid, next->comm, ts, cpu);
	struct app_record record;
	if (prev_target) {
		start_record(&record, ts, cpu, KIND_RUNTIME, prev_pid);
		record.dword[0] = prev->se.sum_exec_runtime;
		emit(&record);
	}
	if (next_target) {
		start_record(&record, ts, cpu, KIND_RUNTIME, next_pid);
		record.dword[0] = next->se.sum_exec_runtime;
		emit(&record);
	}
	start_record(&record, ts, cpu, KIND_SWITCH, prev_pid);
	record.word[0] = prev->prio;
	record.word[1] = (__s32)state;
	record.word[2] = next_pid;
	record.word[3] = next->prio;
	emit(&record);
	/* A dead thread switches out for the last time. */
	if (prev_target && (prev->exit_state & 0x30)) {
		__u32 key = (__u32)prev_pid;
		bpf_map_delete_elem(&targets, &key);
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int apptrace_waking(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	__s32 pid = task->pid;
	__s32 waker = (__s32)bpf_get_current_pid_tgid();
	__s32 target_cpu = (__s32)task->thread_info.cpu;
	__u32 keep = cpu_has_target((__s32)cpu) || cpu_has_target(target_cpu);
	if (target_of(pid))
		keep = 1;
	barrier_var(keep);
	if (target_of(waker))
		keep = 1;
	if (task->prio < MAX_RT_PRIO)
		keep = 1;
	if (!keep)
		return 0;
	if (!target_of(pid) && pid > 0) {
		__u32 key = (__u32)pid;
		__u8 one = 1;
		bpf_map_update_elem(&announced, &key, &one, BPF_ANY);
	}
	struct cpu_state *state = state_of_cpu();
	if (state && state->depth > 0)
		waker = 0;
	__u64 ts = bpf_ktime_get_ns();
	note_name(pid, task->comm, ts, cpu);
	note_current_name(waker, ts, cpu);
	struct app_record record;
	start_record(&record, ts, cpu, KIND_WAKING, pid);
	record.word[0] = task->prio;
	record.word[1] = waker;
	record.word[2] = target_cpu;
	emit(&record);
	return 0;
}

/* Where a woken target is queued (the CPU is chosen after sched_waking). Nothing recorded. */
SEC("tp_btf/sched_wakeup")
int apptrace_wakeup(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct target *target = target_of(task->pid);
	if (target)
		place(target, (__s32)task->thread_info.cpu);
	return 0;
}

SEC("tp_btf/sched_wakeup_new")
int apptrace_wakeup_new(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__s32 pid = task->pid;
	__s32 waker = (__s32)bpf_get_current_pid_tgid();
	struct target *target = target_of(pid);
	if (target)
		place(target, (__s32)task->thread_info.cpu);
	__u32 keep = target != 0;
	barrier_var(keep);
	if (target_of(waker))
		keep = 1;
	if (!keep)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 ts = bpf_ktime_get_ns();
	note_name(pid, task->comm, ts, cpu);
	note_current_name(waker, ts, cpu);
	struct app_record record;
	start_record(&record, ts, cpu, KIND_WAKEUP_NEW, pid);
	record.word[0] = task->prio;
	record.word[1] = waker;
	emit(&record);
	return 0;
}

SEC("tp_btf/sched_process_fork")
int apptrace_fork(__u64 *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx[0];
	struct task_struct *child = (struct task_struct *)ctx[1];
	__u32 tgid = (__u32)child->tgid;
	__u32 spawner = (__u32)parent->pid;
	if (bpf_map_lookup_elem(&spawners, &spawner)) {
		__u32 one = 1;
		bpf_map_update_elem(&target_processes, &tgid, &one, BPF_ANY);
		bpf_map_delete_elem(&spawners, &spawner);
	}
	if (!bpf_map_lookup_elem(&target_processes, &tgid))
		return 0;
	__s32 pid = child->pid;
	struct target target = {.tgid = (__s32)tgid, .cpu = -1};
	__u32 key = (__u32)pid;
	bpf_map_update_elem(&targets, &key, &target, BPF_NOEXIST);
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 ts = bpf_ktime_get_ns();
	note_name(pid, child->comm, ts, cpu);
	struct app_record record;
	start_record(&record, ts, cpu, KIND_FORK, pid);
	record.word[0] = parent->pid;
	emit(&record);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int apptrace_exit(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__s32 pid = task->pid;
	if (!target_of(pid))
		return 0;
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_EXIT, pid);
	emit(&record);
	return 0;
}

SEC("tp_btf/sched_migrate_task")
int apptrace_migrate(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__s32 dest_cpu = (__s32)ctx[1];
	__s32 pid = task->pid;
	struct target *target = target_of(pid);
	if (!target)
		return 0;
	__s32 orig_cpu = (__s32)task->thread_info.cpu;
	/* A queued task moves with its queue; a blocked one is placed at its wake-up. */
	if (target->cpu >= 0)
		place(target, dest_cpu);
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_MIGRATE, pid);
	record.word[0] = orig_cpu;
	record.word[1] = dest_cpu;
	emit(&record);
	return 0;
}

SEC("tp_btf/sched_pi_setprio")
int apptrace_pi_setprio(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct task_struct *pi_task = (struct task_struct *)ctx[1];
	__s32 pid = task->pid;
	__s32 by = (__s32)bpf_get_current_pid_tgid();
	__u32 keep = target_of(pid) != 0;
	barrier_var(keep);
	if (target_of(by))
		keep = 1;
	if (!keep)
		return 0;
	/* As the tracepoint computes newprio. */
	int new_prio = task->normal_prio;
	if (pi_task) {
		int pi_prio = pi_task->prio;
		if (pi_prio < new_prio)
			new_prio = pi_prio;
	}
	__u32 cpu = bpf_get_smp_processor_id();
	__u64 ts = bpf_ktime_get_ns();
	note_name(pid, task->comm, ts, cpu);
	struct app_record record;
	start_record(&record, ts, cpu, KIND_PI_SETPRIO, pid);
	record.word[0] = task->prio;
	record.word[1] = new_prio;
	record.word[2] = by;
	emit(&record);
	return 0;
}

SEC("tp_btf/sys_enter")
int apptrace_sys_enter(__u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long id = (long)ctx[1];
	if (id != futex_nr)
		return 0;
	__s32 tid = (__s32)bpf_get_current_pid_tgid();
	if (!target_of(tid))
		return 0;
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_FUTEX_ENTER, tid);
	record.dword[0] = regs->di;
	record.word[2] = (__s32)regs->si;
	record.word[3] = (__s32)regs->dx;
	emit(&record);
	return 0;
}

SEC("tp_btf/sys_exit")
int apptrace_sys_exit(__u64 *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx[0];
	long ret = (long)ctx[1];
	if (regs->orig_ax != futex_nr)
		return 0;
	__s32 tid = (__s32)bpf_get_current_pid_tgid();
	if (!target_of(tid))
		return 0;
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_FUTEX_EXIT, tid);
	record.dword[0] = (__u64)ret;
	emit(&record);
	return 0;
}

/* An interrupt span's entry (kept when a target is on this CPU) or exit (kept when its entry
 * was). */
static __always_inline int interrupt(__u8 kind, __s32 number, bool entry)
{
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__u32 cpu = bpf_get_smp_processor_id();
	bool keep;
	if (entry) {
		__u32 depth = state->depth;
		keep = cpu_has_target((__s32)cpu);
		if (depth < MAX_DEPTH) {
			if (keep)
				state->kept |= 1u << depth;
			else
				state->kept &= ~(1u << depth);
		}
		state->depth = depth + 1;
	} else {
		if (state->depth == 0)
			return 0;
		__u32 depth = state->depth - 1;
		state->depth = depth;
		keep = depth < MAX_DEPTH && (state->kept & (1u << depth));
	}
	if (!keep)
		return 0;
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), cpu, kind, number);
	emit(&record);
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int apptrace_irq_entry(__u64 *ctx)
{
	return interrupt(KIND_IRQ_ENTRY, (__s32)ctx[0], 1);
}

SEC("tp_btf/irq_handler_exit")
int apptrace_irq_exit(__u64 *ctx)
{
	return interrupt(KIND_IRQ_EXIT, (__s32)ctx[0], 0);
}

SEC("tp_btf/softirq_entry")
int apptrace_softirq_entry(__u64 *ctx)
{
	return interrupt(KIND_SOFTIRQ_ENTRY, (__s32)(__u32)ctx[0], 1);
}

SEC("tp_btf/softirq_exit")
int apptrace_softirq_exit(__u64 *ctx)
{
	return interrupt(KIND_SOFTIRQ_EXIT, (__s32)(__u32)ctx[0], 0);
}

SEC("tp_btf/local_timer_entry")
int apptrace_timer_entry(__u64 *ctx)
{
	return interrupt(KIND_IRQ_ENTRY, VECTOR_IRQ, 1);
}

SEC("tp_btf/local_timer_exit")
int apptrace_timer_exit(__u64 *ctx)
{
	return interrupt(KIND_IRQ_EXIT, VECTOR_IRQ, 0);
}

SEC("tp_btf/reschedule_entry")
int apptrace_resched_entry(__u64 *ctx)
{
	return interrupt(KIND_IRQ_ENTRY, VECTOR_IRQ, 1);
}

SEC("tp_btf/reschedule_exit")
int apptrace_resched_exit(__u64 *ctx)
{
	return interrupt(KIND_IRQ_EXIT, VECTOR_IRQ, 0);
}

/* The program's cycle start (`rtlab trace record --cycle-marker`): attached by user space, when
 * asked, to the entry of the function that begins the program's cycle. */
SEC("uprobe")
int apptrace_cycle_marker(void *ctx)
{
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_CYCLE_MARKER,
		     (__s32)bpf_get_current_pid_tgid());
	emit(&record);
	return 0;
}

/* A thread finished its cycle's work (`rtlab trace record --work-done-marker`): attached by user
 * space, when asked, to the return of the function that does it (a JACK client's callback). */
SEC("uretprobe")
int apptrace_work_done(void *ctx)
{
	struct app_record record;
	start_record(&record, bpf_ktime_get_ns(), bpf_get_smp_processor_id(), KIND_WORK_DONE,
		     (__s32)bpf_get_current_pid_tgid());
	emit(&record);
	return 0;
}
