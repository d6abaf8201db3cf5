/*
 * rtlab.h: CPU Reservations and Time Constraints from the rtlab daemon, for C programs.
 *
 * Link with librtlab_client.so (-lrtlab_client) or librtlab_client.a (plus -lpthread -ldl -lm).
 * The daemon listens on $RTLAB_SOCKET, else /run/rtlab/rtlabd.sock (start it with
 * `sudo rtlab daemon` or `systemctl start rtlabd.socket`). Every function returns 0 on success
 * or a negative errno; rtlab_strerror() says what it means, rtlab_last_error_message() gives the
 * daemon's own words. All functions are thread-safe; reservations and constraints are for the
 * calling thread, and end on their own when it exits.
 */
#ifndef RTLAB_H
#define RTLAB_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RTLAB_BACKEND_DEADLINE 1 /* the kernel's SCHED_DEADLINE (CBS) */
#define RTLAB_BACKEND_DISPATCH 2 /* rtlab's plan dispatcher */

/* A granted reservation. */
struct rtlab_grant {
	uint64_t grant_id;
	uint64_t requested_amount_ns;
	uint64_t requested_period_ns;
	/* At least requested_amount_ns lands in every window of requested_period_ns. */
	uint64_t granted_amount_ns;
	uint64_t granted_period_ns;
	int32_t cpu;     /* the CPU the thread is confined to, or -1 (global EDF) */
	int32_t backend; /* RTLAB_BACKEND_DEADLINE or RTLAB_BACKEND_DISPATCH */
};

/*
 * Reserves amount_ns of every period_ns for the calling thread, held until rtlab_release() or
 * the thread's exit; fills *grant when grant is not NULL. -ENOSPC: no CPU has room; -EDQUOT: over
 * this user's limit; -EAGAIN: over this user's request budget (try again later);
 * -ECONNREFUSED: no daemon; -EEXIST: the thread already holds one.
 */
int rtlab_reserve(uint64_t amount_ns, uint64_t period_ns, struct rtlab_grant *grant);

/* Releases the calling thread's reservation (-ENOENT: it has none). */
int rtlab_release(void);

/*
 * Asks for estimate_ns of CPU for the calling thread between the CLOCK_MONOTONIC times start_ns
 * and deadline_ns (see rtlab_now_ns()). Answers at once: 0 and *id, or -EBUSY when it cannot be
 * guaranteed.
 */
int rtlab_begin_constraint(uint64_t start_ns, uint64_t estimate_ns, uint64_t deadline_ns,
			   uint64_t *id);

/*
 * Ends constraint id; *used_ns (when not NULL) gets the CPU time the thread used since it began.
 * Returns 0 when the deadline was met, -ETIME when it was missed (*used_ns filled all the same).
 */
int rtlab_end_constraint(uint64_t id, uint64_t *used_ns);

/* CLOCK_MONOTONIC now, in nanoseconds. */
uint64_t rtlab_now_ns(void);

/* What a negative return value means (a static string). */
const char *rtlab_strerror(int error);

/* The daemon's message for the calling thread's last failed call ("" if none). */
const char *rtlab_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* RTLAB_H */
