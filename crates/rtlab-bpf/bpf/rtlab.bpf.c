// SPDX-License-Identifier: GPL-2.0
/* rtlab's explain recorder: what each measured CPU did around every late wake-up, kept in the
 * kernel and handed to user space only for the late ones.
 *
 * Per measured CPU the programs keep the task running (with when it started), the stack of
 * interrupt contexts open (hard IRQ, vector, softirq, hrtimer callback) and a flight-recorder
 * window of the last WINDOW_EVENTS events. The measuring threads are in `measured` (tid → their
 * late threshold and series slot, written by user space). When a measuring thread's timer fires
 * (hrtimer_expire_entry of an hrtimer_wakeup whose sleeper is measured) the intended time is the
 * timer's soft expiry and the tracepoint carries `now`, so neither needs a clock read; a hand-off
 * thread's wake-up starts at its sched_waking. When the thread switches in, the time is stamped;
 * when it next blocks (its sample is taken by then), the latency switch-in − intended is computed,
 * the per-CPU histogram updated, a 40-byte sample record written with BPF_RB_NO_WAKEUP (the irq
 * and thread split), and only when the latency is above the thread's threshold an episode (header
 * plus the CPU's window) is reserved in the ring buffer and user space woken. Failed reservations
 * are counted. Record layouts are mirrored in src/records.rs. */
#include "rtlab_bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define WINDOW_EVENTS 1024
#define STACK_DEPTH 6
#define MAX_SLOTS 64
#define HISTOGRAM_BUCKETS 320

enum event_kind {
	EVENT_SWITCH = 1,
	EVENT_WAKING = 2,
	EVENT_WAKEUP = 3,
	EVENT_MIGRATE = 4,
	EVENT_IRQ_ENTRY = 5,
	EVENT_IRQ_EXIT = 6,
	EVENT_SOFTIRQ_ENTRY = 7,
	EVENT_SOFTIRQ_EXIT = 8,
	EVENT_HRTIMER_ENTRY = 9,
	EVENT_HRTIMER_EXIT = 10,
	EVENT_WORK_START = 11,
	EVENT_WORK_END = 12,
	EVENT_VECTOR_ENTRY = 13,
	EVENT_VECTOR_EXIT = 14,
};

/* Vector ids of EVENT_VECTOR_*, indexes into VECTOR_NAMES in src/records.rs. */
enum vector_id {
	VECTOR_LOCAL_TIMER = 0,
	VECTOR_RESCHEDULE = 1,
	VECTOR_CALL_FUNCTION = 2,
	VECTOR_CALL_FUNCTION_SINGLE = 3,
	VECTOR_IRQ_WORK = 4,
};

enum counter {
	COUNTER_EVENTS = 0,
	COUNTER_EPISODES = 1,
	COUNTER_EPISODES_LOST = 2,
	COUNTER_SAMPLES = 3,
	COUNTER_SAMPLES_LOST = 4,
	COUNTER_CLOCK_READS = 5,
	COUNTERS = 8,
};

enum record_type {
	RECORD_EPISODE = 1,
	RECORD_SAMPLE = 2,
};

struct rtlab_event {
	__u64 ts;
	__s32 pid; /* the task current when the event fired */
	__u16 kind;
	__u16 flags;
	union {
		struct {
			__s32 prev_pid;
			__s32 prev_prio;
			__s32 next_pid;
			__s32 next_prio;
			char prev_comm[16];
			char next_comm[16];
		} sw; /* prev_state is in `flags` */
		struct {
			__s32 pid;
			__s32 prio;
			__s32 target_cpu;
			char comm[16];
		} wake;
		struct {
			__s32 pid;
			__s32 prio;
			__s32 orig_cpu;
			__s32 dest_cpu;
		} migrate;
		struct {
			__s32 irq;
			char name[16];
		} irq;
		struct {
			__u32 vector;
		} softirq;
		struct {
			__u64 timer;
			__u64 function;
			__s64 now;
		} hrtimer;
		struct {
			__u64 function;
		} work;
		struct {
			__u32 id;
		} vector;
		__u8 raw[48];
	};
};

struct task_snapshot {
	__u64 since; /* when it was switched in (0: not seen) */
	__s32 pid;
	__s32 prio;
	char comm[16];
};

struct context_entry {
	__u64 ts;
	__u64 key; /* irq number, softirq vector, timer address or vector id */
	__u32 kind; /* the entry event's kind */
	__u32 pad;
};

struct cpu_state {
	struct task_snapshot current;
	__u32 depth;
	__u32 pad;
	struct context_entry stack[STACK_DEPTH];
};

