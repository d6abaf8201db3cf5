/*
 * stepping_worker: a periodic thread whose work per activation changes when told — an audio
 * program whose load steps up (a plugin added) for a followed reservation to follow.
 *
 *   stepping_worker [-p PERIOD_US] [-w WORK_US] [-d SECONDS]
 *
 * The main thread wakes every PERIOD (default 10000 us, absolute CLOCK_MONOTONIC times) and spins
 * WORK (default 500 us) of its own CPU time (CLOCK_THREAD_CPUTIME_ID, so that time taken from it
 * by others is not counted as work done), then sleeps to its next period. Each line read on
 * stdin is a new WORK in us (0 to PERIOD) from the next activation on. It prints "tids PID TID" on
 * stdout first (TID is PID: the worker is the main thread) and nothing after (its reader may have
 * closed the pipe). It stops on its own: when stdin ends (the test closed it), or SECONDS (default
 * 30, at most 120) after its start.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t work_ns;
static _Atomic int stdin_ended;
static uint64_t period_ns = 10000000u;

static uint64_t clock_ns(clockid_t clock)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static void *read_steps(void *unused)
{
    (void)unused;
    char line[64];
    while (fgets(line, sizeof line, stdin)) {
        uint64_t work = (uint64_t)strtoull(line, NULL, 10) * 1000u;
        if (work <= period_ns) {
            atomic_store(&work_ns, work);
        }
    }
    atomic_store(&stdin_ended, 1);
    return NULL;
}

int main(int argc, char **argv)
{
    int option;
    double seconds = 30;
    uint64_t work = 500000u;
    while ((option = getopt(argc, argv, "p:w:d:")) != -1) {
        switch (option) {
        case 'p': period_ns = (uint64_t)atoll(optarg) * 1000u; break;
        case 'w': work = (uint64_t)atoll(optarg) * 1000u; break;
        case 'd': seconds = atof(optarg); break;
        default:
            fprintf(stderr, "usage: stepping_worker [-p PERIOD_US] [-w WORK_US] [-d SECONDS]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 120 || period_ns < 100000u || period_ns > 1000000000u ||
        work > period_ns) {
        fprintf(stderr, "stepping_worker: -d in (0, 120] s, -p in [100, 1000000] us, -w at most -p\n");
        return 2;
    }
    atomic_store(&work_ns, work);
    printf("tids %d %d\n", (int)getpid(), (int)getpid());
    fflush(stdout);
    pthread_t reader;
    if (pthread_create(&reader, NULL, read_steps, NULL)) {
        fprintf(stderr, "stepping_worker: pthread_create failed\n");
        return 3;
    }
    uint64_t start = clock_ns(CLOCK_MONOTONIC);
    uint64_t end = start + (uint64_t)(seconds * 1e9);
    uint64_t next = start;
    while (!atomic_load(&stdin_ended) && clock_ns(CLOCK_MONOTONIC) < end) {
        uint64_t spin_until = clock_ns(CLOCK_THREAD_CPUTIME_ID) + atomic_load(&work_ns);
        while (clock_ns(CLOCK_THREAD_CPUTIME_ID) < spin_until) {
        }
        next += period_ns;
        uint64_t now = clock_ns(CLOCK_MONOTONIC);
        if (next < now) {
            /* Behind (held off the CPU): go on from now rather than catching up in a burst. */
            next = now;
        }
        struct timespec at = {.tv_sec = (time_t)(next / 1000000000u),
                              .tv_nsec = (long)(next % 1000000000u)};
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
    }
    return 0;
}
