/* The application-trace program's kernel types, helpers and map macros, written by hand (like
 * rtlab_bpf.h, which belongs to the explain recorder and is not shared, so the two programs can
 * change independently). Every kernel struct is preserve_access_index: clang emits CO-RE
 * relocations and the loader (aya) resolves each field against the running kernel's BTF. Only
 * the fields read are declared. x86-64 only (pt_regs' argument registers). */
#ifndef RTLAB_APPTRACE_BPF_H
#define RTLAB_APPTRACE_BPF_H

typedef unsigned char __u8;
typedef unsigned short __u16;
typedef unsigned int __u32;
typedef unsigned long long __u64;
typedef int __s32;
typedef long long __s64;
typedef _Bool bool;

#define SEC(name) __attribute__((section(name), used))
#define __always_inline inline __attribute__((always_inline))
#define __uint(name, val) int (*name)[val]
#define __type(name, val) typeof(val) *name
/* Keeps clang from merging tests on pointers into arithmetic the verifier refuses. */
#define barrier_var(var) asm volatile("" : "+r"(var))

/* enum bpf_map_type */
#define BPF_MAP_TYPE_HASH 1
#define BPF_MAP_TYPE_ARRAY 2
#define BPF_MAP_TYPE_PERCPU_ARRAY 6
#define BPF_MAP_TYPE_LRU_HASH 9
#define BPF_MAP_TYPE_RINGBUF 27
/* map update, ring buffer output and query flags */
#define BPF_ANY 0
#define BPF_NOEXIST 1
#define BPF_RB_NO_WAKEUP 1
#define BPF_RB_FORCE_WAKEUP 2
#define BPF_RB_AVAIL_DATA 0

/* The helpers, by their numbers in include/uapi/linux/bpf.h (stable ABI). */
static void *(*bpf_map_lookup_elem)(void *map, const void *key) = (void *)1;
static long (*bpf_map_update_elem)(void *map, const void *key, const void *value, __u64 flags) = (void *)2;
static long (*bpf_map_delete_elem)(void *map, const void *key) = (void *)3;
static __u64 (*bpf_ktime_get_ns)(void) = (void *)5;
static __u32 (*bpf_get_smp_processor_id)(void) = (void *)8;
static __u64 (*bpf_get_current_pid_tgid)(void) = (void *)14;
static long (*bpf_get_current_comm)(void *buf, __u32 size_of_buf) = (void *)16;
static long (*bpf_probe_read_kernel)(void *dst, __u32 size, const void *unsafe_ptr) = (void *)113;
static long (*bpf_ringbuf_output)(void *ringbuf, void *data, __u64 size, __u64 flags) = (void *)130;
static __u64 (*bpf_ringbuf_query)(void *ringbuf, __u64 flags) = (void *)134;

/* Kernel types: only the fields read; offsets come from the kernel's BTF at load time. */
struct thread_info {
	__u32 cpu;
} __attribute__((preserve_access_index));

struct sched_entity {
	__u64 sum_exec_runtime;
} __attribute__((preserve_access_index));

struct task_struct {
	struct thread_info thread_info;
	struct sched_entity se;
	int exit_state;
	__s32 pid;
	__s32 tgid;
	int prio;
	int normal_prio;
	char comm[16];
} __attribute__((preserve_access_index));

struct pt_regs {
	unsigned long dx;
	unsigned long si;
	unsigned long di;
	unsigned long orig_ax;
} __attribute__((preserve_access_index));

#endif
