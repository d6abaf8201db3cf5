/*
 * napping_spinner: one thread that spins and naps — the RealtimeKit1 attacker a per-CPU canary does
 * not see (each nap lets the canary run), and, with a small duty cycle, a modest real-time thread.
 *
 *   napping_spinner [-c CPU] [-d SECONDS] [-r RUN_US] [-n NAP_US]
 *
 * The main thread pins itself to CPU (default 1), then spins RUN (default 100000 us) and sleeps NAP
 * (default 100 us), over and over: RLIMIT_RTTIME never fires (it counts only unbroken running), the
 * canary runs in every nap, yet once the thread is SCHED_RR it holds about RUN / (RUN + NAP) of its
 * CPU. `-r 1000 -n 9000` is a modest thread: 10 % of a CPU.
 *
 * It prints "tids PID TID" on stdout first (TID is PID: the spinner is the main thread), then, at
 * the end, one JSON line:
 *   {"made_realtime":true,"demoted":true,"realtime_at_ns":…,"demoted_at_ns":…,"demoted_after_ms":…,
 *    "realtime_cpu_share":…}
 * realtime_at_ns is when it first saw itself real-time (CLOCK_MONOTONIC; it looks at its policy
 * every 100 us of spinning and after every nap), demoted_at_ns when it first saw itself back at
 * SCHED_OTHER, realtime_cpu_share the CPU time it used while real-time over the wall time it was
 * real-time. It stops on its own: SECONDS (default 10, at most 60) after its start, or 200 ms after
 * it was demoted.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int is_realtime(void)
{
    int policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    return policy == SCHED_RR || policy == SCHED_FIFO;
}

int main(int argc, char **argv)
{
    int option, cpu = 1;
    double seconds = 10;
    uint64_t run_ns = 100000000u, nap_ns = 100000u;
    while ((option = getopt(argc, argv, "c:d:r:n:")) != -1) {
        switch (option) {
        case 'c': cpu = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 'r': run_ns = (uint64_t)atoll(optarg) * 1000u; break;
        case 'n': nap_ns = (uint64_t)atoll(optarg) * 1000u; break;
        default:
            fprintf(stderr, "usage: napping_spinner [-c CPU] [-d SECONDS] [-r RUN_US] [-n NAP_US]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 60 || run_ns == 0 || run_ns > 1000000000u || nap_ns == 0 ||
        nap_ns > 1000000000u) {
        fprintf(stderr, "napping_spinner: -d must be in (0, 60] s, -r and -n in (0, 1000000] us\n");
        return 2;
    }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set)) {
        perror("napping_spinner: sched_setaffinity");
        return 3;
    }
    uint64_t end_ns = clock_ns(CLOCK_MONOTONIC) + (uint64_t)(seconds * 1e9);
    printf("tids %d %d\n", (int)getpid(), (int)getpid());
    fflush(stdout);
    uint64_t realtime_at = 0, demoted_at = 0, cpu_at_realtime = 0, cpu_at_demotion = 0;
    struct timespec nap = {.tv_sec = (time_t)(nap_ns / 1000000000u),
                           .tv_nsec = (long)(nap_ns % 1000000000u)};
    for (;;) {
        uint64_t start = clock_ns(CLOCK_MONOTONIC), last_look = 0, now = start;
        for (;;) {
            now = clock_ns(CLOCK_MONOTONIC);
            if (now - last_look >= 100000 || now == start) {
                int realtime = is_realtime();
                if (realtime && !realtime_at) {
                    realtime_at = now;
                    cpu_at_realtime = clock_ns(CLOCK_THREAD_CPUTIME_ID);
                }
                if (!realtime && realtime_at && !demoted_at) {
                    demoted_at = now;
                    cpu_at_demotion = clock_ns(CLOCK_THREAD_CPUTIME_ID);
                }
                last_look = now;
            }
            if (now - start >= run_ns || now >= end_ns)
                break;
        }
        if (now >= end_ns || (demoted_at && now > demoted_at + 200000000u))
            break;
        nanosleep(&nap, NULL);
    }
    uint64_t until = demoted_at ? demoted_at : clock_ns(CLOCK_MONOTONIC);
    uint64_t cpu_until = demoted_at ? cpu_at_demotion : clock_ns(CLOCK_THREAD_CPUTIME_ID);
    double share = realtime_at && until > realtime_at
                       ? (double)(cpu_until - cpu_at_realtime) / (double)(until - realtime_at)
                       : 0.0;
    printf("{\"made_realtime\":%s,\"demoted\":%s,\"realtime_at_ns\":%llu,\"demoted_at_ns\":%llu,"
           "\"demoted_after_ms\":%.1f,\"realtime_cpu_share\":%.3f}\n",
           realtime_at ? "true" : "false", demoted_at ? "true" : "false",
           (unsigned long long)realtime_at, (unsigned long long)demoted_at,
           demoted_at ? (double)(demoted_at - realtime_at) / 1e6 : -1.0, share);
    return 0;
}