struct window {
	__u64 next; /* events ever written; the newest is at (next - 1) % WINDOW_EVENTS */
	struct rtlab_event events[WINDOW_EVENTS];
};

struct measured {
	__u32 slot; /* written by user space: the series' slot (its threshold is in `thresholds`) */
	__u32 pending; /* a wake-up is under way */
	__u64 intended_ns;
	__u64 expired_ns; /* 0: not woken by its timer (hand-off) */
	__u64 switched_ns; /* 0: not switched in yet */
	__u32 preempted; /* switched out runnable after its switch-in, before it blocked */
	__u32 cpu;
	__u32 depth;
	__u32 pad;
	struct task_snapshot interrupted;
	struct context_entry stack[STACK_DEPTH];
};

struct episode_header {
	__u32 type;
	__u32 cpu;
	__u32 tid;
	__u32 slot;
	__u64 intended_ns;
	__u64 expired_ns;
	__u64 switched_ns;
	__u64 blocked_ns;
	__u64 next;
	struct task_snapshot interrupted;
	__u32 depth;
	__u32 pad;
	struct context_entry stack[STACK_DEPTH];
};

struct episode {
	struct episode_header header;
	struct rtlab_event events[WINDOW_EVENTS];
};

struct sample {
	__u32 type;
	__u32 cpu;
	__u32 tid;
	__u32 slot;
	__u64 intended_ns;
	__u64 expired_ns;
	__u64 switched_ns;
};

/* The layouts src/records.rs reads. */
_Static_assert(sizeof(struct rtlab_event) == 64, "event layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, sw.next_comm) == 48, "switch layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, wake.comm) == 28, "waking layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, hrtimer.now) == 32, "hrtimer layout");
_Static_assert(sizeof(struct task_snapshot) == 32, "snapshot layout");
_Static_assert(sizeof(struct context_entry) == 24, "context layout");
_Static_assert(sizeof(struct episode_header) == 240, "episode header layout");
_Static_assert(__builtin_offsetof(struct episode_header, stack) == 96, "episode header layout");
_Static_assert(sizeof(struct sample) == 40, "sample layout");
_Static_assert(sizeof(struct measured) == 224, "measured layout");

/* Set by the loader. */
const volatile __u64 cpu_mask[4] = {};
const volatile __u64 hrtimer_wakeup_function = 0;
/* 1: read the clock on every event (for measuring what reusing the tracepoints' times saves). */
const volatile __u32 clock_every_event = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct measured);
} measured SEC(".maps");

/* Per slot, the late threshold in ns (written by user space; 0 until set means every wake-up). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u64);
} thresholds SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct cpu_state);
} cpu_states SEC(".maps");

/* One window per CPU; max_entries is set to the number of possible CPUs by the loader. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, struct window);
} windows SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, MAX_SLOTS * HISTOGRAM_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} histograms SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTERS);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 32 * 1024 * 1024);
} records SEC(".maps");

static __always_inline void count(__u32 which)
{
	__u64 *value = bpf_map_lookup_elem(&counters, &which);
	if (value)
		*value += 1;
}

static __always_inline bool cpu_measured(__u32 cpu)
{
	if (cpu >= 256)
		return 0;
	return (cpu_mask[cpu / 64] >> (cpu % 64)) & 1;
}

static __always_inline __u64 clock_now(void)
{
	count(COUNTER_CLOCK_READS);
	return bpf_ktime_get_ns();
}

/* The next slot of this CPU's window, or NULL when the CPU is not measured. */
static __always_inline struct rtlab_event *window_slot(__u32 cpu, __u64 ts, __u16 kind, __s32 pid)
{
	struct window *window = bpf_map_lookup_elem(&windows, &cpu);
	if (!window)
		return 0;
	__u64 index = window->next & (WINDOW_EVENTS - 1);
	window->next += 1;
	struct rtlab_event *event = &window->events[index];
	event->ts = ts;
	event->pid = pid;
	event->kind = kind;
	event->flags = 0;
	count(COUNTER_EVENTS);
	return event;
}

static __always_inline struct cpu_state *state_of_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

static __always_inline void push_context(struct cpu_state *state, __u64 ts, __u32 kind, __u64 key)
{
	__u32 depth = state->depth;
	if (depth < STACK_DEPTH) {
		state->stack[depth].ts = ts;
		state->stack[depth].kind = kind;
		state->stack[depth].key = key;
	}
	state->depth = depth + 1;
}

static __always_inline void pop_context(struct cpu_state *state)
{
	if (state->depth > 0)
		state->depth -= 1;
}

