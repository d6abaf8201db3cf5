/* rtlab's BPF programs: the few kernel types, helpers and map macros they use, written by hand
 * instead of a generated vmlinux.h. Struct layouts are not fixed here: every kernel struct is
 * marked preserve_access_index, so clang emits CO-RE relocations and the loader (aya) resolves
 * each field's offset against the running kernel's BTF (/sys/kernel/btf/vmlinux). Only the fields
 * the programs read are declared.
 *
 * The record layouts shared with user space (struct rtlab_event, struct rtlab_episode, …) are
 * mirrored in crates/rtlab-bpf/src/records.rs; change both together. */
#ifndef RTLAB_BPF_H
#define RTLAB_BPF_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef signed char __s8;
typedef int __s32;
typedef long long __s64;
typedef __s64 ktime_t;
typedef _Bool bool;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name

/* enum bpf_map_type */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_RINGBUF 27
/* map update and ring buffer flags */
#define BPF_ANY 0
#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2

/* The helpers, by their numbers in include/uapi/linux/bpf.h (stable ABI). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *unsafe_ptr) = (void *)113;
static long (*bpf_probe_read_kernel_str)(void *dst, __u32 size, const void *unsafe_ptr) = (void *)115;
static void *(*bpf_ringbuf_reserve)(void *ringbuf, __u64 size, __u64 flags) = (void *)131;
static void (*bpf_ringbuf_submit)(void *data, __u64 flags) = (void *)132;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;

/* Kernel types: only the fields read; offsets come from the kernel's BTF at load time. */
struct thread_info {
	__u32 cpu;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	__s32 pid;
	__s32 prio;
	char comm[16];
} __attribute__((preserve_access_index));

struct hrtimer {
	ktime_t _softexpires;
	void *function;
} __attribute__((preserve_access_index));

struct hrtimer_sleeper {
	struct hrtimer timer;
	struct task_struct *task;
} __attribute__((preserve_access_index));

struct irqaction {
	const char *name;
} __attribute__((preserve_access_index));

struct work_struct {
	void *func;
} __attribute__((preserve_access_index));

#endif
