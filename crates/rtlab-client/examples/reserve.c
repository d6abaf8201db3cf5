/*
 * Reserves 1 ms of every 10 ms for this thread through the rtlab daemon, runs one time constraint
 * (2 ms of work within the next 50 ms), and releases. Exit status 0 when all of it worked.
 *
 *   cc -Wall -Wextra -o reserve crates/rtlab-client/examples/reserve.c \
 *      -Icrates/rtlab-client/include target/release/librtlab_client.a -lpthread -ldl -lm
 *   RTLAB_SOCKET=/run/rtlab/rtlabd.sock ./reserve
 */
#include <errno.h>
#include <stdio.h>
#include <time.h>

#include "rtlab.h"

static uint64_t thread_cpu_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int fail(const char *what, int error)
{
	fprintf(stderr, "reserve: %s: %s (%s)\n", what, rtlab_strerror(error),
		rtlab_last_error_message());
	return 1;
}

int main(void)
{
	struct rtlab_grant grant;
	int error = rtlab_reserve(1000000, 10000000, &grant);
	if (error < 0)
		return fail("rtlab_reserve", error);
	printf("grant %llu: %llu/%llu ns granted as %llu/%llu ns, backend %s, cpu %d\n",
	       (unsigned long long)grant.grant_id,
	       (unsigned long long)grant.requested_amount_ns,
	       (unsigned long long)grant.requested_period_ns,
	       (unsigned long long)grant.granted_amount_ns,
	       (unsigned long long)grant.granted_period_ns,
	       grant.backend == RTLAB_BACKEND_DEADLINE ? "deadline" : "dispatch", grant.cpu);

	uint64_t now = rtlab_now_ns();
	uint64_t constraint;
	error = rtlab_begin_constraint(now, 2000000, now + 50000000, &constraint);
	if (error < 0)
		return fail("rtlab_begin_constraint", error);
	uint64_t spin_until = thread_cpu_ns() + 2000000;
	while (thread_cpu_ns() < spin_until)
		;
	uint64_t used_ns = 0;
	error = rtlab_end_constraint(constraint, &used_ns);
	if (error < 0 && error != -ETIME)
		return fail("rtlab_end_constraint", error);
	printf("constraint %llu: used %llu ns, %s\n", (unsigned long long)constraint,
	       (unsigned long long)used_ns, error == 0 ? "met its deadline" : "missed its deadline");

	error = rtlab_release();
	if (error < 0)
		return fail("rtlab_release", error);
	printf("released\n");
	/* A second release has nothing to release: the daemon says so. */
	error = rtlab_release();
	if (error != -ENOENT)
		return fail("second rtlab_release", error);
	return 0;
}