static __always_inline __s32 current_pid(struct cpu_state *state)
{
	return state->current.pid;
}

/* log-linear bucket: 8 sub-buckets per power of two (12.5 % wide), exact below 8 ns. */
static __always_inline __u32 histogram_bucket(__u64 value)
{
	if (value < 8)
		return (__u32)value;
	__u32 msb = 0;
	__u64 v = value;
	if (v >> 32) { v >>= 32; msb += 32; }
	if (v >> 16) { v >>= 16; msb += 16; }
	if (v >> 8) { v >>= 8; msb += 8; }
	if (v >> 4) { v >>= 4; msb += 4; }
	if (v >> 2) { v >>= 2; msb += 2; }
	if (v >> 1) { msb += 1; }
	__u32 bucket = (msb - 2) * 8 + (__u32)((value >> (msb - 3)) & 7);
	return bucket < HISTOGRAM_BUCKETS ? bucket : HISTOGRAM_BUCKETS - 1;
}

static __always_inline void copy_state(struct measured *m, struct cpu_state *state, __u32 cpu)
{
	m->cpu = cpu;
	m->interrupted = state->current;
	m->depth = state->depth;
	for (int i = 0; i < STACK_DEPTH; i++)
		m->stack[i] = state->stack[i];
}

/* The measured thread `tid` blocked again: its wake-up is complete. */
static __always_inline void finish_wakeup(struct measured *m, __u32 tid, __u32 cpu, __u64 now)
{
	m->pending = 0;
	if (m->switched_ns == 0 || m->switched_ns < m->intended_ns)
		return;
	__u64 latency = m->switched_ns - m->intended_ns;
	__u32 slot = m->slot;
	if (slot < MAX_SLOTS) {
		__u32 key = slot * HISTOGRAM_BUCKETS + histogram_bucket(latency);
		__u64 *bucket = bpf_map_lookup_elem(&histograms, &key);
		if (bucket)
			*bucket += 1;
	}
	struct sample sample = {
		.type = RECORD_SAMPLE,
		.cpu = cpu,
		.tid = tid,
		.slot = slot,
		.intended_ns = m->intended_ns,
		.expired_ns = m->expired_ns,
		.switched_ns = m->switched_ns,
	};
	if (bpf_ringbuf_output(&records, &sample, sizeof(sample), BPF_RB_NO_WAKEUP) == 0)
		count(COUNTER_SAMPLES);
	else
		count(COUNTER_SAMPLES_LOST);
	__u64 *threshold = bpf_map_lookup_elem(&thresholds, &slot);
	/* Late at the switch-in, or preempted after it and late by the time it blocked: the
	 * thread's own clock read may have come after the preemption. */
	bool late = threshold && (latency > *threshold ||
				  (m->preempted && now - m->intended_ns > *threshold));
	m->preempted = 0;
	if (late) {
		struct window *window = bpf_map_lookup_elem(&windows, &cpu);
		if (!window)
			return;
		struct episode *episode = bpf_ringbuf_reserve(&records, sizeof(struct episode), 0);
		if (!episode) {
			count(COUNTER_EPISODES_LOST);
			return;
		}
		episode->header.type = RECORD_EPISODE;
		episode->header.cpu = cpu;
		episode->header.tid = tid;
		episode->header.slot = slot;
		episode->header.intended_ns = m->intended_ns;
		episode->header.expired_ns = m->expired_ns;
		episode->header.switched_ns = m->switched_ns;
		episode->header.blocked_ns = now;
		episode->header.next = window->next;
		episode->header.interrupted = m->interrupted;
		episode->header.depth = m->depth;
		episode->header.pad = 0;
		for (int i = 0; i < STACK_DEPTH; i++)
			episode->header.stack[i] = m->stack[i];
		bpf_probe_read_kernel(episode->events, sizeof(episode->events), window->events);
		bpf_ringbuf_submit(episode, BPF_RB_FORCE_WAKEUP);
		count(COUNTER_EPISODES);
	}
}

