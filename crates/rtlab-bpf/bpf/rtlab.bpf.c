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
 * thread's wake-up starts at its sched_waking. When the thread switches in, the time is stamped
 * (a thread woken while it runs, having slept towards a target already past, is never switched in:
 * its waking is stamped instead); when it next blocks (its sample is taken by then), or its next
 * timer fires first (it overran), the latency switch-in − intended is computed,
 * the per-CPU histogram updated, a 40-byte sample record written with BPF_RB_NO_WAKEUP (the irq
 * and thread split), and only when the latency is above the thread's threshold an episode is
 * reserved in the ring buffer and user space woken. Failed reservations are counted.
 *
 * An episode holds the part of the window attribution needs, not all of it: the events since the
 * CPU's last context switch before the wake-up began (nothing nests across a switch, so the CPU's
 * state at the intended time is known from there: the task, every interrupt context open), up to
 * the thread's block. That tail is copied into a record of 64 or 256 events; only when it is
 * longer, or the thread moved CPU, is the whole window copied.
 *
 * Clock reads: the timer tracepoint carries the expiry's time, and a measured thread's waking
 * inside its own timer callback reuses it. While no measured wake-up is pending on a CPU, the
 * events that cannot change what attribution says about the time before a timer fires (a switch
 * between two ordinary tasks, wakings of unmeasured tasks, migrations, work items) take the CPU's
 * last known time instead of a clock read and are marked (EVENT_TIME_LOWER_BOUND): before the
 * measured timer fires, attribution names interrupt contexts and tells idle from "a task ran", so
 * interrupt contexts and switches to or from idle are always timed. Record layouts are mirrored
 * in src/records.rs. */
#include "rtlab_bpf.h"

char LICENSE[] SEC("license") = "GPL";

#define WINDOW_EVENTS 1024
/* The two short episode records; a longer tail sends the whole window. */
#define TAIL_SMALL_EVENTS 64
#define TAIL_LARGE_EVENTS 256
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

/* Or-ed into an event's kind: its time is the CPU's last known time, a lower bound, not a clock
 * read (see the top of the file). */
#define EVENT_TIME_LOWER_BOUND 0x8000

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
	/* Events stamped with the CPU's last known time instead of a clock read. */
	COUNTER_UNTIMED = 6,
	/* Episodes sent as a short tail (64 or 256 events) rather than the whole window. */
	COUNTER_EPISODES_TAIL = 7,
	COUNTERS = 8,
};

enum record_type {
	RECORD_EPISODE = 1, /* header plus the whole window, in slot order */
	RECORD_SAMPLE = 2,
	RECORD_EPISODE_TAIL = 3, /* header plus the last `count` events, in sequence order */
};

/* Which events read the clock (set by the loader; the others measure what each choice saves). */
enum clock_policy {
	CLOCK_WHILE_PENDING = 0, /* the default: see the top of the file */
	CLOCK_REUSE_TRACEPOINT = 1, /* every event reads it but the two that reuse the timer's time */
	CLOCK_EVERY_EVENT = 2,
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
	/* An interrupt context (IRQ, vector, softirq, timer callback) was entered since the last
	 * switch: a measured thread running now may have been delayed after its switch-in. */
	__u32 interrupted;
	struct context_entry stack[STACK_DEPTH];
	/* The per-event counters, kept here (no counters lookup per event); user space sums them
	 * over CPUs with the others. */
	__u64 events;
	__u64 clock_reads;
	__u64 untimed;
};

/* Measured threads by tid: an open-addressed table (TID_TABLE entries, TID_PROBES probes from
 * the tid's hash) in one array value, so finding out whether a task is measured is an inlined
 * array lookup and a few compares, not a hash map lookup. User space fills it; a tid it cannot
 * place within TID_PROBES goes to `measured_overflow` (tid → slot) and sets `overflow`. */
#define TID_TABLE 1024
#define TID_PROBES 8
struct tid_entry {
	__u32 tid; /* 0: empty */
	__u32 slot;
};
struct tid_table {
	__u32 overflow;
	__u32 pad;
	struct tid_entry entries[TID_TABLE];
};

