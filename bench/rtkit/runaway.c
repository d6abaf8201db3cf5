/*
 * runaway: two threads that starve one CPU once someone (rtkit, rtlab --rtkit) makes them real-time,
 * while each stays inside RLIMIT_RTTIME — the case a RealtimeKit1 canary exists for.
 *
 *   runaway [-c CPU] [-d SECONDS] [-s SLICE_US]
 *
 * Both threads are pinned to CPU (default 1) and hand the CPU to each other through pipes: each
 * spins SLICE (default 5000 us), wakes the other, and blocks until it is woken in turn. Each
 * blocks every slice, so RLIMIT_RTTIME never fires, yet once both are SCHED_RR the CPU never
 * goes to anything of lower priority (the canary at RR 1, every SCHED_OTHER thread).
 *
 * It prints "tids PID TID_A TID_B" on stdout first, then, at the end, one JSON line:
 *   {"made_realtime":true,"demoted":true,"realtime_at_ns":…,"demoted_at_ns":…,"demoted_after_ms":…}
 * realtime_at_ns is the first time both threads had seen themselves real-time (CLOCK_MONOTONIC,
 * each looks at its policy every 100 us of spinning, so it is late by at most one slice when a
 * thread was blocked), demoted_at_ns the time the last of them saw itself back at SCHED_OTHER.
 * It stops on its own: SECONDS (default 5) after its start, or 200 ms after both were demoted.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static uint64_t slice_ns = 5000000, end_ns;
static int cpu = 1;
static int pipes[2][2];
static volatile int stop;

struct runner {
    int index;
    pid_t tid;
    uint64_t realtime_at, demoted_at;
    volatile int ready;
};

static struct runner runners[2];

static uint64_t monotonic_ns(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
}

static int is_realtime(void)
{
    int policy = sched_getscheduler(0) & ~SCHED_RESET_ON_FORK;
    return policy == SCHED_RR || policy == SCHED_FIFO;
}

static void look(struct runner *self, uint64_t now)
{
    int realtime = is_realtime();
    if (realtime && !self->realtime_at)
        self->realtime_at = now;
    if (!realtime && self->realtime_at && !self->demoted_at)
        self->demoted_at = now;
}

static void *run(void *argument)
{
    struct runner *self = argument;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
    self->tid = (pid_t)syscall(SYS_gettid);
    self->ready = 1;
    char token = 1;
    if (self->index == 1 && read(pipes[1][0], &token, 1) != 1)
        return NULL;
    while (!stop) {
        uint64_t start = monotonic_ns(), last_look = 0;
        for (;;) {
            uint64_t now = monotonic_ns();
            if (now - last_look >= 100000) {
                look(self, now);
                last_look = now;
            }
            if (now - start >= slice_ns)
                break;
        }
        uint64_t now = monotonic_ns();
        if (now >= end_ns)
            stop = 1;
        if (runners[0].demoted_at && runners[1].demoted_at &&
            now > runners[0].demoted_at + 200000000u && now > runners[1].demoted_at + 200000000u)
            stop = 1;
        /* Wake the other, then wait for it (the other also sees `stop` and wakes us once more). */
        if (write(pipes[1 - self->index][1], &token, 1) != 1)
            break;
        if (stop)
            break;
        if (read(pipes[self->index][0], &token, 1) != 1)
            break;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int option;
    double seconds = 5;
    while ((option = getopt(argc, argv, "c:d:s:")) != -1) {
        switch (option) {
        case 'c': cpu = atoi(optarg); break;
        case 'd': seconds = atof(optarg); break;
        case 's': slice_ns = (uint64_t)atoll(optarg) * 1000u; break;
        default:
            fprintf(stderr, "usage: runaway [-c CPU] [-d SECONDS] [-s SLICE_US]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 60 || slice_ns == 0 || slice_ns > 100000000u) {
        fprintf(stderr, "runaway: -d must be in (0, 60] s and -s in (0, 100000] us\n");
        return 2;
    }
    end_ns = monotonic_ns() + (uint64_t)(seconds * 1e9);
    if (pipe(pipes[0]) || pipe(pipes[1])) {
        perror("runaway: pipe");
        return 3;
    }
    pthread_t threads[2];
    for (int index = 0; index < 2; index++) {
        runners[index].index = index;
        if (pthread_create(&threads[index], NULL, run, &runners[index])) {
            perror("runaway: pthread_create");
            return 3;
        }
    }
    while (!runners[0].ready || !runners[1].ready)
        usleep(1000);
    printf("tids %d %d %d\n", (int)getpid(), (int)runners[0].tid, (int)runners[1].tid);
    fflush(stdout);
    for (int index = 0; index < 2; index++)
        pthread_join(threads[index], NULL);
    uint64_t realtime_at = runners[0].realtime_at > runners[1].realtime_at ? runners[0].realtime_at
                                                                           : runners[1].realtime_at;
    uint64_t demoted_at = runners[0].demoted_at > runners[1].demoted_at ? runners[0].demoted_at
                                                                        : runners[1].demoted_at;
    int made = runners[0].realtime_at && runners[1].realtime_at;
    int demoted = made && runners[0].demoted_at && runners[1].demoted_at;
    printf("{\"made_realtime\":%s,\"demoted\":%s,\"realtime_at_ns\":%llu,\"demoted_at_ns\":%llu,"
           "\"demoted_after_ms\":%.1f}\n",
           made ? "true" : "false", demoted ? "true" : "false", (unsigned long long)realtime_at,
           (unsigned long long)demoted_at,
           demoted ? (double)(demoted_at - realtime_at) / 1e6 : -1.0);
    return 0;
}