SEC("tp_btf/sched_switch")
int rtlab_sched_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 prev_state = (__u32)ctx[3];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__u64 ts = clock_now();
	__s32 prev_pid = prev->pid;
	__s32 next_pid = next->pid;
	struct rtlab_event *event = window_slot(cpu, ts, EVENT_SWITCH, prev_pid);
	if (event) {
		event->sw.prev_pid = prev_pid;
		event->sw.prev_prio = prev->prio;
		event->sw.next_pid = next_pid;
		event->sw.next_prio = next->prio;
		event->flags = preempt ? 0 : (__u16)prev_state;
		bpf_probe_read_kernel(event->sw.prev_comm, 16, prev->comm);
		bpf_probe_read_kernel(event->sw.next_comm, 16, next->comm);
	}
	state->current.since = ts;
	state->current.pid = next_pid;
	state->current.prio = next->prio;
	bpf_probe_read_kernel(state->current.comm, 16, next->comm);
	/* Nothing nests across a switch. */
	state->depth = 0;
	/* pid 0 is each CPU's idle task, never a measured thread. */
	if (prev_pid != 0) {
		__u32 tid = (__u32)prev_pid;
		struct measured *m = bpf_map_lookup_elem(&measured, &tid);
		if (m && m->pending) {
			if (!preempt && prev_state != 0)
				finish_wakeup(m, tid, cpu, ts);
			else if (m->switched_ns != 0)
				m->preempted = 1;
		}
	}
	if (next_pid != 0) {
		__u32 tid = (__u32)next_pid;
		struct measured *m = bpf_map_lookup_elem(&measured, &tid);
		if (m && m->pending && m->switched_ns == 0)
			m->switched_ns = ts;
	}
	return 0;
}

static __always_inline int record_waking(__u64 *ctx, __u16 kind)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__s32 pid = task->pid;
	struct measured *m = 0;
	if (pid != 0) {
		__u32 tid = (__u32)pid;
		m = bpf_map_lookup_elem(&measured, &tid);
	}
	__u64 ts;
	if (m && m->pending && m->expired_ns != 0 && m->switched_ns == 0 && !clock_every_event) {
		/* Woken by its own timer: the waking is inside that callback, stamped with its time. */
		ts = m->expired_ns;
	} else {
		ts = clock_now();
	}
	if (kind == EVENT_WAKING && m && !m->pending) {
		/* A hand-off thread: its wake-up starts here. */
		m->pending = 1;
		m->intended_ns = ts;
		m->expired_ns = 0;
		m->switched_ns = 0;
		m->preempted = 0;
		copy_state(m, state, cpu);
	}
	struct rtlab_event *event = window_slot(cpu, ts, kind, current_pid(state));
	if (event) {
		event->wake.pid = pid;
		event->wake.prio = task->prio;
		/* task_cpu(p), as the tracefs event's target_cpu. */
		event->wake.target_cpu = (__s32)task->thread_info.cpu;
		bpf_probe_read_kernel(event->wake.comm, 16, task->comm);
	}
	return 0;
}

SEC("tp_btf/sched_waking")
int rtlab_sched_waking(__u64 *ctx)
{
	return record_waking(ctx, EVENT_WAKING);
}

SEC("tp_btf/sched_wakeup")
int rtlab_sched_wakeup(__u64 *ctx)
{
	return record_waking(ctx, EVENT_WAKEUP);
}