struct window {
	__u64 next; /* events ever written; the newest is at (next - 1) % WINDOW_EVENTS */
	__u64 last_ns; /* the latest time known on this CPU (a clock read or a tracepoint's) */
	__u64 last_switch_seq; /* sequence number of the latest switch, and the one before */
	__u64 previous_switch_seq;
	__u64 last_switch_ns; /* its time (a lower bound when untimed) */
	__u32 pending; /* measured wake-ups under way on this CPU */
	__u32 pad;
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
	__u64 start_seq; /* the episode's first event: the CPU's switch before the wake-up began */
};

/* A sample record: one measured wake-up's thread and times. An episode's header starts with one
 * (of type RECORD_EPISODE or RECORD_EPISODE_TAIL). */
struct sample {
	__u32 type;
	__u32 cpu;
	__u32 tid;
	__u32 slot;
	__u64 intended_ns;
	__u64 expired_ns;
	__u64 switched_ns;
};

struct episode_header {
	struct sample wakeup;
	__u64 blocked_ns;
	__u64 next;
	struct task_snapshot interrupted;
	__u32 depth;
	__u32 count; /* RECORD_EPISODE_TAIL: events that follow (sequence numbers next - count ..) */
	struct context_entry stack[STACK_DEPTH];
};

struct episode {
	struct episode_header header;
	struct rtlab_event events[WINDOW_EVENTS];
};

struct episode_small {
	struct episode_header header;
	struct rtlab_event events[TAIL_SMALL_EVENTS];
};

struct episode_large {
	struct episode_header header;
	struct rtlab_event events[TAIL_LARGE_EVENTS];
};

/* The layouts src/records.rs reads. */
_Static_assert(sizeof(struct rtlab_event) == 64, "event layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, sw.next_comm) == 48, "switch layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, wake.comm) == 28, "waking layout");
_Static_assert(__builtin_offsetof(struct rtlab_event, hrtimer.now) == 32, "hrtimer layout");
_Static_assert(sizeof(struct task_snapshot) == 32, "snapshot layout");
_Static_assert(sizeof(struct context_entry) == 24, "context layout");
_Static_assert(sizeof(struct episode_header) == 240, "episode header layout");
_Static_assert(__builtin_offsetof(struct episode_header, blocked_ns) == 40, "episode header layout");
_Static_assert(__builtin_offsetof(struct episode_header, stack) == 96, "episode header layout");
_Static_assert(sizeof(struct sample) == 40, "sample layout");
_Static_assert(sizeof(struct measured) == 232, "measured layout");
_Static_assert(sizeof(struct cpu_state) == 208, "cpu state layout");
_Static_assert(__builtin_offsetof(struct cpu_state, events) == 184, "cpu state layout");
_Static_assert(sizeof(struct tid_table) == 8 + 8 * TID_TABLE, "tid table layout");

/* Set by the loader. */
const volatile __u64 cpu_mask[4] = {};
const volatile __u64 hrtimer_wakeup_function = 0;
/* enum clock_policy. */
const volatile __u32 clock_policy = CLOCK_WHILE_PENDING;
/* 1: every episode copies the whole window (only to measure what the tails save). */
const volatile __u32 whole_window_episodes = 0;
/* 1: every program returns at once (only to measure the floor: what attaching costs the
 * wake-up path before a program does any work). */
const volatile __u32 attach_only = 0;

/* Per slot, the measured thread's state (slot written by user space). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, struct measured);
} measured SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tid_table);
} measured_tids SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, MAX_SLOTS);
	__type(key, __u32);
	__type(value, __u32);
} measured_overflow SEC(".maps");

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
	if (attach_only || cpu >= 256)
		return 0;
	return (cpu_mask[cpu / 64] >> (cpu % 64)) & 1;
}

static __always_inline struct window *window_of(__u32 cpu)
{
	return bpf_map_lookup_elem(&windows, &cpu);
}

/* A time the event's CPU now knows exactly: keeps the CPU's last known time. */
static __always_inline __u64 known_time(struct window *window, __u64 ts)
{
	if (ts > window->last_ns)
		window->last_ns = ts;
	return ts;
}

static __always_inline __u64 clock_now(struct cpu_state *state, struct window *window)
{
	state->clock_reads += 1;
	return known_time(window, bpf_ktime_get_ns());
}

/* The time of an event that matters only while a measured wake-up is pending on this CPU: a
 * clock read then (or under the other policies), else the CPU's last known time with
 * EVENT_TIME_LOWER_BOUND or-ed into `*kind`. */