SEC("tp_btf/sched_migrate_task")
int rtlab_sched_migrate_task(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 dest_cpu = (__u32)ctx[1];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	struct rtlab_event *event = window_slot(cpu, clock_now(), EVENT_MIGRATE, current_pid(state));
	if (event) {
		event->migrate.pid = task->pid;
		event->migrate.prio = task->prio;
		event->migrate.orig_cpu = (__s32)cpu;
		event->migrate.dest_cpu = (__s32)dest_cpu;
	}
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int rtlab_irq_handler_entry(__u64 *ctx)
{
	__s32 irq = (__s32)ctx[0];
	struct irqaction *action = (struct irqaction *)ctx[1];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__u64 ts = clock_now();
	push_context(state, ts, EVENT_IRQ_ENTRY, (__u64)irq);
	struct rtlab_event *event = window_slot(cpu, ts, EVENT_IRQ_ENTRY, current_pid(state));
	if (event) {
		event->irq.irq = irq;
		bpf_probe_read_kernel_str(event->irq.name, 16, action->name);
	}
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int rtlab_irq_handler_exit(__u64 *ctx)
{
	__s32 irq = (__s32)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	pop_context(state);
	struct rtlab_event *event = window_slot(cpu, clock_now(), EVENT_IRQ_EXIT, current_pid(state));
	if (event)
		event->irq.irq = irq;
	return 0;
}

static __always_inline int record_softirq(__u64 *ctx, __u16 kind)
{
	__u32 vector = (__u32)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__u64 ts = clock_now();
	if (kind == EVENT_SOFTIRQ_ENTRY)
		push_context(state, ts, kind, vector);
	else
		pop_context(state);
	struct rtlab_event *event = window_slot(cpu, ts, kind, current_pid(state));
	if (event)
		event->softirq.vector = vector;
	return 0;
}

SEC("tp_btf/softirq_entry")
int rtlab_softirq_entry(__u64 *ctx)
{
	return record_softirq(ctx, EVENT_SOFTIRQ_ENTRY);
}

SEC("tp_btf/softirq_exit")
int rtlab_softirq_exit(__u64 *ctx)
{
	return record_softirq(ctx, EVENT_SOFTIRQ_EXIT);
}

SEC("tp_btf/hrtimer_expire_entry")
int rtlab_hrtimer_expire_entry(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	ktime_t *now_pointer = (ktime_t *)ctx[1];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__s64 now = 0;
	bpf_probe_read_kernel(&now, sizeof(now), now_pointer);
	/* The tracepoint carries the expiry's time: no clock read. */
	__u64 ts = clock_every_event ? clock_now() : (__u64)now;
	void *function = timer->function;
	if (hrtimer_wakeup_function != 0 && (__u64)function == hrtimer_wakeup_function) {
		struct task_struct *task = 0;
		struct hrtimer_sleeper *sleeper = (struct hrtimer_sleeper *)timer;
		bpf_probe_read_kernel(&task, sizeof(task), &sleeper->task);
		__s32 pid = 0;
		if (task)
			bpf_probe_read_kernel(&pid, sizeof(pid), &task->pid);
		if (pid != 0) {
			__u32 tid = (__u32)pid;
			struct measured *m = bpf_map_lookup_elem(&measured, &tid);
			if (m) {
				m->pending = 1;
				m->intended_ns = (__u64)timer->_softexpires;
				m->expired_ns = (__u64)now;
				m->switched_ns = 0;
				m->preempted = 0;
				copy_state(m, state, cpu);
			}
		}
	}
	push_context(state, ts, EVENT_HRTIMER_ENTRY, (__u64)timer);
	struct rtlab_event *event = window_slot(cpu, ts, EVENT_HRTIMER_ENTRY, current_pid(state));
	if (event) {
		event->hrtimer.timer = (__u64)timer;
		event->hrtimer.function = (__u64)function;
		event->hrtimer.now = now;
	}
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int rtlab_hrtimer_expire_exit(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	pop_context(state);
	struct rtlab_event *event = window_slot(cpu, clock_now(), EVENT_HRTIMER_EXIT, current_pid(state));
	if (event)
		event->hrtimer.timer = (__u64)timer;
	return 0;
}

SEC("tp_btf/workqueue_execute_start")
int rtlab_workqueue_execute_start(__u64 *ctx)
{
	struct work_struct *work = (struct work_struct *)ctx[0];
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	struct rtlab_event *event = window_slot(cpu, clock_now(), EVENT_WORK_START, current_pid(state));
	if (event)
		event->work.function = (__u64)work->func;
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int rtlab_workqueue_execute_end(__u64 *ctx)
{
	/* The end only closes the work item; its function is not read (the verifier refuses a
	 * function-pointer argument). */
	__u64 function = 0;
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	struct rtlab_event *event = window_slot(cpu, clock_now(), EVENT_WORK_END, current_pid(state));
	if (event)
		event->work.function = function;
	return 0;
}

static __always_inline int record_vector(__u16 kind, __u32 id)
{
	__u32 cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(cpu))
		return 0;
	struct cpu_state *state = state_of_cpu();
	if (!state)
		return 0;
	__u64 ts = clock_now();
	if (kind == EVENT_VECTOR_ENTRY)
		push_context(state, ts, kind, id);
	else
		pop_context(state);
	struct rtlab_event *event = window_slot(cpu, ts, kind, current_pid(state));
	if (event)
		event->vector.id = id;
	return 0;
}

#define VECTOR_PROGRAMS(name, id)                                   \
	SEC("tp_btf/" #name "_entry")                               \
	int rtlab_##name##_entry(__u64 *ctx)                        \
	{                                                           \
		return record_vector(EVENT_VECTOR_ENTRY, id);       \
	}                                                           \
	SEC("tp_btf/" #name "_exit")                                \
	int rtlab_##name##_exit(__u64 *ctx)                         \
	{                                                           \
		return record_vector(EVENT_VECTOR_EXIT, id);        \
	}

VECTOR_PROGRAMS(local_timer, VECTOR_LOCAL_TIMER)
VECTOR_PROGRAMS(reschedule, VECTOR_RESCHEDULE)
VECTOR_PROGRAMS(call_function, VECTOR_CALL_FUNCTION)
VECTOR_PROGRAMS(call_function_single, VECTOR_CALL_FUNCTION_SINGLE)
VECTOR_PROGRAMS(irq_work, VECTOR_IRQ_WORK)