static __always_inline __u64 time_if_pending(struct cpu_state *state, struct window *window,
					     __u16 *kind)
{
	if (clock_policy == CLOCK_WHILE_PENDING && window->pending == 0) {
		state->untimed += 1;
		*kind |= EVENT_TIME_LOWER_BOUND;
		return window->last_ns;
	}
	return clock_now(state, window);
}

/* The next slot of this CPU's window. */
static __always_inline struct rtlab_event *window_slot(struct cpu_state *state,
						       struct window *window, __u64 ts, __u16 kind,
						       __s32 pid)
{
	__u64 index = window->next & (WINDOW_EVENTS - 1);
	window->next += 1;
	struct rtlab_event *event = &window->events[index];
	event->ts = ts;
	event->pid = pid;
	event->kind = kind;
	event->flags = 0;
	state->events += 1;
	return event;
}

/* A task's 16-byte name, copied by two 8-byte loads through the task's BTF pointer (no
 * bpf_probe_read_kernel call: the verifier allows loads within a char array member). */
static __always_inline void copy_comm(char *to, const char *from)
{
	const __u64 *words = (const __u64 *)from;
	__u64 first = words[0];
	__u64 second = words[1];
	__builtin_memcpy(to, &first, 8);
	__builtin_memcpy(to + 8, &second, 8);
}

/* The measured thread `tid`'s state, or 0 when `tid` is not measured (0 is never). */
static __always_inline struct measured *measured_of(__u32 tid)
{
	if (tid == 0)
		return 0;
	__u32 zero = 0;
	struct tid_table *table = bpf_map_lookup_elem(&measured_tids, &zero);
	if (!table)
		return 0;
	__u32 home = tid * 2654435761u;
	for (__u32 i = 0; i < TID_PROBES; i++) {
		struct tid_entry *entry = &table->entries[(home + i) & (TID_TABLE - 1)];
		__u32 found = entry->tid;
		if (found == tid) {
			__u32 slot = entry->slot;
			return bpf_map_lookup_elem(&measured, &slot);
		}
		if (found == 0)
			return 0;
	}
	if (!table->overflow)
		return 0;
	__u32 *slot = bpf_map_lookup_elem(&measured_overflow, &tid);
	return slot ? bpf_map_lookup_elem(&measured, slot) : 0;
}

static __always_inline struct cpu_state *state_of_cpu(void)
{
	__u32 zero = 0;
	return bpf_map_lookup_elem(&cpu_states, &zero);
}

static __always_inline void push_context(struct cpu_state *state, __u64 ts, __u32 kind, __u64 key)
{
	__u32 depth = state->depth;
	state->interrupted = 1;
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

/* The CPU a program runs on, when it is measured: its number, state and window. */
struct this_cpu {
	__u32 cpu;
	struct cpu_state *state;
	struct window *window;
};

/* Every program's start: the CPU it runs on, with its state and window; false (the program then
 * returns at once) when rtlab does not measure that CPU. */
static __always_inline bool enter_measured_cpu(struct this_cpu *here)
{
	here->cpu = bpf_get_smp_processor_id();
	if (!cpu_measured(here->cpu))
		return 0;
	here->state = state_of_cpu();
	here->window = window_of(here->cpu);
	return here->state && here->window;
}

/* The next event of the CPU's window, at `ts`, on behalf of the task running on it. */
static __always_inline struct rtlab_event *current_task_event(struct this_cpu *here, __u64 ts,
							     __u16 kind)
{
	return window_slot(here->state, here->window, ts, kind, current_pid(here->state));
}

/* The next event, for one that matters only while a measured wake-up is pending (timed as
 * time_if_pending says). */
static __always_inline struct rtlab_event *event_timed_if_pending(struct this_cpu *here,
								 __u16 kind)
{
	__u64 ts = time_if_pending(here->state, here->window, &kind);
	return current_task_event(here, ts, kind);
}

/* An interrupt context (IRQ, vector, softirq, timer callback) entered at `ts`: opened on the
 * CPU's stack, with its entry event. */
static __always_inline struct rtlab_event *enter_context(struct this_cpu *here, __u64 ts,
							__u16 kind, __u64 key)
{
	push_context(here->state, ts, kind, key);
	return current_task_event(here, ts, kind);
}

/* An interrupt context left now: closed on the CPU's stack, with its exit event (always
 * timed). */
static __always_inline struct rtlab_event *exit_context(struct this_cpu *here, __u16 kind)
{
	pop_context(here->state);
	return current_task_event(here, clock_now(here->state, here->window), kind);
}

/* The entry (timed now) or the exit of an interrupt context known by a number (softirq vector,
 * vector id). */
static __always_inline struct rtlab_event *context_boundary(struct this_cpu *here, bool entry,
							   __u16 kind, __u32 key)
{
	if (entry)
		return enter_context(here, clock_now(here->state, here->window), kind, key);
	return exit_context(here, kind);
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

/* Counts a measured wake-up pending on `cpu` (delta +1) or no longer (-1). */
static __always_inline void pending_add(__u32 cpu, __s32 delta)
{
	struct window *window = window_of(cpu);
	if (window)
		__sync_fetch_and_add(&window->pending, (__u32)delta);
}

/* A measured thread's wake-up begins on `cpu` at `intended_ns`: the CPU's state then, and where
 * its episode's events will start. */
static __always_inline void begin_wakeup(struct measured *m, struct cpu_state *state,
					 struct window *window, __u32 cpu, __u64 intended_ns,
					 __u64 expired_ns)
{
	if (m->pending)
		pending_add(m->cpu, -1);
	m->pending = 1;
	m->intended_ns = intended_ns;
	m->expired_ns = expired_ns;
	m->switched_ns = 0;
	m->preempted = 0;
	m->cpu = cpu;
	m->interrupted = state->current;
	m->depth = state->depth;
	for (int i = 0; i < STACK_DEPTH; i++)
		m->stack[i] = state->stack[i];
	/* From the last switch before the intended time, so the task then and every context
	 * entered since are in the events. An untimed switch's time is a lower bound: if it really
	 * came after the intended time, the task before it (the event's prev) ran then, which the
	 * event carries too; before the timer fires attribution needs no more (idle switches are
	 * always timed). */
	bool before = window->last_switch_ns < intended_ns;
	m->start_seq = before ? window->last_switch_seq : window->previous_switch_seq;
	__sync_fetch_and_add(&window->pending, 1);
}

/* The measured thread `tid`'s wake-up on `cpu`, as a record of `type` (a sample, or the start of
 * an episode's header). */
static __always_inline struct sample sample_of(struct measured *m, __u32 type, __u32 cpu,
					       __u32 tid)
{
	struct sample sample = {
		.type = type,
		.cpu = cpu,
		.tid = tid,
		.slot = m->slot,
		.intended_ns = m->intended_ns,
		.expired_ns = m->expired_ns,
		.switched_ns = m->switched_ns,
	};
	return sample;
}

static __always_inline void fill_header(struct episode_header *header, struct measured *m,
					__u32 type, __u32 cpu, __u32 tid, __u64 now, __u64 next,
					__u32 count)
{
	header->wakeup = sample_of(m, type, cpu, tid);
	header->blocked_ns = now;
	header->next = next;
	header->interrupted = m->interrupted;
	header->depth = m->depth;
	header->count = count;
	for (int i = 0; i < STACK_DEPTH; i++)
		header->stack[i] = m->stack[i];
}

/* Sends the last `n` (<= CAP) events of the window as a tail record of type STRUCT. */
#define SEND_TAIL(STRUCT, CAP)                                                          \
	do {                                                                            \
		struct STRUCT *tail = bpf_ringbuf_reserve(&records, sizeof(struct STRUCT), 0); \
		if (!tail) {                                                            \
			count(COUNTER_EPISODES_LOST);                                   \
			return;                                                         \
		}                                                                       \
		fill_header(&tail->header, m, RECORD_EPISODE_TAIL, cpu, tid, now, next, n); \
		__u64 first = next - n;                                                 \
		for (__u32 i = 0; i < CAP; i++) {                                       \
			if (i >= n)                                                     \
				break;                                                  \
			__u64 index = (first + i) & (WINDOW_EVENTS - 1);                \
			tail->events[i] = window->events[index];                        \
		}                                                                       \
		bpf_ringbuf_submit(tail, BPF_RB_FORCE_WAKEUP);                          \
		count(COUNTER_EPISODES_TAIL);                                           \
	} while (0)

/* The late wake-up's episode: the tail since its start when short enough, else the window. */
static __always_inline void send_episode(struct measured *m, struct window *window, __u32 tid,
					 __u32 cpu, __u64 now)
{
	__u64 next = window->next;
	__u64 n = next - m->start_seq;
	bool tail = !whole_window_episodes && m->cpu == cpu && m->start_seq != 0;
	if (tail && n <= TAIL_SMALL_EVENTS) {
		SEND_TAIL(episode_small, TAIL_SMALL_EVENTS);
	} else if (tail && n <= TAIL_LARGE_EVENTS) {
		SEND_TAIL(episode_large, TAIL_LARGE_EVENTS);
	} else {
		struct episode *episode = bpf_ringbuf_reserve(&records, sizeof(struct episode), 0);
		if (!episode) {
			count(COUNTER_EPISODES_LOST);
			return;
		}
		fill_header(&episode->header, m, RECORD_EPISODE, cpu, tid, now, next, 0);
		bpf_probe_read_kernel(episode->events, sizeof(episode->events), window->events);
		bpf_ringbuf_submit(episode, BPF_RB_FORCE_WAKEUP);
	}
	count(COUNTER_EPISODES);
}

/* The measured thread `tid` blocked again on `cpu`: its wake-up is complete. */
static __always_inline void finish_wakeup(struct measured *m, struct window *window, __u32 tid,
					  __u32 cpu, __u64 now, bool interrupted)
{
	m->pending = 0;
	pending_add(m->cpu, -1);
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
	struct sample sample = sample_of(m, RECORD_SAMPLE, cpu, tid);
	if (bpf_ringbuf_output(&records, &sample, sizeof(sample), BPF_RB_NO_WAKEUP) == 0)
		count(COUNTER_SAMPLES);
	else
		count(COUNTER_SAMPLES_LOST);
	__u64 *threshold = bpf_map_lookup_elem(&thresholds, &slot);
	/* Late at the switch-in, or preempted or interrupted (an IRQ, softirq or timer callback on
	 * its CPU) after it and late by the time it blocked: the thread's own clock read may have
	 * come after that delay. */
	bool late = threshold && (latency > *threshold ||
				  ((m->preempted || interrupted) && now - m->intended_ns > *threshold));
	m->preempted = 0;
	if (late)
		send_episode(m, window, tid, cpu, now);
}

/* A program that is one call of the function recording its tracepoint's event: the program
 * rtlab_TRACEPOINT on tp_btf/TRACEPOINT, returning CALL (which may use the tracepoint's `ctx`). */
#define TRACEPOINT_PROGRAM(tracepoint, call) \
	SEC("tp_btf/" #tracepoint)            \
	int rtlab_##tracepoint(__u64 *ctx)    \
	{                                     \
		return call;                  \
	}

SEC("tp_btf/sched_switch")
int rtlab_sched_switch(__u64 *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (struct task_struct *)ctx[1];
	struct task_struct *next = (struct task_struct *)ctx[2];
	__u32 prev_state = (__u32)ctx[3];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	struct cpu_state *state = here.state;
	struct window *window = here.window;
	__s32 prev_pid = prev->pid;
	__s32 next_pid = next->pid;
	/* pid 0 is each CPU's idle task, never a measured thread. */
	struct measured *prev_measured = measured_of((__u32)prev_pid);
	struct measured *next_measured = measured_of((__u32)next_pid);
	__u16 kind = EVENT_SWITCH;
	__u64 ts;
	/* Idle against a task, and a measured thread's switches, are always timed. */
	if (prev_pid == 0 || next_pid == 0 || prev_measured || next_measured)
		ts = clock_now(state, window);
	else
		ts = time_if_pending(state, window, &kind);
	__u64 seq = window->next;
	struct rtlab_event *event = window_slot(state, window, ts, kind, prev_pid);
	event->sw.prev_pid = prev_pid;
	event->sw.prev_prio = prev->prio;
	event->sw.next_pid = next_pid;
	event->sw.next_prio = next->prio;
	event->flags = preempt ? 0 : (__u16)prev_state;
	copy_comm(event->sw.prev_comm, prev->comm);
	copy_comm(event->sw.next_comm, next->comm);
	window->previous_switch_seq = window->last_switch_seq;
	window->last_switch_seq = seq;
	window->last_switch_ns = ts;
	state->current.since = ts;
	state->current.pid = next_pid;
	state->current.prio = next->prio;
	copy_comm(state->current.comm, next->comm);
	/* Nothing nests across a switch. */
	state->depth = 0;
	bool interrupted = state->interrupted;
	state->interrupted = 0;
	if (prev_measured && prev_measured->pending) {
		if (!preempt && prev_state != 0)
			finish_wakeup(prev_measured, window, (__u32)prev_pid, here.cpu, ts, interrupted);
		else if (prev_measured->switched_ns != 0)
			prev_measured->preempted = 1;
	}
	if (next_measured && next_measured->pending && next_measured->switched_ns == 0)
		next_measured->switched_ns = ts;
	return 0;
}

static __always_inline int record_waking(__u64 *ctx, __u16 kind)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	__s32 pid = task->pid;
	struct measured *m = measured_of((__u32)pid);
	__u64 ts;
	if (m && m->pending && m->expired_ns != 0 && m->switched_ns == 0 &&
	    clock_policy != CLOCK_EVERY_EVENT) {
		/* Woken by its own timer: the waking is inside that callback, stamped with its time. */
		ts = m->expired_ns;
	} else if (m) {
		ts = clock_now(here.state, here.window);
	} else {
		ts = time_if_pending(here.state, here.window, &kind);
	}
	if ((kind & ~EVENT_TIME_LOWER_BOUND) == EVENT_WAKING && m && !m->pending) {
		/* A hand-off thread: its wake-up starts here. */
		begin_wakeup(m, here.state, here.window, here.cpu, ts, 0);
	}
	if (m && m->pending && m->switched_ns == 0 &&
	    (__u32)bpf_get_current_pid_tgid() == (__u32)pid) {
		/* Woken while it runs (its timer fired in an interrupt on top of it: it slept towards
		 * a target already past): no switch-in follows, it runs on from here. */
		m->switched_ns = ts;
	}
	struct rtlab_event *event = current_task_event(&here, ts, kind);
	event->wake.pid = pid;
	event->wake.prio = task->prio;
	/* task_cpu(p), as the tracefs event's target_cpu. */
	event->wake.target_cpu = (__s32)task->thread_info.cpu;
	copy_comm(event->wake.comm, task->comm);
	return 0;
}

TRACEPOINT_PROGRAM(sched_waking, record_waking(ctx, EVENT_WAKING))
TRACEPOINT_PROGRAM(sched_wakeup, record_waking(ctx, EVENT_WAKEUP))

SEC("tp_btf/sched_migrate_task")
int rtlab_sched_migrate_task(__u64 *ctx)
{
	struct task_struct *task = (struct task_struct *)ctx[0];
	__u32 dest_cpu = (__u32)ctx[1];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	struct rtlab_event *event = event_timed_if_pending(&here, EVENT_MIGRATE);
	event->migrate.pid = task->pid;
	event->migrate.prio = task->prio;
	event->migrate.orig_cpu = (__s32)here.cpu;
	event->migrate.dest_cpu = (__s32)dest_cpu;
	return 0;
}

SEC("tp_btf/irq_handler_entry")
int rtlab_irq_handler_entry(__u64 *ctx)
{
	__s32 irq = (__s32)ctx[0];
	struct irqaction *action = (struct irqaction *)ctx[1];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	struct rtlab_event *event =
		enter_context(&here, clock_now(here.state, here.window), EVENT_IRQ_ENTRY, (__u64)irq);
	event->irq.irq = irq;
	bpf_probe_read_kernel_str(event->irq.name, 16, action->name);
	return 0;
}

SEC("tp_btf/irq_handler_exit")
int rtlab_irq_handler_exit(__u64 *ctx)
{
	__s32 irq = (__s32)ctx[0];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	exit_context(&here, EVENT_IRQ_EXIT)->irq.irq = irq;
	return 0;
}

static __always_inline int record_softirq(__u64 *ctx, __u16 kind)
{
	__u32 vector = (__u32)ctx[0];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	context_boundary(&here, kind == EVENT_SOFTIRQ_ENTRY, kind, vector)->softirq.vector = vector;
	return 0;
}

TRACEPOINT_PROGRAM(softirq_entry, record_softirq(ctx, EVENT_SOFTIRQ_ENTRY))
TRACEPOINT_PROGRAM(softirq_exit, record_softirq(ctx, EVENT_SOFTIRQ_EXIT))

SEC("tp_btf/hrtimer_expire_entry")
int rtlab_hrtimer_expire_entry(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	ktime_t *now_pointer = (ktime_t *)ctx[1];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	__s64 now = 0;
	bpf_probe_read_kernel(&now, sizeof(now), now_pointer);
	/* The tracepoint carries the expiry's time: no clock read. */
	__u64 ts = clock_policy == CLOCK_EVERY_EVENT ? clock_now(here.state, here.window)
						     : known_time(here.window, (__u64)now);
	void *function = timer->function;
	if (hrtimer_wakeup_function != 0 && (__u64)function == hrtimer_wakeup_function) {
		/* The sleeper is beyond the hrtimer the argument's type describes, so these two reads
		 * go through bpf_probe_read_kernel. */
		struct task_struct *task = 0;
		struct hrtimer_sleeper *sleeper = (struct hrtimer_sleeper *)timer;
		bpf_probe_read_kernel(&task, sizeof(task), &sleeper->task);
		__s32 pid = 0;
		if (task)
			bpf_probe_read_kernel(&pid, sizeof(pid), &task->pid);
		struct measured *m = measured_of((__u32)pid);
		if (m && m->pending && m->switched_ns != 0) {
			/* The thread ran on since its last wake-up without blocking (it overran its
			 * period, or was preempted before it slept): that wake-up ends here. */
			finish_wakeup(m, here.window, (__u32)pid, here.cpu, ts, here.state->interrupted);
		}
		if (m)
			begin_wakeup(m, here.state, here.window, here.cpu, (__u64)timer->_softexpires,
				     (__u64)now);
	}
	struct rtlab_event *event = enter_context(&here, ts, EVENT_HRTIMER_ENTRY, (__u64)timer);
	event->hrtimer.timer = (__u64)timer;
	event->hrtimer.function = (__u64)function;
	event->hrtimer.now = now;
	return 0;
}

SEC("tp_btf/hrtimer_expire_exit")
int rtlab_hrtimer_expire_exit(__u64 *ctx)
{
	struct hrtimer *timer = (struct hrtimer *)ctx[0];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	exit_context(&here, EVENT_HRTIMER_EXIT)->hrtimer.timer = (__u64)timer;
	return 0;
}

SEC("tp_btf/workqueue_execute_start")
int rtlab_workqueue_execute_start(__u64 *ctx)
{
	struct work_struct *work = (struct work_struct *)ctx[0];
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	event_timed_if_pending(&here, EVENT_WORK_START)->work.function = (__u64)work->func;
	return 0;
}

SEC("tp_btf/workqueue_execute_end")
int rtlab_workqueue_execute_end(__u64 *ctx)
{
	/* The end only closes the work item; its function is not read (the verifier refuses a
	 * function-pointer argument). */
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	event_timed_if_pending(&here, EVENT_WORK_END)->work.function = 0;
	return 0;
}

static __always_inline int record_vector(__u16 kind, __u32 id)
{
	struct this_cpu here;
	if (!enter_measured_cpu(&here))
		return 0;
	context_boundary(&here, kind == EVENT_VECTOR_ENTRY, kind, id)->vector.id = id;
	return 0;
}

/* A vector's entry and exit programs (rtlab_NAME_entry, rtlab_NAME_exit). */
#define VECTOR_PROGRAMS(name, id)                                                 \
	TRACEPOINT_PROGRAM(name##_entry, record_vector(EVENT_VECTOR_ENTRY, id)) \
	TRACEPOINT_PROGRAM(name##_exit, record_vector(EVENT_VECTOR_EXIT, id))

VECTOR_PROGRAMS(local_timer, VECTOR_LOCAL_TIMER)
VECTOR_PROGRAMS(reschedule, VECTOR_RESCHEDULE)
VECTOR_PROGRAMS(call_function, VECTOR_CALL_FUNCTION)
VECTOR_PROGRAMS(call_function_single, VECTOR_CALL_FUNCTION_SINGLE)
VECTOR_PROGRAMS(irq_work, VECTOR_IRQ_WORK)
